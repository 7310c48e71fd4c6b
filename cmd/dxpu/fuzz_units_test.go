package main

import (
	"math"
	"strings"
	"testing"
)

// FuzzGbpsAlias reads arbitrary values of the old spellings of
// --link-gbps (a number of Gbit/s, or with withUnit a rate with its unit).
// Invariants: an accepted rate is finite and not negative; a refusal is
// one non-empty line and leaves the rate as it was.
func FuzzGbpsAlias(f *testing.F) {
	for _, s := range []string{"100", "12.5", "0", "-1", "NaN", "+Inf", "1e309", "100Gbit", "12.5GB/s", " 25 ", "0x1p4"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, withUnit bool) {
		rate := 7.0
		v := gbpsAlias{rate: &rate, withUnit: withUnit}
		if err := v.Set(s); err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") || rate != 7 {
				t.Fatalf("%q: refusal %q, rate now %v", s, msg, rate)
			}
			return
		}
		if math.IsNaN(rate) || math.IsInf(rate, 0) || rate < 0 {
			t.Fatalf("%q accepted as %v Gbit/s", s, rate)
		}
	})
}
