package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/emu/replay"

	"github.com/spf13/cobra"

	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

type modelFlags struct {
	traces   []string
	rtt      string
	bw       string
	tags     int
	mrrs     int
	jsonOut  bool
	target   string
	sweep    string
	plot     string
	profile  string
	validate bool
	markdown bool
}

func init() { rootCmd.AddCommand(newModelCmd()) }

// newModelCmd builds the model subcommand with its own flag values.
func newModelCmd() *cobra.Command {
	var f modelFlags
	cmd := &cobra.Command{
		Use:   "model --trace FILE [--rtt 5us] [--bw 100Gbit] [--tags 256] [--mrrs 512] [--json] [FILE...]",
		Short: "Predict what a fabric costs a workload, from its PyTorch profiler trace",
		Long: `model reads a PyTorch profiler (Kineto) trace, plain or gzip, or an Nsight Systems
SQLite export (nsys export --type sqlite), builds its dependency
graph and re-times it behind a fabric of the given added round trip, link rate and
read-request limits. It prints the measured and predicted time (overall and per
ProfilerStep), the overhead and its causes (launch, sync, h2d, d2h, mmio), and the
largest RTT that keeps the overhead under --target.

  --sweep             predict over a range of RTTs (default 0,1,2,5,10,20,50,100 us),
                      or over a list such as --sweep=2us,5us,10us
  --plot out.svg      draw overhead against RTT for every --trace (svg or png)
  --profile p.json    take the fabric from 'dxpu bench fabric --json'
  --validate          set the prediction beside the emulator's measurement
  --markdown          one table row per trace: overhead at 2, 5, 10, 20 us (or the
                      --sweep list) and the budget, as in the README

Trace files may also be given as arguments.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.traces = append(f.traces, args...)
			return runModel(cmd.Context(), cmd.OutOrStdout(), cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.traces, "trace", nil, "profiler trace (Kineto .json or .json.gz, or Nsight Systems .sqlite); repeat for several")
	fl.StringVar(&f.rtt, "rtt", "5us", "added round-trip time (e.g. 5us, 0.02ms; a bare number is microseconds)")
	fl.StringVar(&f.bw, "bw", "0", "link rate (e.g. 100Gbit, 12.5GB/s); 0 = no limit beyond the native one")
	fl.IntVar(&f.tags, "tags", model.DefaultTags, "outstanding read tags of the GPU's DMA")
	fl.IntVar(&f.mrrs, "mrrs", model.DefaultMRRS, "maximum read request size in bytes")
	fl.BoolVar(&f.jsonOut, "json", false, "print JSON (one object per trace; an array for several)")
	fl.StringVar(&f.target, "target", "10%", "overhead target for the latency budget")
	fl.StringVar(&f.sweep, "sweep", "", "predict over a range of RTTs (--sweep=2us,5us; alone: the default range)")
	fl.Lookup("sweep").NoOptDefVal = "default"
	fl.StringVar(&f.plot, "plot", "", "write overhead against RTT to FILE.svg or FILE.png")
	fl.StringVar(&f.profile, "profile", "", "fabric profile from 'dxpu bench fabric --json'")
	fl.BoolVar(&f.validate, "validate", false, "compare with the emulator's virtual-time measurement")
	fl.BoolVar(&f.markdown, "markdown", false, "print a markdown table, one row per trace (overhead by RTT, budget)")
	return cmd
}

func usageErr(format string, a ...any) error {
	return exitCodeError{2, fmt.Errorf(format, a...)}
}

// fabricFromFlags assembles the fabric from flags or a profile.
func fabricFromFlags(cmd *cobra.Command, f *modelFlags) (model.Fabric, error) {
	fab := model.Native
	rtt, err := model.ParseRTT(f.rtt)
	if err != nil {
		return fab, usageErr("--rtt: %v", err)
	}
	bw, err := model.ParseBandwidth(f.bw)
	if err != nil {
		return fab, usageErr("--bw: %v", err)
	}
	fab.RTT, fab.Bandwidth, fab.Tags, fab.MRRS = rtt, bw, f.tags, f.mrrs
	if f.profile != "" {
		pf, err := os.Open(f.profile)
		if err != nil {
			return fab, exitCodeError{2, err}
		}
		defer pf.Close()
		base := fab
		if fab, err = model.FabricFromProfile(pf, base); err != nil {
			return base, exitCodeError{1, fmt.Errorf("%s: %w", f.profile, err)}
		}
		// Flags given explicitly win over the profile.
		if cmd.Flags().Changed("rtt") {
			fab.RTT = rtt
		}
		if cmd.Flags().Changed("bw") {
			fab.Bandwidth = bw
		}
		if cmd.Flags().Changed("tags") {
			fab.Tags = f.tags
		}
		if cmd.Flags().Changed("mrrs") {
			fab.MRRS = f.mrrs
		}
	}
	if err := fab.Validate(); err != nil {
		return fab, usageErr("%v", err)
	}
	return fab, nil
}

func parseSweep(s string) ([]time.Duration, error) {
	if s == "" {
		return nil, nil
	}
	if s == "default" {
		return model.DefaultSweep, nil
	}
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		d, err := model.ParseRTT(part)
		if err != nil {
			return nil, usageErr("--sweep: %v", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// modelReport is the JSON of one trace.
type modelReport struct {
	Trace         string             `json:"trace"`
	RTTus         float64            `json:"rtt_us"`
	BandwidthGbps float64            `json:"bandwidth_gbps"`
	Tags          int                `json:"tags"`
	MRRS          int                `json:"mrrs"`
	BaselineS     float64            `json:"baseline_s"`
	PredictedS    float64            `json:"predicted_s"`
	OverheadPct   float64            `json:"overhead_pct"`
	Breakdown     map[string]float64 `json:"breakdown"`
	TargetPct     float64            `json:"target_pct"`
	BudgetRTTus   float64            `json:"budget_rtt_us"`
	// BudgetAtLeast is true when the search hit its bound: the budget is at
	// least budget_rtt_us.
	BudgetAtLeast bool          `json:"budget_at_least,omitempty"`
	Steps         []stepReport  `json:"steps,omitempty"`
	Sweep         []sweepReport `json:"sweep,omitempty"`
	Validation    []checkReport `json:"validation,omitempty"`
	Graph         graphReport   `json:"graph"`
	pred          model.Prediction
}

type stepReport struct {
	Step        int64   `json:"step"`
	BaselineS   float64 `json:"baseline_s"`
	PredictedS  float64 `json:"predicted_s"`
	OverheadPct float64 `json:"overhead_pct"`
}

type sweepReport struct {
	RTTus       float64            `json:"rtt_us"`
	PredictedS  float64            `json:"predicted_s"`
	OverheadPct float64            `json:"overhead_pct"`
	Breakdown   map[string]float64 `json:"breakdown"`
}

type checkReport struct {
	RTTus        float64 `json:"rtt_us"`
	PredictedPct float64 `json:"predicted_overhead_pct"`
	MeasuredPct  float64 `json:"measured_overhead_pct"`
	DiffPoints   float64 `json:"difference_points"`
}

type graphReport struct {
	Events      int64 `json:"events"`
	Nodes       int   `json:"nodes"`
	Edges       int   `json:"edges"`
	Launches    int   `json:"launches"`
	Orphans     int   `json:"orphans"`
	Waits       int   `json:"waits"`
	WaitGuesses int   `json:"wait_guesses"`
	EventEdges  int   `json:"event_edges"`
}

func breakdownMap(b model.Breakdown) map[string]float64 {
	m := make(map[string]float64, len(model.Causes))
	for _, c := range model.Causes {
		m[c.String()] = b[c].Seconds()
	}
	return m
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func runModel(ctx context.Context, out io.Writer, cmd *cobra.Command, f *modelFlags) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if len(f.traces) == 0 {
		return usageErr("model: give at least one --trace FILE")
	}
	fab, err := fabricFromFlags(cmd, f)
	if err != nil {
		return err
	}
	target, err := model.ParsePercent(f.target)
	if err != nil {
		return usageErr("--target: %v", err)
	}
	sweep, err := parseSweep(f.sweep)
	if err != nil {
		return err
	}
	plotFormat := ""
	if f.plot != "" {
		if plotFormat, err = model.PlotFormat(f.plot); err != nil {
			return usageErr("--plot: %v", err)
		}
	}
	if f.markdown && len(sweep) == 0 {
		sweep = markdownRTTs
	}
	var reports []*modelReport
	var curves []model.Curve
	var validateErr error
	for _, path := range f.traces {
		w, err := trace.DecodeFile(path)
		if err != nil {
			var se *trace.SyntaxError
			if errors.As(err, &se) || errors.Is(err, trace.ErrNoEvents) || errors.Is(err, trace.ErrNotTrace) {
				return exitCodeError{1, err}
			}
			return exitCodeError{2, err}
		}
		g, err := model.Build(w)
		if err != nil {
			return exitCodeError{1, fmt.Errorf("%s: %w", path, err)}
		}
		r := reportFor(g, w, fab, target)
		for _, p := range g.Sweep(fab, sweep) {
			r.Sweep = append(r.Sweep, sweepReport{RTTus: us(p.Fabric.RTT), PredictedS: p.Predicted.Seconds(),
				OverheadPct: p.OverheadPct, Breakdown: breakdownMap(p.Breakdown)})
		}
		if f.plot != "" {
			rtts := sweep
			if len(rtts) == 0 {
				rtts = model.DefaultSweep
			}
			curves = append(curves, model.Curve{Name: g.Name, Points: g.Sweep(fab, rtts)})
		}
		if f.validate {
			checks, err := model.Validate(ctx, replay.Measurer{}, g, fab, validationRTTs)
			if err != nil {
				validateErr = err
			}
			for _, c := range checks {
				r.Validation = append(r.Validation, checkReport{RTTus: us(c.RTT), PredictedPct: c.PredictedPct,
					MeasuredPct: c.MeasuredPct, DiffPoints: c.DifferencePoints})
			}
		}
		reports = append(reports, r)
	}
	switch {
	case f.markdown:
		printMarkdown(out, reports)
	case f.jsonOut:
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if len(reports) == 1 {
			err = enc.Encode(reports[0])
		} else {
			err = enc.Encode(reports)
		}
		if err != nil {
			return exitCodeError{2, err}
		}
	default:
		for i, r := range reports {
			if i > 0 {
				fmt.Fprintln(out)
			}
			printReport(out, r, fab)
		}
	}
	if f.plot != "" {
		pf, err := os.Create(f.plot)
		if err != nil {
			return exitCodeError{2, err}
		}
		err = model.WritePlot(pf, plotFormat, curves, target)
		if cerr := pf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return exitCodeError{2, err}
		}
		if !f.jsonOut && !f.markdown {
			fmt.Fprintf(out, "\nplot written to %s\n", f.plot)
		}
	}
	if validateErr != nil {
		if errors.Is(validateErr, model.ErrNoMeasurer) {
			return exitCodeError{2, errors.New("--validate needs the emulator (package emu), which is not in this build yet: " + validateErr.Error())}
		}
		return exitCodeError{1, validateErr}
	}
	return nil
}

// markdownRTTs are the columns of --markdown without --sweep.
var markdownRTTs = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}

// printMarkdown prints the README's table: one row per trace.
func printMarkdown(out io.Writer, reports []*modelReport) {
	if len(reports) == 0 {
		return
	}
	fmt.Fprint(out, "| trace | measured span |")
	for _, s := range reports[0].Sweep {
		fmt.Fprintf(out, " +%g us |", s.RTTus)
	}
	fmt.Fprintf(out, " RTT budget for %g %% |\n| --- | ---: |", reports[0].TargetPct)
	for range reports[0].Sweep {
		fmt.Fprint(out, " ---: |")
	}
	fmt.Fprintln(out, " ---: |")
	for _, r := range reports {
		fmt.Fprintf(out, "| %s | %s |", r.Trace, fmtDur(r.pred.Baseline))
		for _, s := range r.Sweep {
			fmt.Fprintf(out, " %.2f %% |", s.OverheadPct)
		}
		at := ""
		if r.BudgetAtLeast {
			at = ">= "
		}
		fmt.Fprintf(out, " %s%.0f us |\n", at, r.BudgetRTTus)
	}
}

// validationRTTs are the RTTs at which --validate compares.
var validationRTTs = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}

func reportFor(g *model.Graph, w *trace.Workload, fab model.Fabric, target float64) *modelReport {
	p := g.Predict(fab)
	budget, within := g.Budget(fab, target)
	r := &modelReport{
		Trace: g.Name, RTTus: us(fab.RTT), BandwidthGbps: fab.Bandwidth * 8 / 1e9, Tags: fab.Tags, MRRS: fab.MRRS,
		BaselineS: p.Baseline.Seconds(), PredictedS: p.Predicted.Seconds(), OverheadPct: p.OverheadPct,
		Breakdown: breakdownMap(p.Breakdown), TargetPct: target, BudgetRTTus: us(budget), BudgetAtLeast: !within,
		Graph: graphReport{Events: w.Events, Nodes: len(g.Nodes), Edges: len(g.Edges), Launches: g.Stats.Launches,
			Orphans: g.Stats.Orphans, Waits: g.Stats.Waits, WaitGuesses: g.Stats.WaitGuesses, EventEdges: g.Stats.EventEdges},
		pred: p,
	}
	for _, s := range p.Steps {
		r.Steps = append(r.Steps, stepReport{Step: s.Num, BaselineS: s.Baseline.Seconds(), PredictedS: s.Predicted.Seconds(), OverheadPct: s.OverheadPct})
	}
	return r
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.3f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.3f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f us", float64(d)/1e3)
	}
}

func printReport(out io.Writer, r *modelReport, fab model.Fabric) {
	link := "no limit"
	if fab.Bandwidth > 0 {
		link = fmt.Sprintf("%g Gbit/s", fab.Bandwidth*8/1e9)
	}
	fmt.Fprintf(out, "trace %s: %d events, %d ops, %d launches, %d blocking waits\n", r.Trace, r.Graph.Events, r.Graph.Nodes, r.Graph.Launches, r.Graph.Waits)
	fmt.Fprintf(out, "fabric: +%g us RTT, link %s, %d tags x %d B MRRS\n\n", r.RTTus, link, fab.Tags, fab.MRRS)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	p := r.pred
	fmt.Fprintf(tw, "baseline\t%s\n", fmtDur(p.Baseline))
	fmt.Fprintf(tw, "predicted\t%s\n", fmtDur(p.Predicted))
	fmt.Fprintf(tw, "overhead\t%.2f %%\n", p.OverheadPct)
	for _, c := range model.Causes {
		fmt.Fprintf(tw, "  %s\t%s\n", c, fmtDur(p.Breakdown[c]))
	}
	at := ""
	if r.BudgetAtLeast {
		at = ">= "
	}
	fmt.Fprintf(tw, "budget\t%s%.2f us added RTT keeps the overhead <= %g %%\n", at, r.BudgetRTTus, r.TargetPct)
	tw.Flush()
	if len(p.Steps) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\tbaseline\tpredicted\toverhead\t")
		for _, s := range p.Steps {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f %%\t\n", s.Num, fmtDur(s.Baseline), fmtDur(s.Predicted), s.OverheadPct)
		}
		tw.Flush()
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "rtt (us)\tpredicted\toverhead\t")
		for _, c := range model.Causes {
			fmt.Fprintf(tw, "%s\t", c)
		}
		fmt.Fprintln(tw)
		for _, s := range r.Sweep {
			fmt.Fprintf(tw, "%g\t%s\t%.2f %%\t", s.RTTus, fmtDur(time.Duration(s.PredictedS*1e9)), s.OverheadPct)
			for _, c := range model.Causes {
				fmt.Fprintf(tw, "%s\t", fmtDur(time.Duration(s.Breakdown[c.String()]*1e9)))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(r.Validation) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "rtt (us)\tpredicted\tmeasured\tdifference\t")
		for _, c := range r.Validation {
			fmt.Fprintf(tw, "%g\t%.2f %%\t%.2f %%\t%+.2f pp\t\n", c.RTTus, c.PredictedPct, c.MeasuredPct, c.DiffPoints)
		}
		tw.Flush()
	}
}
