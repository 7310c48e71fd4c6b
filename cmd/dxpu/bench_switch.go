package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/switchbench"
)

// newBenchSwitchCmd builds `dxpu bench switch` (package
// internal/app/switchbench measures).
func newBenchSwitchCmd() *cobra.Command {
	var o switchbench.Options
	cmd := &cobra.Command{
		Use:   "switch",
		Short: "Measure the switch: XDP program vs a minimal redirect program, and the userspace path",
		Long: `switch measures, in one run:

  - ns per frame of the XDP switch program with BPF_PROG_TEST_RUN (repeat),
    beside the minimal redirect program (the kernel sample xdp_redirect_map:
    bounds check, per-CPU counter, MAC swap, devmap redirect) on the same
    frame, for dxpu over Ethernet and over UDP: xdp_ns_per_frame,
    baseline_ns_per_frame and their ratio (target: at most 2);
  - ns per frame of the Go forwarding decision (in process);
  - packets per second of the userspace switch (AF_PACKET and AF_XDP in
    copy mode) between two veths.

The XDP and veth figures need root; without it they are reported as errors
and the Go figure is still measured. Figures are medians over --rounds.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsPositive(cmd, "duration"); err != nil {
				return exitCodeError{2, err}
			}
			return exitFor(switchbench.Run(o, cmd.OutOrStdout()), 2)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print one JSON object")
	f.Uint32Var(&o.Repeat, "repeat", 1_000_000, "BPF_PROG_TEST_RUN repetitions per round")
	f.IntVar(&o.Rounds, "rounds", 7, "rounds per program (median reported)")
	f.DurationVar(&o.Duration, "duration", 2*time.Second, "userspace veth test duration")
	bytesVar(f, &o.FrameBytes, "frame-bytes", 128, "userspace test frame size in bytes: a multiple of 4 in 68..1512 (headers and one TLP, within the veths' MTU)")
	f.BoolVar(&o.NoXDP, "no-xdp", false, "skip the XDP and veth measurements (no root needed)")
	return cmd
}
