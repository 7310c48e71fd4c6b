package labnet

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseSamples reads an arbitrary Prometheus text exposition, as the
// lab reads the switch's /metrics. Invariants: a refusal is one non-empty
// line; no more samples than lines; every sample written back as a line
// reads back to the same value.
func FuzzParseSamples(f *testing.F) {
	f.Add("# HELP dxpu_switch_pair_packets_total Frames forwarded.\n# TYPE dxpu_switch_pair_packets_total counter\n" +
		`dxpu_switch_pair_packets_total{pair="7",reason="to_gpu"} 12` + "\n" +
		`dxpu_switch_pair_bytes_total{pair="7",reason="to_host"} 1.5e+06` + "\n" + "go_goroutines 9\n")
	f.Add("up NaN\nx +Inf\n\ny -0\n")
	f.Add("novalue\n")
	f.Add("a{b=\"c d\"} x\n")
	f.Fuzz(func(t *testing.T, in string) {
		m, err := ParseSamples(strings.NewReader(in))
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal is not one line: %q", msg)
			}
			return
		}
		if len(m) > strings.Count(in, "\n")+1 {
			t.Fatalf("%d samples from %d lines", len(m), strings.Count(in, "\n")+1)
		}
		for k, v := range m {
			line := k + " " + strconv.FormatFloat(v, 'g', -1, 64)
			m2, err := ParseSamples(strings.NewReader(line))
			if err != nil || len(m2) != 1 || !(m2[k] == v || math.IsNaN(v) && math.IsNaN(m2[k])) {
				if strings.ContainsAny(k, "\r\n") || strings.HasPrefix(k, "#") || k == "" && line == " "+strconv.FormatFloat(v, 'g', -1, 64) {
					continue // a key that cannot be written back as one line
				}
				t.Fatalf("%q = %v, written back as %q reads %v (%v)", k, v, line, m2, err)
			}
		}
	})
}
