package linkbench

import (
	"math/bits"
	"time"
)

// latHist is a log-linear latency histogram of fixed size: exact below
// 1024 ns, then 512 buckets per power of two (at most 0.2% relative
// error). The real-time run records millions of latencies; a growing slice
// of them made the benchmark's own bookkeeping (copies, then GC cycles)
// show up as multi-millisecond tail latency.
type latHist struct {
	counts []uint64
	n      int
	max    time.Duration
}

const (
	histLinear = 1024
	histSub    = 512 // buckets per power of two above histLinear
	histExp    = 40  // up to 2^50 ns (13 days)
)

func newLatHist() *latHist {
	return &latHist{counts: make([]uint64, histLinear+histExp*histSub)}
}

func histIndex(v uint64) int {
	if v < histLinear {
		return int(v)
	}
	e := bits.Len64(v) - 10 // v>>e in [512, 1024)
	i := histLinear + (e-1)*histSub + int(v>>uint(e)) - histSub
	return min(i, histLinear+histExp*histSub-1)
}

// histValue is the middle of bucket i.
func histValue(i int) time.Duration {
	if i < histLinear {
		return time.Duration(i)
	}
	e := (i-histLinear)/histSub + 1
	m := uint64((i-histLinear)%histSub + histSub)
	return time.Duration(m<<uint(e) + (uint64(1)<<uint(e))/2)
}

func (h *latHist) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[histIndex(uint64(d))]++
	h.n++
	h.max = max(h.max, d)
}

func (h *latHist) percentiles() Percentiles {
	if h.n == 0 {
		return Percentiles{}
	}
	qs := []float64{0.5, 0.9, 0.99, 0.999}
	out := make([]float64, len(qs))
	var seen uint64
	k := 0
	for i, c := range h.counts {
		seen += c
		// The same rank rule as percentiles: element int(q*(n-1)).
		for k < len(qs) && seen > uint64(qs[k]*float64(h.n-1)) {
			out[k] = float64(min(histValue(i), h.max)) / 1e3
			k++
		}
		if k == len(qs) {
			break
		}
	}
	return Percentiles{Count: h.n, P50: out[0], P90: out[1], P99: out[2], P999: out[3], Max: float64(h.max) / 1e3}
}
