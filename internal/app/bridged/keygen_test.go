package bridged

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
)

// TestKeyGenerationWatch: frames refused for their generation are logged
// with both numbers, once per 10 s however many come (the rest counted in
// one line), and not at all while none come.
func TestKeyGenerationWatch(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	w := NewKeyGenerationWatch(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	s := seal.State{ActiveGeneration: 1}
	w.Check(bridge.Counters{}, s)
	if buf.Len() != 0 {
		t.Fatalf("logged with nothing refused: %s", buf.String())
	}
	var c bridge.Counters
	for range 40 { // 10 s of checks, 250 ms apart, 170 refused frames each
		c.DroppedUnknownGeneration += 170
		w.Check(c, s)
		now = now.Add(250 * time.Millisecond)
	}
	w.Check(c, s) // nothing new: no line, though the interval is over
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines after 10 s of refused frames and a check with none new, want the first alone:\n%s", n, buf.String())
	}
	c.DroppedUnknownGeneration++
	w.Check(c, s)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	const want = `msg="key generation mismatch: peer seals with generation 0, this end has 1"`
	if len(lines) != 3 || !strings.Contains(lines[0], want) || !strings.Contains(lines[1], "key-generation-mismatch x39") ||
		!strings.Contains(lines[1], "amount=6630") || !strings.Contains(lines[2], want) {
		t.Fatalf("want the mismatch, a count of the 39 checks held back (6630 frames) and the mismatch again:\n%s", buf.String())
	}
	if msg := Mismatch(bridge.Counters{DroppedUnknownGeneration: 1, LastUnknownGeneration: 0x2c}, seal.State{ActiveGeneration: 1_700_000_000}); !strings.Contains(msg, "generation 44, this end has 1700000000 (the wire carries the low 8 bits") {
		t.Errorf("a manager's generation: %q", msg)
	}
}
