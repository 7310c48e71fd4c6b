package encap

import (
	"strings"
	"testing"
)

// FuzzParseNames reads arbitrary encapsulation names (--to, --encap) and
// role names (--role, key logs). Invariants: a name that parses is the
// name String writes; a refusal is one line.
func FuzzParseNames(f *testing.F) {
	for _, s := range []string{"nettlp", "dxpu-eth", "dxpu-udp", "none", "host", "gpu", "GPU", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if e, err := ParseEncap(s); err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
		} else if e.String() != s || e == EncapNone {
			t.Fatalf("%q parsed as %v", s, e)
		}
		if r, ok := ParseRole(s); ok && r.String() != s {
			t.Fatalf("%q parsed as role %v", s, r)
		}
	})
}
