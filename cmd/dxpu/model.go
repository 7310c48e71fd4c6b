package main

import (
	"errors"
	"fmt"
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
  --validate          set the prediction beside the emulator's measurement, at
                      2, 5, 10, 20 us or the --sweep list
  --markdown          one table row per trace: overhead at 2, 5, 10, 20 us (or the
                      --sweep list) and the budget, as in the README's first table;
                      with --validate, predicted / measured, as in its second

Trace files may also be given as arguments.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Traces = append(o.Traces, args...)
			fl := cmd.Flags()
			if fl.Changed("rtt") && fl.Changed("added-rtt") {
				return exitCodeError{2, errors.New("model: give --rtt (network) or --added-rtt, not both")}
			}
			link, err := oneLinkRate(fl)
			if err != nil {
				return exitCodeError{2, fmt.Errorf("model: %w", err)}
			}
			o.LinkFlag = link
			if fl.Changed("sweep") && o.Sweep == "" {
				return exitCodeError{2, errors.New("model: --sweep= names no RTT: give --sweep=2us,5us, or --sweep alone for the default range")}
			}
			o.NetworkRTTSet = fl.Changed("rtt")
			o.RTTSet = fl.Changed("added-rtt")
			o.BWSet = fl.Changed("link-gbps") || fl.Changed("gbit") || fl.Changed("bw")
			o.TagsSet, o.MRRSSet, o.TargetSet = fl.Changed("tags"), fl.Changed("mrrs"), fl.Changed("target")
			return exitFor(predict.Run(cmd.Context(), o, cmd.OutOrStdout()), 2)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&o.Traces, "trace", nil, "profiler trace (Kineto .json or .json.gz, or Nsight Systems .sqlite); repeat for several")
	fl.DurationVar(&o.NetworkRTT, "rtt", 0, "network round trip between the bridges, at most 1s; the model adds the bridges' fixed cost (see dxpu help units)")
	fl.DurationVar(&o.AddedRTT, "added-rtt", 5*time.Microsecond, "what the fabric adds to a host-GPU round trip over native PCIe (network RTT + bridges), at most 1s")
	fl.Float64Var(&o.LinkGbps, "link-gbps", 0, "link rate in Gbit/s, at most 10000; 0 = no limit beyond the native one")
	linkRateAliases(fl, &o.LinkGbps)
	fl.IntVar(&o.Tags, "tags", defaultTags, "outstanding DMA reads: 256 (8-bit tags) or 768 (10-bit tags), or any smaller cap")
	bytesVar(fl, &o.MRRS, "mrrs", model.DefaultMRRS, "maximum read request size in bytes (a power of two in 128..4096)")
	fl.BoolVar(&o.JSON, "json", false, "print JSON (one object; JSON lines, one per trace, for several)")
	fl.StringVar(&o.Target, "target", "10%", "overhead target for the latency budget")
	fl.StringVar(&o.Sweep, "sweep", "", "predict over a range of RTTs (--sweep=2us,5us; alone: the default range)")
	fl.Lookup("sweep").NoOptDefVal = "default"
	fl.StringVar(&o.Plot, "plot", "", "write overhead against RTT to FILE.svg or FILE.png")
	fl.StringVar(&o.Profile, "profile", "", "fabric profile from 'dxpu bench fabric --json'")
	fl.BoolVar(&o.Validate, "validate", false, "compare with the emulator's virtual-time measurement, at 2, 5, 10, 20 us or the --sweep RTTs")
	fl.BoolVar(&o.Markdown, "markdown", false, "print a markdown table, one row per trace (overhead by RTT, budget; with --validate: predicted / measured)")
	return cmd
}
