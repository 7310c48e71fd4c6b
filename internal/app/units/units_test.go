package units

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
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

// TestSprintf: a duration argument prints with us under %v, %s and %q,
// keeps its number under other verbs, and %w still wraps.
func TestSprintf(t *testing.T) {
	t.Parallel()
	d := 97 * time.Microsecond
	for format, want := range map[string]string{"probed after %v": "probed after 97us", "%s": "97us", "%q": `"97us"`,
		"%8v|": "    97us|", "%-6v|": "97us  |", "%d": "97000", "%#v": "97000", "%v %v": "1.5ms 2s"} {
		args := []any{d}
		if format == "%v %v" {
			args = []any{1500 * time.Microsecond, 2 * time.Second}
		}
		if got := Sprintf(format, args...); got != want {
			t.Errorf("Sprintf(%q) = %q, want %q", format, got, want)
		}
	}
	args := []any{d, "x"}
	_ = Sprintf("%v %s", args...)
	if _, ok := args[0].(time.Duration); !ok {
		t.Errorf("Sprintf changed its caller's arguments: %T", args[0])
	}
	base := errors.New("base")
	err := Errorf("after %v: %w", d, base)
	if err.Error() != "after 97us: base" || !errors.Is(err, base) {
		t.Errorf("Errorf = %q (wraps base: %v)", err, errors.Is(err, base))
	}
}

// TestReplaceAttr: a text logger with ReplaceAttr writes duration
// attributes, direct or in a group, with us.
func TestReplaceAttr(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr}))
	log.Info("m", "late", 965648*time.Nanosecond, slog.Group("g", slog.Duration("retry_in", 5*time.Microsecond)), "n", 3)
	got := buf.String()
	for _, want := range []string{"late=965.648us", "g.retry_in=5us", "n=3"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "µ") {
		t.Errorf("log line %q writes µ", got)
	}
}
