package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/internal/app/fabricbench"
)

// newBenchFabricCmd builds `dxpu bench fabric` (package
// internal/app/fabricbench measures).
func newBenchFabricCmd() *cobra.Command {
	var o fabricbench.ReportOptions
	cmd := &cobra.Command{
		Use:   "fabric",
		Short: "GPU disaggregation microbenchmarks on the emulated path, native against fabric (virtual time)",
		Long: `bench fabric measures, on the emulated host and GPU in virtual time, what a GPU
disaggregation paper reports: MMIO read latency, host-to-device and device-to-host
bandwidth by copy size (timed by GPU events around the copy, as CUDA's bandwidthTest
does), and the latency of an empty kernel launch followed by a stream synchronization,
each natively (GPU on the host's root port) and over the fabric at --rtt.`,
		Example: `  dxpu bench fabric --rtt 5us --json
  dxpu bench fabric --rtt 20us --tags 256 --sizes 64K,1M,16M`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := oneLinkRate(cmd.Flags()); err != nil {
				return exitCodeError{2, err}
			}
			if err := flagsProbability(cmd, "loss"); err != nil {
				return exitCodeError{2, err}
			}
			return exitFor(fabricbench.WriteReport(o, cmd.OutOrStdout()), 1)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.RTT, "rtt", 5*time.Microsecond, "network round trip between the host-side and GPU-side bridges (see dxpu help units)")
	f.Float64Var(&o.Gbit, "link-gbps", 100, "link rate of the host-GPU pair in Gbit/s (0.001..10000)")
	linkRateAliases(f, &o.Gbit)
	f.IntVar(&o.Tags, "tags", defaultTags, "outstanding DMA reads: 256 (8-bit tags) or 768 (10-bit tags), or any smaller cap")
	bytesVar(f, &o.MRRS, "mrrs", 512, "max read request size in bytes (128..4096)")
	f.StringVar(&o.Sizes, "sizes", "4K,64K,1M,16M,64M", "copy sizes in bytes, comma-separated, suffixes K, M, G: multiples of 4 up to 4G")
	f.StringVar(&o.Model, "gpu", "h100", "GPU model: h100 or a100")
	f.BoolVar(&o.Bridge, "bridge", false, "put a real dxpu bridge pair on the fabric path instead of the latency/bandwidth pipe")
	bytesVar(f, &o.SimBytes, "tlp-bytes", 4<<20, "bytes of each copy moved as TLPs; the rest moves functionally at the rate reached (0: all)")
	f.BoolVar(&o.JSON, "json", false, "print one JSON object")
	f.Float64Var(&o.Loss, "loss", 0, "frame loss probability on the network, at most 0.5 (needs --bridge: the bridges retransmit)")
	f.StringVar(&o.Clock, "clock", "virtual", "virtual (simulated time, deterministic) or wall (real time; the fabric is a bridge pair over UDP on loopback, --rtt and --link-gbps do not apply)")
	return cmd
}
