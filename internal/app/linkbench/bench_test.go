package linkbench

import (
	"context"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/memlink"
)

// BenchmarkLoopback runs the real-time pair over UDP on loopback, lossless
// (with the runners sleeping at once, and spinning 50 us) and with 1% loss
// and 5 us delay, for a fixed time per iteration; it
// reports goodput and the write latency median next to ns/op (which here
// is the run time, not a per-TLP cost). Use it with -cpuprofile to see
// where the driver spends its time.
func BenchmarkLoopback(b *testing.B) {
	for _, c := range []struct {
		name   string
		f      memlink.Faults
		spin   time.Duration
		shared bool
	}{
		{"lossless", memlink.Faults{}, 0, false},
		{"lossless-spin50us", memlink.Faults{}, 50 * time.Microsecond, false},
		{"lossless-shared-socket", memlink.Faults{}, 0, true},
		{"loss1pct", memlink.Faults{Loss: 0.01, Delay: 5 * time.Microsecond}, 0, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var gbps, p50 float64
			for b.Loop() {
				r, err := Run(context.Background(), Options{Faults: c.f, Duration: 500 * time.Millisecond, Spin: c.spin, SharedSocket: c.shared})
				if err != nil {
					b.Fatal(err)
				}
				if !r.OK() {
					b.Fatalf("invariants broken: %+v", r)
				}
				gbps, p50 = r.GoodputGbps, r.WriteLatency.P50
			}
			b.ReportMetric(gbps, "Gbit/s")
			b.ReportMetric(p50, "p50_us")
		})
	}
}
