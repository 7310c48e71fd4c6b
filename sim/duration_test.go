package sim

import (
	"testing"
	"time"
)

// TestFormatDuration: microseconds are spelled us, other units as Go
// writes them, and every string parses back to the same duration.
func TestFormatDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{5 * time.Microsecond: "5us", 965648 * time.Nanosecond: "965.648us",
		250: "250ns", 1500 * time.Microsecond: "1.5ms", 2 * time.Second: "2s", 0: "0s", -5 * time.Microsecond: "-5us"} {
		got := FormatDuration(d)
		if got != want {
			t.Errorf("FormatDuration(%d) = %q, want %q", int64(d), got, want)
		}
		if back, err := time.ParseDuration(got); err != nil || back != d {
			t.Errorf("%q parses back as %d, %v", got, int64(back), err)
		}
	}
}
