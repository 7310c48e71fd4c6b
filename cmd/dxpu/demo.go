package main

import (
	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/demo"
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
			o.BytesPerSec = gbit * 1e9 / 8
			return exitFor(demo.Present(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr()), 1)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.JSON, "json", false, "print JSON lines, one object per workload (native_s, fabric_s, overhead_pct, added_rtt_us, ...)")
	f.DurationVar(&o.RTT, "rtt", 0, "network round trip between the bridges for every host (default: the control plane's per-rack RTTs, 3us and 6us)")
	f.Float64Var(&gbit, "link-gbps", 100, "link rate of one host-GPU pair in Gbit/s")
	deprecatedAlias(f, "gbit", "link-gbps", func() { f.Float64Var(&gbit, "gbit", 100, "") })
	f.StringVar(&o.TracesDir, "traces", "", "directory of profiler traces (default: testdata/traces of the dxpu checkout around the working directory, or the one dxpu was built from; the demo says where it looked)")
	f.BoolVar(&o.Quiet, "quiet", false, "no progress bar or progress lines on stderr")
	f.BoolVar(&o.Bridge, "bridge", false, "run the workloads' fabric side through real bridge pairs too, and show what they carried (slower; enumeration always uses them)")
	return cmd
}
