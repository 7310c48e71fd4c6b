package predict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

// Options are `dxpu model`'s.
type Options struct {
	Traces []string // Kineto JSON (plain or gzip) or Nsight Systems SQLite
	// AddedRTT is what the fabric adds to a host-GPU round trip.
	// NetworkRTT, when NetworkRTTSet, replaces it: the network round trip
	// between the bridges, to which the bridges' own fixed cost is added.
	AddedRTT      time.Duration
	NetworkRTT    time.Duration
	NetworkRTTSet bool
	LinkGbps      float64 // link rate in Gbit/s (0: no limit)
	// LinkFlag is the spelling of the link rate given (--link-gbps, or
	// its deprecated --gbit or --bw), for messages; "" is --link-gbps.
	LinkFlag string
	Tags     int // outstanding read tags of the GPU's DMA
	MRRS     int // maximum read request size in bytes
	// RTTSet, BWSet, TagsSet and MRRSSet say the option was given
	// explicitly: it then wins over Profile (and, for RTTs, is refused
	// with Markdown, whose columns are the Sweep RTTs). TargetSet says
	// Target was given (refused where no budget is printed).
	RTTSet, BWSet, TagsSet, MRRSSet, TargetSet bool
	Profile                                    string // fabric from 'dxpu bench fabric --json'
	Target                                     string // overhead target for the budget, e.g. 10%
	Sweep                                      string // "", "default", or a list of RTTs
	Plot                                       string // FILE.svg or FILE.png
	Validate                                   bool   // compare with Measurer's measurement
	JSON                                       bool
	Markdown                                   bool
	// Measurer measures for Validate (the emulator: emu/replay.Measurer).
	Measurer model.Measurer
}

func usage(format string, a ...any) error { return apperr.Usage(fmt.Errorf(format, a...)) }

// Run predicts for every trace of o and prints the reports to out. Bad
// options and unreadable files are apperr.ErrUsage; traces that do not
// decode or build, and a failed validation, are apperr.ErrFailed. On an
// error nothing is written to out: every check that needs no trace comes
// first, and the reports are printed only once all of them are ready.
func Run(ctx context.Context, o Options, out io.Writer) error {
	f := &o
	if ctx == nil {
		ctx = context.Background()
	}
	if len(f.Traces) == 0 {
		return usage("model: give at least one --trace FILE")
	}
	if err := checkCombination(f); err != nil {
		return err
	}
	fab, err := fabricOf(f)
	if err != nil {
		return err
	}
	target, err := model.ParsePercent(f.Target)
	if err != nil {
		return usage("--target: %w", err)
	}
	if target > 100 {
		return usage("--target %s: want a percentage above 0 and at most 100", f.Target)
	}
	sweep, err := parseSweep(f.Sweep)
	if err != nil {
		return err
	}
	plotFormat := ""
	if f.Plot != "" {
		if plotFormat, err = checkPlot(f.Plot); err != nil {
			return err
		}
	}
	if f.Markdown && len(sweep) == 0 {
		sweep = markdownRTTs
	}
	// --validate compares at the --sweep RTTs when given.
	checkRTTs := sweep
	if len(checkRTTs) == 0 {
		checkRTTs = validationRTTs
	}
	var reports []*Report
	var curves []model.Curve
	for _, path := range f.Traces {
		w, err := trace.DecodeFile(path)
		if err != nil {
			var se *trace.SyntaxError
			if errors.As(err, &se) || errors.Is(err, trace.ErrNoEvents) || errors.Is(err, trace.ErrNotTrace) {
				return apperr.Failed(err)
			}
			return apperr.Usage(err)
		}
		g, err := model.Build(w)
		if err != nil {
			return apperr.Failed(fmt.Errorf("%s: %w", path, err))
		}
		r := reportFor(g, w, fab, target)
		if f.NetworkRTTSet {
			rtt := us(f.NetworkRTT)
			r.RTTus = &rtt
		}
		for _, p := range g.Sweep(fab, sweep) {
			r.Sweep = append(r.Sweep, SweepReport{AddedRTTus: us(p.Fabric.RTT), PredictedS: p.Predicted.Seconds(),
				OverheadPct: p.OverheadPct, Breakdown: breakdownMap(p.Breakdown)})
		}
		if f.Plot != "" {
			rtts := sweep
			if len(rtts) == 0 {
				rtts = model.DefaultSweep
			}
			curves = append(curves, model.Curve{Name: g.Name, Points: g.Sweep(fab, rtts)})
		}
		if f.Validate {
			checks, err := model.Validate(ctx, f.Measurer, g, fab, checkRTTs)
			if err != nil {
				return apperr.Failed(err)
			}
			for _, c := range checks {
				r.Validation = append(r.Validation, CheckReport{AddedRTTus: us(c.RTT), PredictedPct: c.PredictedPct,
					MeasuredPct: c.MeasuredPct, DiffPoints: c.DifferencePoints})
			}
		}
		reports = append(reports, r)
	}
	// The plot before the reports: a plot that cannot be written leaves
	// nothing on out.
	if f.Plot != "" {
		if err := writePlot(f.Plot, plotFormat, curves, target); err != nil {
			return err
		}
	}
	switch {
	case f.Markdown && f.Validate:
		printValidationMarkdown(out, reports)
	case f.Markdown:
		printMarkdown(out, reports)
	case f.JSON:
		// One trace: one indented object; several: JSON lines.
		enc := json.NewEncoder(out)
		if len(reports) == 1 {
			enc.SetIndent("", "  ")
		}
		for _, r := range reports {
			if err := enc.Encode(r); err != nil {
				return apperr.Usage(err)
			}
		}
	default:
		for i, r := range reports {
			if i > 0 {
				fmt.Fprintln(out)
			}
			printReport(out, r, fab)
		}
		if f.Plot != "" {
			fmt.Fprintf(out, "\nplot written to %s\n", f.Plot)
		}
	}
	return nil
}

// checkCombination refuses options that would be ignored: every flag
// given must change what is printed.
func checkCombination(f *Options) error {
	switch {
	case f.Markdown && f.JSON:
		return usage("model: give --markdown or --json, not both")
	case f.Markdown && (f.RTTSet || f.NetworkRTTSet):
		// The table's columns are the --sweep RTTs; its budget column
		// does not depend on one.
		flag := "--added-rtt"
		if f.NetworkRTTSet {
			flag = "--rtt"
		}
		return usage("model: --markdown prints the overhead at the --sweep RTTs, so %s does not apply: give --sweep=10us instead", flag)
	case f.Markdown && f.Validate && f.TargetSet:
		return usage("model: --markdown --validate prints predicted and measured overhead without a budget, so --target does not apply")
	case f.Validate && f.Measurer == nil:
		return usage("--validate needs the emulator (package emu), which is not in this build: %w", model.ErrNoMeasurer)
	}
	return nil
}

// checkPlot returns the format of the plot file path, after checking
// that its directory exists: a bad path fails before any work, not after
// the reports.
func checkPlot(path string) (string, error) {
	format, err := model.PlotFormat(path)
	if err != nil {
		return "", usage("--plot: %w", err)
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return "", usage("--plot %s: %w", path, err)
	}
	if !st.IsDir() {
		return "", usage("--plot %s: %s is not a directory", path, dir)
	}
	return format, nil
}

func writePlot(path, format string, curves []model.Curve, target float64) error {
	pf, err := os.Create(path)
	if err != nil {
		return usage("--plot: %w", err)
	}
	err = model.WritePlot(pf, format, curves, target)
	if cerr := pf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return usage("--plot: %w", err)
	}
	return nil
}

// markdownRTTs are the columns of --markdown without --sweep.
var markdownRTTs = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}

// validationRTTs are the RTTs at which --validate compares without --sweep.
var validationRTTs = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}
