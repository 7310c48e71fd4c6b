package predict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

// Options are `dxpu model`'s.
type Options struct {
	Traces []string // Kineto JSON (plain or gzip) or Nsight Systems SQLite
	RTT    string   // added round trip (5us, 0.02ms; a bare number is us)
	// NetworkRTT, when NetworkRTTSet, replaces RTT: the network round trip
	// between the bridges, to which the bridges' own fixed cost is added.
	NetworkRTT    time.Duration
	NetworkRTTSet bool
	BW            string // link rate (100Gbit, 12.5GB/s; 0: no limit)
	Tags          int    // outstanding read tags of the GPU's DMA
	MRRS          int    // maximum read request size
	// RTTSet, BWSet, TagsSet and MRRSSet say the option was given
	// explicitly: it then wins over Profile.
	RTTSet, BWSet, TagsSet, MRRSSet bool
	Profile                         string // fabric from 'dxpu bench fabric --json'
	Target                          string // overhead target for the budget, e.g. 10%
	Sweep                           string // "", "default", or a list of RTTs
	Plot                            string // FILE.svg or FILE.png
	Validate                        bool   // compare with Measurer's measurement
	JSON                            bool
	Markdown                        bool
	// Measurer measures for Validate (the emulator: emu/replay.Measurer).
	Measurer model.Measurer
}

func usage(format string, a ...any) error { return apperr.Usage(fmt.Errorf(format, a...)) }

// Run predicts for every trace of o and prints the reports to out. Bad
// options and unreadable files are apperr.ErrUsage; traces that do not
// decode or build, and a failed validation, are apperr.ErrFailed.
func Run(ctx context.Context, o Options, out io.Writer) error {
	f := &o
	if ctx == nil {
		ctx = context.Background()
	}
	if len(f.Traces) == 0 {
		return usage("model: give at least one --trace FILE")
	}
	fab, err := fabricOf(f)
	if err != nil {
		return err
	}
	target, err := model.ParsePercent(f.Target)
	if err != nil {
		return usage("--target: %v", err)
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
		if plotFormat, err = model.PlotFormat(f.Plot); err != nil {
			return usage("--plot: %v", err)
		}
	}
	if f.Markdown && len(sweep) == 0 {
		sweep = markdownRTTs
	}
	var reports []*Report
	var curves []model.Curve
	var validateErr error
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
			checks, err := model.Validate(ctx, f.Measurer, g, fab, validationRTTs)
			if err != nil {
				validateErr = err
			}
			for _, c := range checks {
				r.Validation = append(r.Validation, CheckReport{AddedRTTus: us(c.RTT), PredictedPct: c.PredictedPct,
					MeasuredPct: c.MeasuredPct, DiffPoints: c.DifferencePoints})
			}
		}
		reports = append(reports, r)
	}
	switch {
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
	}
	if f.Plot != "" {
		pf, err := os.Create(f.Plot)
		if err != nil {
			return apperr.Usage(err)
		}
		err = model.WritePlot(pf, plotFormat, curves, target)
		if cerr := pf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return apperr.Usage(err)
		}
		if !f.JSON && !f.Markdown {
			fmt.Fprintf(out, "\nplot written to %s\n", f.Plot)
		}
	}
	if validateErr != nil {
		if errors.Is(validateErr, model.ErrNoMeasurer) {
			return apperr.Usage(errors.New("--validate needs the emulator (package emu), which is not in this build yet: " + validateErr.Error()))
		}
		return apperr.Failed(validateErr)
	}
	return nil
}

// markdownRTTs are the columns of --markdown without --sweep.
var markdownRTTs = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}

// validationRTTs are the RTTs at which --validate compares.
var validationRTTs = []time.Duration{2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond, 20 * time.Microsecond}
