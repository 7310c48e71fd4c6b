// Package units writes quantities the way `dxpu help units` spells them
// in every command's output: microseconds as "us", never "µs" (Go's
// time.Duration.String spelling), so a reader, a grep and the JSON keys'
// _us agree.
package units

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dxpu/dxpu/sim"
)

// Duration writes d in Go's duration syntax with "us" for microseconds:
// 5us, 6.3us, 1.5ms, 2s. Flags read it back (time.ParseDuration takes
// both spellings). It is sim.FormatDuration, which the layers below app
// call.
func Duration(d time.Duration) string { return sim.FormatDuration(d) }

// Sprintf is fmt.Sprintf with every time.Duration argument written as
// Duration writes it (%v, %s, %q; other verbs as fmt would).
func Sprintf(format string, args ...any) string { return fmt.Sprintf(format, Args(args)...) }

// Errorf is fmt.Errorf with durations written as Sprintf writes them;
// %w wraps as it does in fmt.Errorf.
func Errorf(format string, args ...any) error { return fmt.Errorf(format, Args(args)...) }

// Args returns args with each time.Duration in it made to print as
// Duration; args itself is left as it was.
func Args(args []any) []any {
	out, copied := args, false
	for i, a := range args {
		if d, ok := a.(time.Duration); ok {
			if !copied {
				out, copied = append([]any(nil), args...), true
			}
			out[i] = duration(d)
		}
	}
	return out
}

// duration is a time.Duration that fmt writes as Duration does.
type duration time.Duration

func (d duration) Format(f fmt.State, verb rune) {
	switch {
	case verb == 's' || verb == 'q' || verb == 'v' && !f.Flag('#'):
		fmt.Fprintf(f, fmt.FormatString(f, verb), Duration(time.Duration(d)))
	default:
		fmt.Fprintf(f, fmt.FormatString(f, verb), int64(d))
	}
}

// ReplaceAttr, as a slog handler's HandlerOptions.ReplaceAttr, writes
// duration attributes as Duration does (slog's text handler would write
// time.Duration.String's µs).
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(Duration(a.Value.Duration()))
	}
	return a
}
