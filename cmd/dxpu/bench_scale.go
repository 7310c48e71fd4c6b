package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/scalebench"
)

// newBenchScaleCmd builds `dxpu bench scale` (package
// internal/app/scalebench measures).
func newBenchScaleCmd(e *env) *cobra.Command {
	var (
		o                        scalebench.Options
		scenarios, pairs, borrow string
		asJSON                   bool
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Measure many bridge pairs at once, each pair two dxpu bridge processes: aggregate goodput, fairness, latency under load",
		Long: `scale runs many pairs at once, each pair a host-side and a GPU-side
'dxpu bridge' process (a NetTLP adapter and a memory device as their PCIe
sides, sealed with a key per pair), and floods every pair with DMA reads
from this process (--readers reads of --read-bytes outstanding per pair).
It reports the aggregate goodput (aggregate_gbps), each pair's with Jain's
fairness index (jain_fairness), per host and per box, the growth against
the one-pair point of the sweep, a 4-byte read's p50/p99 on the first pair
under the load in turns with a UDP echo (and idle, before the load), the
bridges' CPU seconds per GB, and, in namespaces, the switch's drops; the
raw UDP goodput of the same path is measured once as the baseline.

Each pair's two bridges run on one CPU of their own (--cpus, GOMAXPROCS 1),
pair i on the i-th CPU this process may use, round robin, as a bridge box
keeps its pairs apart: on a 2-core machine that gave 1.1-1.7x the goodput
at 0.53-0.9x the CPU per GB of unpinned bridges. --pin=false measures them
left to the scheduler. --spin gives the bridges --spin: with a pair's two
bridges on one CPU a spinning one delays the other (on a 2-core machine
50us cost a pair 0.87-0.92x its goodput).

--mtu and --mps size the frames and the completions: 'dxpu bridge' ships
1472-byte frames (a 1500-byte Ethernet MTU) and a memory device answering
with 256-byte completions, each one a NetTLP datagram to the adapter; with
jumbo frames (--mtu 8972) and --mps 2048 a 4 KiB read crosses in one frame
and comes back in two datagrams: on a 2-core machine 1.8-2.6x the goodput
at 0.44-0.62x the bridges' CPU per GB of the defaults.

Scenarios (--scenarios): sweep (--pairs, default 1,2,4,8,16,32 pairs, a host
and a box each), borrow (one host borrowing --borrow GPUs, default 8 and 32,
from several boxes), lend (one box lending --lend GPUs to as many hosts),
switch (--switch-pairs pairs through one XDP switch; namespaces only).
--pairs alone runs the sweep alone. --loopback runs everything on 127.x
addresses (no root); without it (root only) the host sides run in one
network namespace and the GPU sides in another behind the XDP switch.

The bridges run as --bridge-binary (default: this dxpu): one that is not an
executable file is refused before anything runs (exit status 2); a bridge
that exits during the run ends it with exit status 1, naming the binary,
its exit status and the last line of its stderr.`,
		Example: "  dxpu bench scale --loopback --pairs 1,2,4,8 --json\n  dxpu bench scale --loopback --scenarios borrow,lend\n  dxpu bench scale            # as root: namespaces and the XDP switch, every scenario",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if err := flagsGiven(cmd, "pairs", "borrow", "scenarios"); err != nil {
				return exitCodeError{2, err}
			}
			if o.Pairs, err = intList("pairs", pairs); err != nil {
				return exitCodeError{2, err}
			}
			if o.Borrow, err = intList("borrow", borrow); err != nil {
				return exitCodeError{2, err}
			}
			if scenarios != "" {
				o.Scenarios = strings.Split(scenarios, ",")
			} else if cmd.Flags().Changed("pairs") {
				o.Scenarios = []string{scalebench.Sweep}
			}
			if err := flagsPositive(cmd, "lend", "switch-pairs", "duration", "read-bytes", "readers", "idle-samples", "mtu", "mps"); err != nil {
				return exitCodeError{2, err}
			}
			o.Log, o.Progress = e.log, e.stderr
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := scalebench.Run(ctx, o)
			if err != nil { // options: 2; bridges that died, pairs that moved nothing: 1
				return exitFor(err, 2)
			}
			if asJSON {
				return e.printJSON(res)
			}
			return res.WriteText(e.stdout)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.Loopback, "loopback", false, "run on 127.x addresses without namespaces (no root needed)")
	f.StringVar(&scenarios, "scenarios", "", "scenarios to run, comma-separated: sweep, borrow, lend, switch (default all; switch needs namespaces)")
	f.StringVar(&pairs, "pairs", "", "the sweep's pair counts, comma-separated (default 1,2,4,8,16,32); alone: the sweep only")
	f.StringVar(&borrow, "borrow", "", "GPUs one host borrows, comma-separated (default 8,32)")
	f.IntVar(&o.Lend, "lend", 8, "GPUs one box lends to as many hosts")
	f.IntVar(&o.SwitchPairs, "switch-pairs", 64, "pairs through one XDP switch")
	f.DurationVar(&o.Duration, "duration", 2*time.Second, "how long each scenario is measured once all its pairs move data")
	bytesVar(f, &o.ReadBytes, "read-bytes", 4096, "size of each DMA read (4..4096, a multiple of 4)")
	f.IntVar(&o.Readers, "readers", 8, "reads each pair keeps outstanding, one per NetTLP tag port (1..15)")
	f.IntVar(&o.IdleSamples, "idle-samples", 200, "reads (and echoes) timed before the load")
	bytesVar(f, &o.MTU, "mtu", 1472, "the bridges' --mtu and the raw baseline's datagram size, in bytes (at most 1472 in namespaces)")
	bytesVar(f, &o.MPS, "mps", 256, "the memory devices' --mps, in bytes (128..4096); the bridges' --max-payload is the larger of it and 512")
	f.DurationVar(&o.Spin, "spin", 0, "the bridges' --spin: how long each polls its socket after its last frames before sleeping (0: at once)")
	f.BoolVar(&o.Insecure, "insecure-no-keys", false, "run the pairs unkeyed instead of sealed")
	f.BoolVar(&o.Pin, "pin", true, "a core per pair: both bridges of pair i run on the i-th CPU (dxpu bridge --cpus), round robin; --pin=false leaves them to the scheduler")
	f.StringVar(&o.Binary, "bridge-binary", "", "the dxpu binary the bridges run as (default: this one)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

// intList parses a comma-separated list of positive integers for flag.
func intList(flag, s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for i, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			at := ""
			if strings.Contains(s, ",") {
				at = fmt.Sprintf(" (item %d, %q)", i+1, strings.TrimSpace(f))
			}
			return nil, fmt.Errorf("--%s %q%s: want positive integers, comma-separated", flag, s, at)
		}
		out = append(out, n)
	}
	return out, nil
}
