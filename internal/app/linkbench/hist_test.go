package linkbench

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The histogram's percentiles agree with the exact ones within its 0.2%
// bucket width (exactly below 1024 ns), and its count and max are exact.
func TestLatHistMatchesExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, scale := range []float64{500, 50e3, 5e6} {
		h := newLatHist()
		var exact []time.Duration
		for i := 0; i < 100000; i++ {
			d := time.Duration(rng.ExpFloat64() * scale)
			h.add(d)
			exact = append(exact, d)
		}
		want := percentiles(exact)
		got := h.percentiles()
		if got.Count != want.Count || got.Max != want.Max {
			t.Fatalf("scale %g: count/max %d/%g, want %d/%g", scale, got.Count, got.Max, want.Count, want.Max)
		}
		for _, p := range [][2]float64{{got.P50, want.P50}, {got.P90, want.P90}, {got.P99, want.P99}, {got.P999, want.P999}} {
			tol := math.Max(p[1]*0.002, 0.0005)
			if math.Abs(p[0]-p[1]) > tol {
				t.Fatalf("scale %g: percentile %g us, exact %g us (got %+v want %+v)", scale, p[0], p[1], got, want)
			}
		}
	}
	if (&latHist{}).n != 0 || newLatHist().percentiles() != (Percentiles{}) {
		t.Fatal("empty histogram")
	}
}

// Every duration lands in a bucket whose middle is within 0.2% of it, and
// bucket indexes grow with the duration.
func TestLatHistBuckets(t *testing.T) {
	prev := -1
	for v := uint64(0); v < 1<<34; v = v*17/16 + 1 {
		i := histIndex(v)
		if i < prev {
			t.Fatalf("index %d for %d after %d", i, v, prev)
		}
		prev = i
		mid := float64(histValue(i))
		if math.Abs(mid-float64(v)) > float64(v)*0.002+0.5 {
			t.Fatalf("%d ns in bucket %d with middle %g", v, i, mid)
		}
	}
}
