package predict

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/model"
)

func printReport(out io.Writer, r *Report, fab model.Fabric) {
	link := "no limit"
	if fab.Bandwidth > 0 {
		link = fmt.Sprintf("%g Gbit/s", fab.Bandwidth*8/1e9)
	}
	fmt.Fprintf(out, "trace %s: %d events, %d ops, %d launches, %d blocking waits\n", r.Trace, r.Graph.Events, r.Graph.Nodes, r.Graph.Launches, r.Graph.Waits)
	network := ""
	if r.RTTus != nil {
		network = fmt.Sprintf(" (network %g us + the bridges)", *r.RTTus)
	}
	fmt.Fprintf(out, "fabric: +%g us RTT%s, link %s, %d tags x %d B MRRS\n\n", r.AddedRTTus, network, link, fab.Tags, fab.MRRS)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	p := r.pred
	fmt.Fprintf(tw, "baseline\t%s\n", fmtDur(p.Baseline))
	fmt.Fprintf(tw, "predicted\t%s\n", fmtDur(p.Predicted))
	fmt.Fprintf(tw, "overhead\t%s %%\n", fixed(p.OverheadPct, 2))
	for _, c := range model.Causes {
		fmt.Fprintf(tw, "  %s\t%s\n", c, fmtDur(p.Breakdown[c]))
	}
	at := ""
	if r.BudgetAtLeast {
		at = ">= "
	}
	if r.BudgetRTTus == nil {
		fmt.Fprintf(tw, "budget\tnone: %s\n", r.BudgetNone)
	} else {
		fmt.Fprintf(tw, "budget\t%s%.2f us added RTT keeps the overhead <= %g %%\n", at, *r.BudgetRTTus, r.TargetPct)
	}
	tw.Flush()
	if len(p.Steps) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\tbaseline\tpredicted\toverhead\t")
		for _, s := range p.Steps {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s %%\t\n", s.Num, fmtDur(s.Baseline), fmtDur(s.Predicted), fixed(s.OverheadPct, 2))
		}
		tw.Flush()
	}
	if len(r.Sweep) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "added rtt (us)\tpredicted\toverhead\t")
		for _, c := range model.Causes {
			fmt.Fprintf(tw, "%s\t", c)
		}
		fmt.Fprintln(tw)
		for _, s := range r.Sweep {
			fmt.Fprintf(tw, "%g\t%s\t%s %%\t", s.AddedRTTus, fmtDur(time.Duration(s.PredictedS*1e9)), fixed(s.OverheadPct, 2))
			for _, c := range model.Causes {
				fmt.Fprintf(tw, "%s\t", fmtDur(time.Duration(s.Breakdown[breakdownKey(c)]*1e9)))
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(r.Validation) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "added rtt (us)\tpredicted\tmeasured\tdifference\t")
		for _, c := range r.Validation {
			fmt.Fprintf(tw, "%g\t%s %%\t%s %%\t%s pp\t\n", c.AddedRTTus, fixed(c.PredictedPct, 2), fixed(c.MeasuredPct, 2), signed(c.DiffPoints, 2))
		}
		tw.Flush()
	}
}

// printMarkdown prints the README's table: one row per trace.
func printMarkdown(out io.Writer, reports []*Report) {
	if len(reports) == 0 {
		return
	}
	fmt.Fprint(out, "| trace | measured span |")
	for _, s := range reports[0].Sweep {
		fmt.Fprintf(out, " +%g us |", s.AddedRTTus)
	}
	fmt.Fprintf(out, " RTT budget for %g %% |\n| --- | ---: |", reports[0].TargetPct)
	for range reports[0].Sweep {
		fmt.Fprint(out, " ---: |")
	}
	fmt.Fprintln(out, " ---: |")
	for _, r := range reports {
		fmt.Fprintf(out, "| %s | %s |", r.Trace, fmtDur(r.pred.Baseline))
		for _, s := range r.Sweep {
			fmt.Fprintf(out, " %s %% |", fixed(s.OverheadPct, 2))
		}
		at := ""
		if r.BudgetAtLeast {
			at = ">= "
		}
		if r.BudgetRTTus == nil {
			fmt.Fprintf(out, " none (%s %% at 0 us) |\n", fixed(*r.ZeroRTTPct, 0))
			continue
		}
		fmt.Fprintf(out, " %s%.0f us |\n", at, *r.BudgetRTTus)
	}
}

// printValidationMarkdown prints the README's second table: one row per
// trace, "predicted % / measured %" at each RTT of the validation.
func printValidationMarkdown(out io.Writer, reports []*Report) {
	if len(reports) == 0 {
		return
	}
	fmt.Fprint(out, "| trace |")
	for _, c := range reports[0].Validation {
		fmt.Fprintf(out, " +%g us |", c.AddedRTTus)
	}
	fmt.Fprint(out, "\n| --- |")
	for range reports[0].Validation {
		fmt.Fprint(out, " ---: |")
	}
	fmt.Fprintln(out)
	for _, r := range reports {
		fmt.Fprintf(out, "| %s |", r.Trace)
		for _, c := range r.Validation {
			fmt.Fprintf(out, " %s / %s |", fixed(c.PredictedPct, 2), fixed(c.MeasuredPct, 2))
		}
		fmt.Fprintln(out)
	}
}

// fixed formats v with prec decimals. A value that rounds to zero prints
// without a sign: a measured span a hair under native printed -0.00.
func fixed(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if rest, neg := strings.CutPrefix(s, "-"); neg && strings.Trim(rest, "0.") == "" {
		return rest
	}
	return s
}

// signed is fixed with a sign always, + for zero: a difference.
func signed(v float64, prec int) string {
	s := fixed(v, prec)
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") || s == "NaN" {
		return s
	}
	return "+" + s
}
