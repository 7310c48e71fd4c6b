package main

import (
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/demo"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/model"
)

// newDemoCmd builds `dxpu demo` (package internal/app/demo runs it).
func newDemoCmd() *cobra.Command {
	var o demo.Options
	var gbit float64
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Emulated datacenter: hosts borrow remote GPUs through the control plane; workloads native vs over the fabric",
		Long: `demo builds, in this process and without root, 4 hosts and 2 GPU boxes of 8 GPUs,
registers them with an in-memory control plane, lets the hosts ask for 1, 2, 4 and 8 GPUs,
hot-adds each host's GPUs behind the virtual switch of its host-side bridge and enumerates
them through real dxpu bridge pairs, fails one GPU and releases one allocation to show
surprise and orderly removal, then runs bundled workloads and the profiler traces in the
repository's testdata/traces natively and over the fabric, in virtual time. It prints, per workload,
the native time, the fabric time, the overhead and the performance model's prediction.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, err := oneLinkRate(cmd.Flags())
			if err != nil {
				return exitCodeError{2, err}
			}
			// NaN passed the product's "positive" check and stalled the
			// replay; +Inf ran as no limit at all.
			if math.IsNaN(gbit) || math.IsInf(gbit, 0) || gbit > model.MaxLinkGbps {
				return exitCodeError{2, fmt.Errorf("%s %v: want a number of Gbit/s above 0, at most %d", name, gbit, model.MaxLinkGbps)}
			}
			if o.RTT > model.MaxRTT {
				return exitCodeError{2, fmt.Errorf("--rtt %s: want at most %s", units.Duration(o.RTT), units.Duration(model.MaxRTT))}
			}
			o.BytesPerSec = gbit * 1e9 / 8
			o.RTTSet = cmd.Flags().Changed("rtt")
			return exitFor(demo.Present(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()), 1)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print JSON lines, one object per workload (native_s, fabric_s, overhead_pct, added_rtt_us, ...)")
	f.DurationVar(&o.RTT, "rtt", 0, "network round trip between the bridges for every host (default: the control plane's per-rack RTTs, 3us and 6us)")
	f.Float64Var(&gbit, "link-gbps", 100, "link rate of one host-GPU pair in Gbit/s")
	linkRateAliases(f, &gbit)
	f.StringVar(&o.TracesDir, "traces", "", "directory of profiler traces (default: testdata/traces of the dxpu checkout around the working directory, or the one dxpu was built from; the demo says where it looked)")
	f.BoolVar(&o.Quiet, "quiet", false, "no progress bar or progress lines on stderr")
	f.BoolVar(&o.Bridge, "bridge", false, "run the workloads' fabric side through real bridge pairs too, and show what they carried (slower; enumeration always uses them)")
	return cmd
}
