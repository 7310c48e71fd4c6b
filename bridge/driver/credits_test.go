package driver_test

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// TestReleaseSendsCreditsAndStallsExported: with ManualRelease, the
// runner releases nothing itself (the host's writes beyond the GPU's 4
// credits wait), Release sends the freed credits (the host's stalled
// writes go on), and the host's credit stalls are exported under their
// class.
func TestReleaseSendsCreditsAndStallsExported(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := turnConfig(role)
		c.AckDelay = time.Millisecond
		if role == bridge.RoleGPU {
			c.Credits[tlp.Posted] = bridge.ClassCredits{Headers: 4, Data: 4 * 64 / 16}
		}
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	var w writes
	g.OnTLP, g.ManualRelease = w.onTLP, true
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	tlps := make([][]byte, 8)
	for i := range tlps {
		tlps[i] = write(t, i)
	}
	if n, err := h.SendMany(tlps); n != 8 || err != nil {
		t.Fatalf("SendMany: %d, %v", n, err)
	}
	waitLen(t, &w, 4)
	// The GPU acknowledges the 4 writes it took; a flush delivers before
	// it frames, so that acknowledgement carries whatever credits the
	// delivery freed. The host takes it under one lock with the framing
	// of whatever those credits let go: Pending falls from 8 to 4 in the
	// same step in which a runner that released by itself would have let
	// the host send the other 4. No wait on the clock: once Pending reads
	// 4, TLPsSent says whether that happened.
	waitfor.Until(t, "the host's 4 writes within credits acknowledged", func() bool { return h.Pending() <= 4 })
	if sent, k := h.Counters().TLPsSent, w.len(); sent != 4 || k != 4 {
		t.Fatalf("host sent %d writes, GPU delivered %d, on 4 credits never released", sent, k)
	}
	if err := g.Release(tlp.Posted, 4, 4*64/16); err != nil {
		t.Fatal(err)
	}
	waitLen(t, &w, 8)
	if got := w.list(); !slices.Equal(got, seq(8)) {
		t.Fatalf("delivered %v", got)
	}

	stalls := h.Counters().CreditStalls
	if stalls[tlp.Posted] == 0 {
		t.Fatalf("host credit stalls %v: want posted ones", stalls)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(driver.NewCollector(h, nil))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "dxpu_bridge_credit_stalls_total" {
			continue
		}
		for _, m := range f.Metric {
			got[m.Label[0].GetValue()] = m.Counter.GetValue()
		}
	}
	stalls = h.Counters().CreditStalls
	for i, class := range []string{"P", "NP", "Cpl"} {
		if got[class] != float64(stalls[i]) {
			t.Errorf("dxpu_bridge_credit_stalls_total{class=%q} = %v, want %d (stalls %v)", class, got[class], stalls[i], stalls)
		}
	}
}
