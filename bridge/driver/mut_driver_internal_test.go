package driver

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
)

// TestLatenessKeepsMaxAndExports: the lateness record keeps the count and
// the largest lateness (not the latest), OnLate hears each, and the
// collector exports the count as the total and the largest as the max.
func TestLatenessKeepsMaxAndExports(t *testing.T) {
	t.Parallel()
	b, err := bridge.New(bridge.Config{Role: bridge.RoleHost})
	if err != nil {
		t.Fatal(err)
	}
	r := New(b, nil)
	var heard []time.Duration
	r.OnLate = func(late time.Duration) { heard = append(heard, late) }
	r.mu.Lock()
	for _, late := range []time.Duration{50 * time.Millisecond, LateAfter - 1, 20 * time.Millisecond} {
		r.noteLate(late)
	}
	r.mu.Unlock()
	if l := r.Lateness(); l.Count != 2 || l.Max != 50*time.Millisecond || len(heard) != 2 {
		t.Fatalf("lateness %+v, OnLate heard %v; want 2 late, max 50ms", l, heard)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(r, nil))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		switch f.GetName() {
		case "dxpu_bridge_timer_late_total":
			got[f.GetName()] = f.Metric[0].Counter.GetValue()
		case "dxpu_bridge_timer_late_max_seconds":
			got[f.GetName()] = f.Metric[0].Gauge.GetValue()
		}
	}
	if got["dxpu_bridge_timer_late_total"] != 2 || got["dxpu_bridge_timer_late_max_seconds"] != 0.05 {
		t.Fatalf("exported %v, want total 2 and max 0.05", got)
	}
}
