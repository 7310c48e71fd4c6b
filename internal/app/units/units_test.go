package units

import (
	"testing"
	"time"
)

// TestDuration: microseconds are spelled us, other units as Go writes
// them, and every string parses back to the same duration.
func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{5 * time.Microsecond: "5us", 6300 * time.Nanosecond: "6.3us",
		250: "250ns", 1500 * time.Microsecond: "1.5ms", 2 * time.Second: "2s", 0: "0s"} {
		got := Duration(d)
		if got != want {
			t.Errorf("Duration(%d) = %q, want %q", d, got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("%q parses back as %v, %v", got, back, err)
		}
	}
}
