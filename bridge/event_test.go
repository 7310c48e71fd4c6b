package bridge

import (
	"strings"
	"testing"
	"time"
)

// TestEventStringWritesUs: every kind of event writes its time as `dxpu
// help units` spells durations, 965.648us and never Go's 965.648µs (the
// daemons log events with this text).
func TestEventStringWritesUs(t *testing.T) {
	t.Parallel()
	at := 965648 * time.Nanosecond
	for _, e := range []Event{
		{Kind: EventLinkUp, At: at, Session: 0x1234},
		{Kind: EventLinkDown, At: at, Reason: "peer sent RESET"},
		{Kind: EventSurpriseRemoval, At: at},
		{Kind: EventPostedLost, At: at, Count: 3},
		{Kind: EventCompletionTimeout, At: at, Tag: 7},
	} {
		s := e.String()
		if !strings.HasPrefix(s, e.Kind.String()+" at 965.648us") || strings.Contains(s, "µ") {
			t.Errorf("%v event written %q, want it to begin %q", e.Kind, s, e.Kind.String()+" at 965.648us")
		}
	}
}
