package sim

import (
	"strings"
	"time"
)

// FormatDuration writes d as `dxpu help units` spells durations in all
// output: Go's syntax with "us" for microseconds (5us, 6.3us, 1.5ms, 2s),
// never time.Duration.String's "µs". It lives here, in the lowest layer
// with durations, so every package that prints one may call it.
func FormatDuration(d time.Duration) string {
	return strings.Replace(d.String(), "µs", "us", 1)
}
