package bytesize

import (
	"strings"
	"testing"
)

// FuzzParse reads arbitrary byte-count flags. Invariants: a refusal is one
// line that names the flag; a count Format writes parses back to itself; a
// list has no more counts than items.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"64M", "4096", "0x1000", "512k", " 1G ", "16T", "18446744073709551615", "17179869184G", "1,2K,0x10", ",", "-1", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		oneLine := func(err error) {
			if msg := err.Error(); !strings.Contains(msg, "--size") || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
		}
		if v, err := Parse("size", s); err != nil {
			oneLine(err)
		} else if back, err := Parse("size", Format(v)); err != nil || back != v {
			t.Fatalf("%q = %d, written %q, reads %d (%v)", s, v, Format(v), back, err)
		}
		l, err := ParseList("size", s)
		if err != nil {
			oneLine(err)
			return
		}
		if len(l) > strings.Count(s, ",")+1 {
			t.Fatalf("%q: %d counts", s, len(l))
		}
	})
}
