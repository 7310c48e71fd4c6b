package pool

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// bigPool is the benchmark pool: 10,000 GPUs in 1,250 boxes of 8
// (two PCIe switches each) over 10 pods of 25 racks, and 2,000 hosts.
func bigPool(tb testing.TB) *Pool {
	p := New()
	for i := 0; i < 1250; i++ {
		b := box(fmt.Sprintf("box%04d", i), fmt.Sprintf("pod%d", i%10), fmt.Sprintf("rack%d", i%250), 8, []string{"H100", "A100"}[i%2], uint64(40+40*(i%2))<<10)
		if _, err := p.AddBox(b); err != nil {
			tb.Fatal(err)
		}
	}
	for i := 0; i < 2000; i++ {
		if _, err := p.AddHost(host(fmt.Sprintf("host%04d", i), fmt.Sprintf("pod%d", i%10), fmt.Sprintf("rack%d", i%250))); err != nil {
			tb.Fatal(err)
		}
	}
	return p
}

// BenchmarkReserveRemove keeps the pool about half full: each iteration
// reserves 1-8 GPUs for a random host and releases the oldest allocation
// once 600 are live. It reports p50/p99 latency of Reserve.
func BenchmarkReserveRemove(b *testing.B) {
	for _, tc := range []struct {
		name string
		req  func(r *rand.Rand) Request
	}{
		{"any", func(r *rand.Rand) Request { return Request{Count: 1 + r.IntN(8)} }},
		{"model+mem", func(r *rand.Rand) Request {
			return Request{Count: 1 + r.IntN(8), Model: "H100", MinMemoryMiB: 40 << 10}
		}},
		{"same_box", func(r *rand.Rand) Request { return Request{Count: 1 + r.IntN(8), SameBox: true} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := bigPool(b)
			r := rand.New(rand.NewPCG(1, 2))
			var live []string
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := tc.req(r)
				req.Host = fmt.Sprintf("host%04d", r.IntN(2000))
				id := fmt.Sprintf("a%d", i)
				t0 := time.Now()
				_, err := p.Reserve(id, req)
				lat = append(lat, time.Since(t0))
				if err == nil {
					live = append(live, id)
				}
				if len(live) > 600 {
					p.Remove(live[0])
					live = live[1:]
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}
