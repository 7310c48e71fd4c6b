package bridge

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestLinkDownReasonWritesUs: the reason of a link-down by silence names
// the silence as `dxpu help units` spells durations (500us, never Go's
// 500µs): the daemons log it, and the agents pass it to the manager.
func TestLinkDownReasonWritesUs(t *testing.T) {
	t.Parallel()
	c := Config{Keepalive: 100 * time.Microsecond, DeadAfter: 500 * time.Microsecond}
	p := newTestPair(t, c, c)
	p.up()
	p.drop = func(*Bridge, []byte) bool { return true }
	p.advance(2*time.Millisecond, 10*time.Microsecond)
	reason := ""
	for _, e := range p.gev {
		if e.Kind == EventLinkDown {
			reason = e.Reason
		}
	}
	if !regexp.MustCompile(`^peer silent for [0-9.]+us$`).MatchString(reason) {
		t.Errorf("the GPU side's link-down reason %q, want peer silent for (so many) us", reason)
	}
}

// TestConfigErrorsWriteUs: Validate names a timer as `dxpu help units`
// spells durations.
func TestConfigErrorsWriteUs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c    Config
		want string
	}{
		{Config{Keepalive: -5 * time.Microsecond}, "Keepalive: -5us is negative"},
		{Config{Keepalive: 5 * time.Microsecond, DeadAfter: 4 * time.Microsecond}, "DeadAfter: 4us must exceed Keepalive 5us"},
	} {
		tc.c.Role = RoleGPU
		_, err := New(tc.c)
		if err == nil || !strings.HasSuffix(err.Error(), tc.want) {
			t.Errorf("New with %s: %v, want an error ending %q", tc.want, err, tc.want)
		}
	}
}
