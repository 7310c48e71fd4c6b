package model

import (
	"time"
)

// Prediction is what a fabric costs one trace.
type Prediction struct {
	Trace  string
	Fabric Fabric
	// Baseline is the measured span, Predicted the span re-timed behind the
	// fabric; Overhead is Predicted/Baseline - 1 in percent.
	Baseline, Predicted time.Duration
	OverheadPct         float64
	// Breakdown splits Predicted-Baseline by cause: the fabric's additions
	// along the re-timed critical path, scaled so they sum to the overhead
	// (parallel work can hide part of what lies on the path).
	Breakdown Breakdown
	Steps     []StepPrediction
}

// StepPrediction is one ProfilerStep: from the start of its first call to
// the start of the next step's first call (for the last step, to the last
// end of its calls and the GPU work they launched). Steps thus add up to the
// time between the first and last step boundaries; a step can come out
// shorter than measured when a synchronization in it absorbs a delay that
// the previous step passed on.
type StepPrediction struct {
	Num                 int64
	Baseline, Predicted time.Duration
	OverheadPct         float64
}

// Predict re-times g behind f.
func (g *Graph) Predict(f Fabric) Prediction {
	t := g.Retime(f)
	p := Prediction{Trace: g.Name, Fabric: f, Baseline: g.Baseline, Predicted: t.Span}
	p.OverheadPct = pct(t.Span, g.Baseline)
	over := t.Span - g.Baseline
	if cp := t.Critical.Total(); cp > 0 && over > 0 {
		for c := range p.Breakdown {
			p.Breakdown[c] = time.Duration(float64(t.Critical[c]) * float64(over) / float64(cp))
		}
		// Rounding: give the remainder to the largest cause so the parts
		// add up to the whole.
		big := 0
		for c := range p.Breakdown {
			if p.Breakdown[c] > p.Breakdown[big] {
				big = c
			}
		}
		p.Breakdown[big] += over - p.Breakdown.Total()
	}
	p.Steps = g.stepPredictions(t)
	return p
}

func pct(predicted, baseline time.Duration) float64 {
	if baseline <= 0 {
		return 0
	}
	return float64(predicted-baseline) / float64(baseline) * 100
}

func (g *Graph) stepPredictions(t *Timing) []StepPrediction {
	if len(g.Steps) == 0 {
		return nil
	}
	anchor := make([]int32, len(g.Steps)) // first call of each step
	lastEnd := make([]time.Duration, len(g.Steps))
	lastEndP := make([]time.Duration, len(g.Steps))
	for k := range anchor {
		anchor[k] = -1
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		if n.Step < 0 {
			continue
		}
		if n.Kind == Call && (anchor[n.Step] < 0 || n.Start < g.Nodes[anchor[n.Step]].Start) {
			anchor[n.Step] = int32(i)
		}
		lastEnd[n.Step] = max(lastEnd[n.Step], n.End())
		lastEndP[n.Step] = max(lastEndP[n.Step], t.End[i])
	}
	var out []StepPrediction
	for k := range g.Steps {
		a := anchor[k]
		if a < 0 {
			continue
		}
		next := int32(-1)
		for j := k + 1; j < len(g.Steps) && next < 0; j++ {
			next = anchor[j]
		}
		sp := StepPrediction{Num: g.Steps[k].Num}
		if next >= 0 {
			sp.Baseline = g.Nodes[next].Start - g.Nodes[a].Start
			sp.Predicted = t.Start[next] - t.Start[a]
		} else {
			sp.Baseline = lastEnd[k] - g.Nodes[a].Start
			sp.Predicted = lastEndP[k] - t.Start[a]
		}
		sp.OverheadPct = pct(sp.Predicted, sp.Baseline)
		out = append(out, sp)
	}
	return out
}

// MaxBudget bounds the latency-budget search.
const MaxBudget = 10 * time.Millisecond

// Budget returns the largest added RTT (to 10 ns) that keeps the overhead
// behind f (its RTT ignored) at or under targetPct. within is false when
// even MaxBudget stays under the target (the budget is at least MaxBudget);
// the budget is 0 when the fabric's bandwidth alone exceeds the target.
// Overhead never decreases as RTT grows, so a binary search finds it.
func (g *Graph) Budget(f Fabric, targetPct float64) (rtt time.Duration, within bool) {
	over := func(r time.Duration) float64 { return pct(g.Retime(f.WithRTT(r)).Span, g.Baseline) }
	if over(MaxBudget) <= targetPct {
		return MaxBudget, false
	}
	if over(0) > targetPct {
		return 0, true
	}
	lo, hi := time.Duration(0), MaxBudget // over(lo) <= target < over(hi)
	for hi-lo > 10*time.Nanosecond {
		mid := lo + (hi-lo)/2
		if over(mid) <= targetPct {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true
}

// Sweep predicts g at each RTT.
func (g *Graph) Sweep(f Fabric, rtts []time.Duration) []Prediction {
	out := make([]Prediction, len(rtts))
	for i, r := range rtts {
		out[i] = g.Predict(f.WithRTT(r))
	}
	return out
}

// DefaultSweep is the RTT range of --sweep and of plots.
var DefaultSweep = []time.Duration{
	0, 1 * time.Microsecond, 2 * time.Microsecond, 5 * time.Microsecond, 10 * time.Microsecond,
	20 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
}
