package driver

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
)

func TestCollector(t *testing.T) {
	t.Parallel()
	b, err := bridge.New(bridge.Config{Role: bridge.RoleHost})
	if err != nil {
		t.Fatal(err)
	}
	r := New(b, nil)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(r, prometheus.Labels{"pair": "1"})); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]int{}
	for _, f := range fams {
		byName[f.GetName()] = len(f.GetMetric())
	}
	for name, n := range map[string]int{
		"dxpu_bridge_credit_stalls_total":  3,
		"dxpu_bridge_retransmits_total":    1,
		"dxpu_bridge_tags_in_use":          1,
		"dxpu_bridge_srtt_seconds":         1,
		"dxpu_bridge_tlps_delivered_total": 1,
		// A record of the peer's generation, not a total.
		"dxpu_bridge_last_unknown_generation":          1,
		"dxpu_bridge_dropped_unknown_generation_total": 1,
		"dxpu_bridge_timer_late_total":                 1,
		"dxpu_bridge_timer_late_max_seconds":           1,
		"dxpu_bridge_caught_up_frames_total":           1,
	} {
		if byName[name] != n {
			t.Errorf("%s: %d series, want %d (have %v)", name, byName[name], n, byName)
		}
	}
}
