package pool

import (
	"errors"
	"testing"
	"time"
)

// TestMaxRTTBoundaryInclusive: MaxRTT is a limit a box may reach: a box
// measured at exactly MaxRTT is chosen, one a nanosecond beyond is not.
func TestMaxRTTBoundaryInclusive(t *testing.T) {
	t.Parallel()
	const limit = 30 * time.Microsecond
	for _, c := range []struct {
		rtt  time.Duration
		want error
	}{
		{limit - time.Nanosecond, nil},
		{limit, nil},
		{limit + time.Nanosecond, ErrInsufficient},
	} {
		p := New()
		mustAdd(t, p, box("b", "p", "r", 2, "A100", 40<<10), host("h", "p", "r"))
		if err := p.SetRTT(RTT{Host: "h", Box: "b", RTT: Duration(c.rtt)}); err != nil {
			t.Fatal(err)
		}
		a, err := p.Reserve("a", Request{Host: "h", Count: 2, MaxRTT: Duration(limit)})
		if !errors.Is(err, c.want) {
			t.Fatalf("box at %v, max_rtt %v: %v, want %v", c.rtt, limit, err, c.want)
		}
		if err == nil && len(a.GPUs) != 2 {
			t.Fatalf("box at %v: got %d GPUs", c.rtt, len(a.GPUs))
		}
		check(t, p)
	}
}
