package e2ebench

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteTextSizeOrder: the text report lists copy sizes smallest
// first (whatever the order of --sizes, which the JSON keeps) with the
// flags' suffixes, each with its rates, and no JSON.
func TestWriteTextSizeOrder(t *testing.T) {
	t.Parallel()
	r := Result{Mode: "loopback", MTU: 9000, EchoP50Us: 10, EchoP99Us: 20, MMIOReadP50Us: 12, MMIOReadP99Us: 30,
		Copies: []Copy{{SizeBytes: 16 << 20, H2DGbps: 31.5, D2HGbps: 29.75}, {SizeBytes: 64 << 10, H2DGbps: 2.25, D2HGbps: 2.5},
			{SizeBytes: 256 << 10, H2DGbps: 8.5, D2HGbps: 7.5}},
		Ratios: Ratios{MMIOP50OverEcho: 1.2}}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Log("\n" + s)
	if strings.Contains(s, "{") {
		t.Errorf("text report holds JSON:\n%s", s)
	}
	last := -1
	for _, row := range []string{"64K ", "256K ", "16M "} {
		i := strings.Index(s, row)
		if i < 0 || i < last {
			t.Fatalf("row %q at %d after %d: want 64K, 256K, 16M in that order:\n%s", row, i, last, s)
		}
		last = i
	}
	for _, want := range []string{"2.25", "2.50", "31.50", "29.75", "MMIO read p50 / echo p50", "1.20", "MTU 9000 bytes"} {
		if !strings.Contains(s, want) {
			t.Errorf("text report lacks %q", want)
		}
	}
}
