package predict

import (
	"math"
	"strings"
	"testing"
)

// TestNoNegativeZero: a figure that rounds to zero prints 0.00 (a
// difference +0.00), never -0.00, in the text report and both markdown
// tables; a real negative keeps its sign.
func TestNoNegativeZero(t *testing.T) {
	t.Parallel()
	negZero, budget, zero := math.Copysign(0, -1), 12.0, -0.2
	r := &Report{Trace: "t", TargetPct: 10, BudgetRTTus: &budget, ZeroRTTPct: &zero,
		Sweep: []SweepReport{{AddedRTTus: 2, OverheadPct: -0.001}},
		Validation: []CheckReport{
			{AddedRTTus: 2, PredictedPct: 1.19, MeasuredPct: -0.001, DiffPoints: -1.191},
			{AddedRTTus: 5, PredictedPct: negZero, MeasuredPct: -0.5, DiffPoints: -0.004},
		}}
	r.pred.OverheadPct = -0.004
	var text, md, vmd strings.Builder
	printReport(&text, r, r.pred.Fabric)
	printMarkdown(&md, []*Report{r})
	r2 := *r
	r2.BudgetRTTus = nil
	printMarkdown(&md, []*Report{&r2})
	printValidationMarkdown(&vmd, []*Report{r})
	all := text.String() + md.String() + vmd.String()
	if strings.Contains(all, "-0.00") || strings.Contains(all, "(-0 %") {
		t.Errorf("a negative zero printed:\n%s", all)
	}
	for _, want := range []string{"| t | 1.19 / 0.00 | 0.00 / -0.50 |", "| 0.00 % | 12 us |", "none (0 % at 0 us)"} {
		if !strings.Contains(md.String()+vmd.String(), want) {
			t.Errorf("markdown lacks %q:\n%s%s", want, md.String(), vmd.String())
		}
	}
	// The text report's columns, spaces collapsed.
	words := strings.Join(strings.Fields(text.String()), " ")
	for _, want := range []string{"overhead 0.00 %", "2 0.0 us 0.00 % ", "2 1.19 % 0.00 % -1.19 pp", "5 0.00 % -0.50 % +0.00 pp"} {
		if !strings.Contains(words, want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}
