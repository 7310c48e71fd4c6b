package driver_test

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestSendManyHeldArmsTheTimer: full frames SendManyHeld sent to a peer
// that went silent are retransmitted (or probed) at the RTO: the runner's
// timer follows the deadline their sending set. A SendManyHeld that sent
// without re-arming the timer leaves it on the keepalive an hour away
// (roomyConfig), so nothing is sent again and the wait fails.
func TestSendManyHeldArmsTheTimer(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := roomyConfig(role)
		c.MinRTO, c.InitialRTO, c.MaxRTO = time.Millisecond, 2*time.Millisecond, 10*time.Millisecond
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	startRun(t, h)
	stopGPU := startRun(t, g)
	waitUp(t, h, g)
	stopGPU()
	perFrame := (cfg(bridge.RoleHost).MTU - encap.HeaderLen) / (2 + len(write(t, 0)))
	f0 := h.Counters().FramesSent
	for i := 0; i <= 4*perFrame; i++ {
		if n, err := h.SendManyHeld([][]byte{write(t, i)}); n != 1 || err != nil {
			t.Fatalf("SendManyHeld: %d, %v", n, err)
		}
	}
	// Only the full frames went out, unless the RTO (2ms) fired while the
	// calls ran (a loaded machine: 5 frames): the timer's flush sends what
	// was held, as it should.
	if c := h.Counters(); c.FramesSent-f0 != 4 && c.RTOs == 0 {
		t.Fatalf("%d frames sent, want the 4 full ones", c.FramesSent-f0)
	}
	waitfor.Until(t, "a retransmission or probe after 4 unacknowledged frames (RTO 2ms)", func() bool {
		return h.Counters().FramesSent-f0 > 4
	})
}

// TestTimerKeepsPaceWithAge: the timer is armed for the time left to the
// deadline, not for the deadline's distance from the runner's start: a
// runner that has run a while still sends its keepalives on time.
//
// A runner that armed its timer for the deadline itself, once age old,
// waits at least age for each keepalive: from the moment the runners are
// age old, none of the timers armed from then on fires before they are
// twice that old. Correct runners send a keepalive every 5ms each, so the
// test waits for 10 of them, or for the runners (by their own clock) to
// reach twice the age they had when counting began, whichever comes
// first, and fails on the latter. The window is the product's own bound
// (an age's wait for each timer), not a guess at the machine's speed: a
// correct pair misses it only if each runner's five 5ms keepalives take
// over 400ms, each some 80ms late.
func TestTimerKeepsPaceWithAge(t *testing.T) {
	t.Parallel()
	const age, want = 400 * time.Millisecond, 10
	cfg := func(role bridge.Role) bridge.Config {
		c := testConfig(role)
		c.Keepalive, c.DeadAfter = 5*time.Millisecond, time.Hour
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	keepalives := func() uint64 { return h.Counters().KeepalivesSent + g.Counters().KeepalivesSent }
	waitfor.Until(t, "runners 400ms old", func() bool { return h.Now() >= age })
	from, k0 := h.Now(), keepalives()
	waitfor.Until(t, "10 keepalives, or the runners twice as old", func() bool {
		return keepalives()-k0 >= want || h.Now() >= 2*from
	})
	if k := keepalives() - k0; k < want {
		t.Fatalf("%d keepalives from runner age %v to %v with a 5ms keepalive, want %d", k, from, h.Now(), want)
	}
}
