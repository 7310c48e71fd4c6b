// Package units writes quantities the way `dxpu help units` spells them
// in every command's output: microseconds as "us", never "µs" (Go's
// time.Duration.String spelling), so a reader, a grep and the JSON keys'
// _us agree.
package units

import (
	"strings"
	"time"
)

// Duration writes d in Go's duration syntax with "us" for microseconds:
// 5us, 6.3us, 1.5ms, 2s. Flags read it back (time.ParseDuration takes
// both spellings).
func Duration(d time.Duration) string {
	return strings.Replace(d.String(), "µs", "us", 1)
}
