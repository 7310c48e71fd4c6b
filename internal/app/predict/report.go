package predict

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

// Report is the JSON of one trace.
type Report struct {
	Trace string `json:"trace"`
	// RTTus is the network round trip, when one was given (--rtt);
	// AddedRTTus, always there, what the fabric adds over native PCIe.
	RTTus       *float64           `json:"rtt_us,omitempty"`
	AddedRTTus  float64            `json:"added_rtt_us"`
	LinkGbps    float64            `json:"link_gbps"`
	Tags        int                `json:"tags"`
	MRRS        int                `json:"mrrs_bytes"`
	BaselineS   float64            `json:"baseline_s"`
	PredictedS  float64            `json:"predicted_s"`
	OverheadPct float64            `json:"overhead_pct"`
	Breakdown   map[string]float64 `json:"breakdown"`
	TargetPct   float64            `json:"target_pct"`
	// BudgetRTTus is null when no budget exists: even no added RTT
	// exceeds the target (BudgetNone says why).
	BudgetRTTus *float64 `json:"budget_added_rtt_us"`
	// BudgetAtLeast is true when the search hit its bound: the budget is at
	// least budget_added_rtt_us.
	BudgetAtLeast bool `json:"budget_at_least,omitempty"`
	// BudgetNone, set when budget_added_rtt_us is null, says why: the
	// overhead at 0 added RTT (what the link rate, tags and MRRS cost alone).
	BudgetNone string        `json:"budget_none_reason,omitempty"`
	ZeroRTTPct *float64      `json:"overhead_at_zero_added_rtt_pct,omitempty"`
	Steps      []StepReport  `json:"steps,omitempty"`
	Sweep      []SweepReport `json:"sweep,omitempty"`
	Validation []CheckReport `json:"validation,omitempty"`
	Graph      GraphReport   `json:"graph"`
	pred       model.Prediction
}

type StepReport struct {
	Step        int64   `json:"step"`
	BaselineS   float64 `json:"baseline_s"`
	PredictedS  float64 `json:"predicted_s"`
	OverheadPct float64 `json:"overhead_pct"`
}

type SweepReport struct {
	AddedRTTus  float64            `json:"added_rtt_us"`
	PredictedS  float64            `json:"predicted_s"`
	OverheadPct float64            `json:"overhead_pct"`
	Breakdown   map[string]float64 `json:"breakdown"`
}

type CheckReport struct {
	AddedRTTus   float64 `json:"added_rtt_us"`
	PredictedPct float64 `json:"predicted_overhead_pct"`
	MeasuredPct  float64 `json:"measured_overhead_pct"`
	DiffPoints   float64 `json:"difference_points"`
}

type GraphReport struct {
	Events      int64 `json:"events"`
	Nodes       int   `json:"nodes"`
	Edges       int   `json:"edges"`
	Launches    int   `json:"launches"`
	Orphans     int   `json:"orphans"`
	Waits       int   `json:"waits"`
	WaitGuesses int   `json:"wait_guesses"`
	EventEdges  int   `json:"event_edges"`
}

// breakdownMap keys each cause's time by its name and unit (launch_s,
// sync_s, ...), as every JSON key carries its unit.
func breakdownMap(b model.Breakdown) map[string]float64 {
	m := make(map[string]float64, len(model.Causes))
	for _, c := range model.Causes {
		m[breakdownKey(c)] = b[c].Seconds()
	}
	return m
}

func breakdownKey(c model.Cause) string { return c.String() + "_s" }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func reportFor(g *model.Graph, w *trace.Workload, fab model.Fabric, target float64) *Report {
	p := g.Predict(fab)
	budget, within := g.Budget(fab, target)
	budgetUs := us(budget)
	r := &Report{
		Trace: g.Name, AddedRTTus: us(fab.RTT), LinkGbps: fab.Bandwidth * 8 / 1e9, Tags: fab.Tags, MRRS: fab.MRRS,
		BaselineS: p.Baseline.Seconds(), PredictedS: p.Predicted.Seconds(), OverheadPct: p.OverheadPct,
		Breakdown: breakdownMap(p.Breakdown), TargetPct: target, BudgetRTTus: &budgetUs, BudgetAtLeast: !within,
		Graph: GraphReport{Events: w.Events, Nodes: len(g.Nodes), Edges: len(g.Edges), Launches: g.Stats.Launches,
			Orphans: g.Stats.Orphans, Waits: g.Stats.Waits, WaitGuesses: g.Stats.WaitGuesses, EventEdges: g.Stats.EventEdges},
		pred: p,
	}
	// A budget of 0 is either "exactly 0 keeps it" or "nothing does":
	// Budget returns 0 for both, so look at 0 itself.
	if budget == 0 && within {
		if zero := g.Predict(fab.WithRTT(0)).OverheadPct; zero > target {
			r.BudgetRTTus, r.ZeroRTTPct = nil, &zero
			r.BudgetNone = fmt.Sprintf("no added RTT keeps it within %g %%: at 0 added RTT the overhead is already %.2f %% (the link rate, tags and MRRS alone)", target, zero)
		}
	}
	for _, s := range p.Steps {
		r.Steps = append(r.Steps, StepReport{Step: s.Num, BaselineS: s.Baseline.Seconds(), PredictedS: s.Predicted.Seconds(), OverheadPct: s.OverheadPct})
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
