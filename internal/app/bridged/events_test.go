package bridged

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
)

// TestEventLogAfterLinkDown: the flood a link drop causes (one posted-lost
// event per TLP) is one line and one count, while link changes are all
// logged.
func TestEventLogAfterLinkDown(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	l := newEventLog(slog.New(slog.NewTextHandler(&buf, nil)), 7, bridge.RoleHost, func() time.Time { return now })
	l.log(bridge.Event{Kind: bridge.EventLinkDown, Reason: "peer silent"})
	l.log(bridge.Event{Kind: bridge.EventSurpriseRemoval})
	for i := range 3000 {
		l.log(bridge.Event{Kind: bridge.EventPostedLost, Count: 1, At: time.Duration(i) * 15 * time.Microsecond})
		now = now.Add(15 * time.Microsecond) // 3000 in 45 ms, as seen in the field
	}
	l.log(bridge.Event{Kind: bridge.EventLinkUp})
	now = now.Add(time.Second)
	l.limit.Flush(false)
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 5 {
		t.Fatalf("%d lines, want 5 (link-down, surprise-removal, first posted-lost, link-up, count):\n%s", len(got), buf.String())
	}
	for i, want := range []string{"link-down", "surprise-removal", "posted-lost", "link-up", "posted-lost x2999 in the last"} {
		if !strings.Contains(got[i], want) {
			t.Errorf("line %d %q lacks %q", i, got[i], want)
		}
	}
	if !strings.Contains(got[4], "amount=2999") || !strings.Contains(got[4], "pair=7 role=host") {
		t.Errorf("count line %q", got[4])
	}
}

// A daemon held up logs its late timers: one line with how late, the rest
// of the interval counted.
func TestEventLogLateTimer(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	l := newLateLog(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	late := l.For("pair", 7, "role", bridge.RoleGPU)
	for range 50 {
		late(230 * time.Millisecond)
		now = now.Add(time.Millisecond)
	}
	now = now.Add(time.Second)
	l.limit.Flush(false)
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(got) != 2 || !strings.Contains(got[0], "bridge timer late") || !strings.Contains(got[0], "late=230ms") ||
		!strings.Contains(got[1], "timer-late x49") {
		t.Fatalf("want one line with late=230ms and a count of 49:\n%s", buf.String())
	}
}
