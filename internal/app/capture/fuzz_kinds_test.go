package capture

import (
	"strings"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// FuzzParseKinds reads arbitrary `dxpu pcap generate --kind` values.
// Invariants: a refusal is one line; every kind returned is a TLP kind
// whose name reads back; a list gives no more kinds than items.
func FuzzParseKinds(f *testing.F) {
	for _, s := range []string{"mix", "mem", "MRd,CplD", " MWr , Cpl", "MRd,,CplD", "Nope", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ks, err := ParseKinds(s)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
			return
		}
		if len(ks) == 0 || s != "mix" && s != "mem" && len(ks) > strings.Count(s, ",")+1 {
			t.Fatalf("%q: %d kinds", s, len(ks))
		}
		for _, k := range ks {
			if back, ok := tlp.ParseKind(k.String()); !ok || back != k {
				t.Fatalf("%q gave kind %v", s, k)
			}
		}
	})
}
