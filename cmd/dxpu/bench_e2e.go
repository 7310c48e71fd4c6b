package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/bytesize"
	"github.com/dxpu/dxpu/internal/app/e2ebench"
)

// newBenchE2ECmd builds `dxpu bench e2e`: the wall-clock path end to end
// against a UDP echo on the same path.
func newBenchE2ECmd(e *env) *cobra.Command {
	var (
		o      e2ebench.Options
		sizes  string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "e2e",
		Short: "Measure the wall-clock path (emulated host, bridge pair, emulated GPU) against a UDP echo on the same path",
		Long: `e2e runs the real-time path as the bridges run in production: an emulated
host on the wall clock, a host-side and a GPU-side bridge exchanging frames
over UDP, and an emulated GPU. In the same run it measures the baseline, a
UDP echo over the same path, and a lossless bridge pair's goodput, and
reports MMIO read and DMA read round-trip percentiles, launch+sync latency
(commands in VRAM; in host memory and native beside it), H2D/D2H by size,
CPU seconds per GB moved, and every figure's ratio to its baseline.

The host and the GPU each run on a clock and goroutine of their own, as a
host and a GPU box are two machines, each side polling its bridge's socket
for --spin after its last work, as a kernel-bypass bridge on a core of its
own does (--one-clock: both on one; "clocks" in the result says which).
The lossless pair's goodput polls the same way (dxpu bridge --spin): its
host side streams 256-byte writes in full frames.

--loopback runs everything on 127.0.0.1 (no root). Without it (root only) the
host side, XDP switch and GPU side each run in a network namespace and the
echo crosses the switch as bridge frames do. Times in us, rates in Gbit/s.`,
		Example: "  dxpu bench e2e --json            # as root: through network namespaces and the XDP switch\n  dxpu bench e2e --loopback --sizes 64K,1M,16M --samples 500",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if err := flagsGiven(cmd, "sizes", "mtu"); err != nil {
				return exitCodeError{2, err}
			}
			if o.Sizes, err = bytesize.ParseList("sizes", sizes); err != nil {
				return exitCodeError{2, err}
			}
			if err := flagsPositive(cmd, "samples", "copies", "link-for"); err != nil {
				return exitCodeError{2, err}
			}
			if err := flagsNonNegative(cmd, "mtu", "spin"); err != nil {
				return exitCodeError{2, err}
			}
			o.Log, o.Progress = e.log, e.stderr
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := e2ebench.Run(ctx, o)
			if err != nil { // options, set-up, an interrupt: 2; a run that failed: 1
				return exitFor(err, 2)
			}
			if asJSON {
				return e.printJSON(res)
			}
			return res.WriteText(e.stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Loopback, "loopback", false, "run on 127.0.0.1 without namespaces (no root needed)")
	f.StringVar(&sizes, "sizes", "", "copy sizes in bytes, comma-separated, suffixes K, M, G: multiples of 4 up to 1G (default 64K,256K,1M,4M,16M,64M)")
	f.IntVar(&o.Samples, "samples", 2000, "MMIO reads and echoes timed (DMA reads and launches: a quarter)")
	f.IntVar(&o.Copies, "copies", 3, "copies of each size each way; the median rate is reported")
	f.DurationVar(&o.LinkFor, "link-for", time.Second, "how long the lossless link's goodput is measured")
	bytesVar(f, &o.MTU, "mtu", 0, "bridge MTU from the dxpu header on (default 9000 on loopback, 1472 in namespaces)")
	f.BoolVar(&o.NoBatch, "no-batch", false, "send each TLP as produced instead of packing each moment's TLPs into few frames")
	f.BoolVar(&o.NoBusyPoll, "no-busy-poll", false, "leave receiving to the bridges' goroutines instead of the spinning clock")
	f.BoolVar(&o.OneClock, "one-clock", false, "run the emulated host and GPU on one clock and goroutine (default: each side on its own, as two machines)")
	f.DurationVar(&o.Spin, "spin", 0, "how long each side's clock polls after its last work before sleeping (default 2ms)")
	f.StringVar(&o.ProfileDir, "profile", "", "write pprof CPU (per phase), mutex and block profiles into this directory")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
