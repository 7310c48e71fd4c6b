package linkbench

import (
	"context"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/memlink"
)

// Over real UDP sockets on loopback, with and without injected faults,
// every posted write arrives once and in order and every read is answered.
// Figures are logged, never asserted.
func TestLoopbackInvariants(t *testing.T) {
	for _, f := range []memlink.Faults{
		{},
		{Loss: 0.01, Duplicate: 0.01, Reorder: 0.01, Delay: 5 * time.Microsecond},
	} {
		r, err := Run(context.Background(), Options{Faults: f, Duration: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("faults %+v: %.2f Gb/s, %d writes, %d reads, retx %d, write p50 %.1f us p99 %.1f us, read p50 %.1f us",
			f, r.GoodputGbps, r.Delivered, r.Completed, r.Retransmits, r.WriteLatency.P50, r.WriteLatency.P99, r.ReadLatency.P50)
		if !r.OK() {
			t.Fatalf("invariants broken: %+v", r)
		}
		if r.Delivered == 0 || r.Completed == 0 {
			t.Fatalf("no traffic: %+v", r)
		}
	}
}
