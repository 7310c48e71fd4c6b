package pairsim

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
)

// TestVirtualGoodput logs, in virtual time (deterministic), the goodput of
// a saturated pair at 5 us one-way delay and 100 Gb/s with and without 1%
// loss. Figures only; the invariants are what is asserted.
func TestVirtualGoodput(t *testing.T) {
	if testing.Short() {
		t.Skip("figures only")
	}
	cfg := bridge.Config{MTU: 9000, Window: 1024, TxQueue: 256, MinRTO: 200 * time.Microsecond, InitialRTO: 2 * time.Millisecond, AckDelay: 10 * time.Microsecond}
	for i := range cfg.Credits {
		cfg.Credits[i] = bridge.ClassCredits{Headers: 512, Data: 512 * 32}
	}
	var base float64
	for _, loss := range []float64{0, 0.01, 0.05} {
		sc := Scenario{Seed: 5, Faults: memlink.Faults{Loss: loss, Delay: 5 * time.Microsecond, Bandwidth: 100e9}, Host: cfg, GPU: cfg,
			Count: 30000, Interval: 50 * time.Nanosecond}
		r := sc.Run()
		if len(r.Violations) > 0 {
			t.Fatal(r)
		}
		h, g := r.Pair.Host.Bridge.Counters(), r.Pair.GPU.Bridge.Counters()
		gbps := float64(h.PayloadBytesRx+g.PayloadBytesRx) * 8 / r.End.Seconds() / 1e9
		if loss == 0 {
			base = gbps
		}
		t.Logf("loss %.0f%%: %.2f Gb/s (%.0f%% of lossless), retransmits %d, RTOs %d, end %v",
			100*loss, gbps, 100*gbps/base, h.Retransmits+g.Retransmits, h.RTOs+g.RTOs, r.End)
	}
}
