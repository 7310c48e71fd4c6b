package model

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/model/trace"
)

// sharedGraphs builds the graph of every trace in ../shared/traces, or skips
// (fails with DXPU_REQUIRE_SHARED=1) when they are absent.
func sharedGraphs(tb testing.TB) []*Graph {
	tb.Helper()
	var gs []*Graph
	for _, p := range privtest.Traces(tb) {
		w, err := trace.DecodeFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		g, err := Build(w)
		if err != nil {
			tb.Fatalf("%s: %v", p, err)
		}
		g.workload = w
		gs = append(gs, g)
	}
	return gs
}

func TestSharedNativeReproducesSpan(t *testing.T) {
	t.Parallel()
	for _, g := range sharedGraphs(t) {
		p := g.Predict(Native)
		t.Logf("%s: nodes=%d edges=%d stats=%+v dropped=%d baseline=%v predicted=%v overhead=%.4f%%",
			g.Name, len(g.Nodes), len(g.Edges), g.Stats, g.DroppedEdges, g.Baseline, p.Predicted, p.OverheadPct)
		if p.OverheadPct != 0 {
			t.Errorf("%s: native overhead %v%%, want exactly 0", g.Name, p.OverheadPct)
		}
		if d := p.Predicted - g.Baseline; d < -g.Baseline/50 || d > g.Baseline/50 {
			t.Errorf("%s: native span %v, measured %v: off by more than 2%%", g.Name, p.Predicted, g.Baseline)
		}
		for _, rtt := range []time.Duration{2e3, 5e3, 10e3, 20e3} {
			q := g.Predict(Native.WithRTT(rtt))
			t.Logf("  rtt=%v overhead=%.2f%% breakdown=%v", rtt, q.OverheadPct, q.Breakdown)
		}
	}
}

// TestNsysGraph builds the graph of the Nsight Systems test database.
func TestNsysGraph(t *testing.T) {
	t.Parallel()
	_, file, _, _ := runtime.Caller(0)
	g, err := LoadGraph(filepath.Join(filepath.Dir(file), "..", "testdata", "model", "nsys-small.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	checkGraph(t, g)
	if _, err := LoadGraph(filepath.Join(t.TempDir(), "none.json")); err == nil {
		t.Error("LoadGraph of a missing file succeeded")
	}
	if g.Stats.Launches != 606 || g.Stats.Waits != 6 || g.Stats.WaitGuesses != 0 || len(g.Steps) != 2 {
		t.Fatalf("stats %+v, %d steps", g.Stats, len(g.Steps))
	}
	p := g.Predict(Native.WithRTT(10 * time.Microsecond))
	if p.OverheadPct <= 0 || p.Breakdown[CauseSync] <= 0 || p.Breakdown[CauseLaunch] <= 0 {
		t.Fatalf("prediction %+v", p)
	}
}
