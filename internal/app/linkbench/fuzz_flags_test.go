package linkbench

import (
	"math"
	"strings"
	"testing"
)

// FuzzParseFlags reads arbitrary `dxpu bench link --bw` and `--mix`
// values. Invariants: a refusal is one line naming the flag; an accepted
// bandwidth is a finite number of bit/s above 0; accepted mix weights are
// finite, from 0 to the bound.
func FuzzParseFlags(f *testing.F) {
	for _, s := range []string{"10G", "100M", "1e9", "0", "-5K", "1.5e-3", "", "write=1,read=2", "cfg=0.5", "read=1e7", "write", "io=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		oneLine := func(flag string, err error) {
			if msg := err.Error(); !strings.Contains(msg, flag) || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
		}
		if bw, err := parseBandwidth(s); err != nil {
			oneLine("--bw", err)
		} else if s != "" && !(bw > 0 && !math.IsInf(bw, 0)) {
			t.Fatalf("--bw %q accepted as %v bit/s", s, bw)
		}
		var o Options
		if err := parseMix(s, &o); err != nil {
			oneLine("--mix", err)
			return
		}
		for _, w := range []float64{o.Write, o.Read, o.Config} {
			if !(w >= 0 && w <= maxMixWeight) {
				t.Fatalf("--mix %q accepted with weight %v", s, w)
			}
		}
	})
}
