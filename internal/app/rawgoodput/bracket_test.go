package rawgoodput

import (
	"strings"
	"testing"
)

// TestBracket: the mean and the drift of two floods, and a warning only
// past DriftWarn.
func TestBracket(t *testing.T) {
	t.Parallel()
	b := Bracket{Before: UDPResult{GoodputGbps: 6, CPUSecondsPerGB: 1.5}, After: UDPResult{GoodputGbps: 12, CPUSecondsPerGB: 0.9}}
	if b.GoodputGbps() != 9 || b.Drift() != 2 || b.CPUSecondsPerGB() != 1.2 {
		t.Fatalf("mean %v, drift %v, CPU %v", b.GoodputGbps(), b.Drift(), b.CPUSecondsPerGB())
	}
	if w := DriftWarning(2); !strings.Contains(w, "differ 2.00x") {
		t.Errorf("drift 2: %q", w)
	}
	if w := DriftWarning(DriftWarn); w != "" {
		t.Errorf("drift at the threshold warned: %q", w)
	}
}
