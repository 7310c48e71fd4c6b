package model

import (
	"testing"
	"time"
)

// BenchmarkBuild builds the graph of each shared trace (decoded once).
func BenchmarkBuild(b *testing.B) {
	for _, g := range sharedGraphs(b) {
		w := g.workload
		b.Run(g.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(w); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(g.Nodes))*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
		})
	}
}

// BenchmarkPredict re-times each shared trace at 10 us; Budget runs about
// 40 of these.
func BenchmarkPredict(b *testing.B) {
	for _, g := range sharedGraphs(b) {
		b.Run(g.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				g.Predict(Native.WithRTT(10 * time.Microsecond))
			}
			b.ReportMetric(float64(len(g.Nodes))*float64(b.N)/b.Elapsed().Seconds(), "nodes/s")
		})
	}
}
