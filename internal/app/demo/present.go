package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/emu/replay"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/progress"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/model"
)

// Options are `dxpu demo`'s: the run's Config (Log and Progress are set
// from Quiet and the stderr given to Present) and how to print it.
type Options struct {
	Config
	JSON  bool // one JSON object per workload and line (JSON lines) instead of the tables
	Quiet bool // no progress bar or progress lines
}

// Present runs the demo and prints its tables (or JSON rows) to stdout;
// progress goes to stderr: a bar on a terminal, a line at every quarter
// elsewhere. Bad options are apperr.ErrUsage; a failed run is
// apperr.ErrFailed.
func Present(ctx context.Context, o Options, stdout, stderr io.Writer) error {
	if o.BytesPerSec <= 0 {
		return apperr.Usage(fmt.Errorf("--link-gbps %v: want a number of Gbit/s above 0, at most %d", o.BytesPerSec*8/1e9, model.MaxLinkGbps))
	}
	if o.RTT < 0 {
		return apperr.Usage(units.Errorf("--rtt %v: must not be negative", o.RTT))
	}
	if o.TracesDir == "" {
		var err error
		if o.TracesDir, err = DefaultTracesDir(); err != nil {
			o.TracesMissing = err.Error()
		}
	} else if st, err := os.Stat(o.TracesDir); err != nil || !st.IsDir() {
		return apperr.Usage(fmt.Errorf("--traces %s: not a directory", o.TracesDir))
	}
	start := time.Now()
	cfg := o.Config
	var bar *progress.Bar
	if !o.Quiet {
		cfg.Log = stderr
		cfg.Progress = progressLines(stderr)
		// The bar redraws itself with carriage returns: only on a terminal.
		if progress.IsTerminal(stderr) {
			cfg.Progress = func(done, total int, what string) {
				if bar == nil {
					bar = progress.New(stderr, total, "native and fabric runs")
				}
				bar.Describe(fmt.Sprintf("%-34.34s", what))
				bar.Set(done)
			}
		}
	}
	if !o.Quiet {
		// Said first, since --json prints no notes.
		if o.TracesDir != "" {
			fmt.Fprintf(stderr, "demo: profiler traces from %s\n", o.TracesDir)
		} else {
			fmt.Fprintf(stderr, "demo: no profiler traces: %s\n", o.TracesMissing)
		}
	}
	rep, err := Run(ctx, cfg)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return apperr.Failed(err)
	}
	if o.JSON {
		// JSON lines: a consumer reads row by row (jq -c, a log shipper).
		enc := json.NewEncoder(stdout)
		for _, r := range rep.Rows {
			if err := enc.Encode(r); err != nil {
				return apperr.Usage(err)
			}
		}
		return nil
	}
	rep.WriteTables(stdout)
	if !o.Quiet {
		fmt.Fprintf(stderr, "demo: done in %.1fs wall; times are virtual (%s)\n", time.Since(start).Seconds(), replay.Name)
	}
	return nil
}

// progressLines reports progress as a line at every quarter.
func progressLines(w io.Writer) func(done, total int, what string) {
	next := 0
	return func(done, total int, _ string) {
		if 4*done >= next*total {
			fmt.Fprintf(w, "demo: %d of %d native and fabric runs done\n", done, total)
			next = 4*done/total + 1
		}
	}
}

// WriteTables prints the hosts and what they got, then the workloads'
// native and fabric times beside the model's prediction, then the notes.
func (rep *Report) WriteTables(out io.Writer) {
	fmt.Fprintln(out, "hosts (GPUs lent by the control plane, enumerated through the fabric):")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  host\tasked\tenumerated\tnet RTT\tconfig space\tGPUs")
	for _, h := range rep.Hosts {
		same := "identical"
		if !h.ConfigSame {
			same = "DIFFERS"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%.0fus\t%s\t%s\n", h.Host, h.Asked, h.Enumerated, h.RTTus, same, compactGPUs(h.GPUs))
	}
	tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\thost\tGPUs\tadded RTT\tnative\tfabric\toverhead\tmodel\t")
	for _, r := range rep.Rows {
		mp := "-"
		if r.ModelPct != nil {
			mp = fmt.Sprintf("%.2f%%", *r.ModelPct)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1fus\t%s\t%s\t%.2f%%\t%s\t\n", r.Workload, r.Host, r.GPUs, r.AddedRTTus,
			fmtSeconds(r.NativeS), fmtSeconds(r.FabricS), r.OverheadPct, mp)
	}
	tw.Flush()
	rep.writeBridgeTable(out)
	for _, n := range rep.Notes {
		fmt.Fprintln(out, "note:", n)
	}
}

// writeBridgeTable prints, with --bridge, what each workload's bridge
// pairs carried in its fabric run.
func (rep *Report) writeBridgeTable(out io.Writer) {
	any := false
	for _, r := range rep.Rows {
		any = any || r.Bridge != nil
	}
	if !any {
		return
	}
	// The emulator moves a copy's first MiB as TLPs and the rest at the
	// rate they reached: the bridges see that first MiB of each copy.
	fmt.Fprintln(out, "\nbridge pairs of the fabric runs (both sides summed; each copy's first MiB crosses as TLPs, the rest at their rate):")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tpairs\tTLPs\tframes\tMiB on links\tpayload MiB\tretransmits\tlink downs\t")
	for _, r := range rep.Rows {
		b := r.Bridge
		if b == nil {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t\n", r.Workload, b.Pairs, b.TLPs, b.Frames,
			float64(b.Bytes)/(1<<20), float64(b.PayloadBytes)/(1<<20), b.Retransmits, b.LinkDowns)
	}
	tw.Flush()
}

func fmtSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.4fs", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3fms", s*1e3)
	}
	return fmt.Sprintf("%.1fus", s*1e6)
}

func compactGPUs(g []string) string {
	if len(g) <= 3 {
		return fmt.Sprint(g)
	}
	return fmt.Sprintf("[%s %s ... %s]", g[0], g[1], g[len(g)-1])
}
