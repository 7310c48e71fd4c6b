package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/emu/replay"
	"github.com/dxpu/dxpu/internal/app/predict"
	"github.com/dxpu/dxpu/model"
)

// newModelCmd builds `dxpu model` (package internal/app/predict runs it,
// with the emulator as the measurer for --validate).
func newModelCmd() *cobra.Command {
	o := predict.Options{Measurer: replay.Measurer{}}
	var addedRTT time.Duration
	var linkGbps float64
	cmd := &cobra.Command{
		Use:   "model --trace FILE [--rtt 5us | --added-rtt 6us] [--link-gbps 100] [--tags 768] [--mrrs 512] [--json] [FILE...]",
		Short: "Predict what a fabric costs a workload, from its PyTorch profiler trace",
		Long: `model reads a PyTorch profiler (Kineto) trace, plain or gzip, or an Nsight Systems
SQLite export (nsys export --type sqlite), builds its dependency
graph and re-times it behind a fabric of the given round trip (--rtt, the network
round trip between the bridges, or --added-rtt, what a host-GPU round trip pays
over native PCIe: the network plus the bridges), link rate and read-request limits. It prints the measured and predicted time (overall and per
ProfilerStep), the overhead and its causes (launch, sync, h2d, d2h, mmio), and the
largest added RTT that keeps the overhead under --target (above 0, at most 100%).

  --sweep             predict over a range of added RTTs (default 0,1,2,5,10,20,50,100 us),
                      or over a list such as --sweep=2us,5us,10us
  --plot out.svg      draw overhead against RTT for every --trace (svg or png)
  --profile p.json    take the fabric from 'dxpu bench fabric --json'
  --validate          set the prediction beside the emulator's measurement
  --markdown          one table row per trace: overhead at 2, 5, 10, 20 us (or the
                      --sweep list) and the budget, as in the README

Trace files may also be given as arguments.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Traces = append(o.Traces, args...)
			fl := cmd.Flags()
			if fl.Changed("rtt") && fl.Changed("added-rtt") {
				return exitCodeError{2, errors.New("model: give --rtt (network) or --added-rtt, not both")}
			}
			if fl.Changed("link-gbps") && fl.Changed("bw") {
				return exitCodeError{2, errors.New("model: --link-gbps and --bw (deprecated) exclude each other")}
			}
			if linkGbps < 0 {
				return exitCodeError{2, fmt.Errorf("--link-gbps %g: must not be negative", linkGbps)}
			}
			if !fl.Changed("bw") {
				o.BW = strconv.FormatFloat(linkGbps, 'g', -1, 64) + "Gbit"
			}
			o.RTT = addedRTT.String()
			o.NetworkRTTSet = fl.Changed("rtt")
			o.RTTSet = fl.Changed("added-rtt")
			o.BWSet = fl.Changed("bw") || fl.Changed("link-gbps")
			o.TagsSet, o.MRRSSet = fl.Changed("tags"), fl.Changed("mrrs")
			return exitFor(predict.Run(cmd.Context(), o, cmd.OutOrStdout()), 2)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&o.Traces, "trace", nil, "profiler trace (Kineto .json or .json.gz, or Nsight Systems .sqlite); repeat for several")
	fl.DurationVar(&o.NetworkRTT, "rtt", 0, "network round trip between the bridges; the model adds the bridges' fixed cost (see dxpu help units)")
	fl.DurationVar(&addedRTT, "added-rtt", 5*time.Microsecond, "what the fabric adds to a host-GPU round trip over native PCIe (network RTT + bridges)")
	fl.Float64Var(&linkGbps, "link-gbps", 0, "link rate in Gbit/s; 0 = no limit beyond the native one")
	deprecatedAlias(fl, "bw", "link-gbps", func() { fl.StringVar(&o.BW, "bw", "0", "") })
	fl.IntVar(&o.Tags, "tags", defaultTags, "outstanding read tags of the GPU's DMA")
	fl.IntVar(&o.MRRS, "mrrs", model.DefaultMRRS, "maximum read request size in bytes")
	fl.BoolVar(&o.JSON, "json", false, "print JSON (one object; JSON lines, one per trace, for several)")
	fl.StringVar(&o.Target, "target", "10%", "overhead target for the latency budget")
	fl.StringVar(&o.Sweep, "sweep", "", "predict over a range of RTTs (--sweep=2us,5us; alone: the default range)")
	fl.Lookup("sweep").NoOptDefVal = "default"
	fl.StringVar(&o.Plot, "plot", "", "write overhead against RTT to FILE.svg or FILE.png")
	fl.StringVar(&o.Profile, "profile", "", "fabric profile from 'dxpu bench fabric --json'")
	fl.BoolVar(&o.Validate, "validate", false, "compare with the emulator's virtual-time measurement")
	fl.BoolVar(&o.Markdown, "markdown", false, "print a markdown table, one row per trace (overhead by RTT, budget)")
	return cmd
}
