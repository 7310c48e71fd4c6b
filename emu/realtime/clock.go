package realtime

import (
	"runtime"
	"sync"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
)

// Clock paces a simulator to the wall clock. It implements host.Driver.
type Clock struct {
	S     *sim.Sim
	start time.Time
	mu    sync.Mutex
	inbox []func()
	// world is held while the simulation runs (a step, or the tail of
	// Advance): code outside the simulation's goroutine that touches the
	// world (a NetTLP port reading host memory) holds it too.
	world sync.Mutex
	wake  chan struct{}
	// Tick bounds how long the loop sleeps between looks at the clock
	// (default 20us): the resolution of the wall-clock world.
	Tick time.Duration
	// Idle is how long RunWhile waits with nothing scheduled and nothing
	// posted before it reports a stall (default 2s).
	Idle time.Duration
	// Spin is how long the loop polls after the last event before it
	// sleeps (default 50us).
	Spin time.Duration
}

// New returns a clock for s, which must be at virtual time 0 (fresh).
func New(s *sim.Sim) *Clock {
	return &Clock{S: s, start: time.Now(), wake: make(chan struct{}, 1), Tick: 20 * time.Microsecond, Idle: 2 * time.Second, Spin: 50 * time.Microsecond}
}

// Elapsed returns the wall time since the clock started.
func (c *Clock) Elapsed() time.Duration { return time.Since(c.start) }

// Post queues fn to run in the simulation at the current time; it may be
// called from any goroutine and never blocks.
func (c *Clock) Post(fn func()) {
	c.mu.Lock()
	c.inbox = append(c.inbox, fn)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *Clock) drain() int {
	c.mu.Lock()
	q := c.inbox
	c.inbox = nil
	c.mu.Unlock()
	for _, fn := range q {
		fn()
	}
	return len(q)
}

// step brings the simulation up to the wall clock and runs what is due.
func (c *Clock) step() int {
	c.world.Lock()
	defer c.world.Unlock()
	n := int(pcie.RunUntil(c.S, c.Elapsed()))
	return n + c.drain()
}

// RunWhile implements host.Driver: it runs the simulation in step with the
// wall clock while cond holds.
func (c *Clock) RunWhile(cond func() bool) bool {
	c.rebase()
	idleSince := time.Now()
	t := time.NewTimer(c.Tick)
	defer t.Stop()
	lastIdleCheck := time.Now()
	for cond() {
		if c.step() > 0 {
			idleSince = time.Now()
			lastIdleCheck = idleSince
		} else if c.S.Pending() > 0 {
			lastIdleCheck = time.Now()
		} else if time.Since(lastIdleCheck) > c.Idle {
			return false
		}
		if !cond() {
			break
		}
		if time.Since(idleSince) < c.Spin {
			// Something just happened and more is likely due within
			// microseconds (device latencies): poll briefly, as a
			// kernel-bypass loop does, before sleeping.
			runtime.Gosched()
			continue
		}
		t.Reset(c.Tick)
		select {
		case <-c.wake:
		case <-t.C:
		}
	}
	return true
}

// rebase discounts wall time that passed outside the driver (set-up, the
// caller's own work): the simulation's clock counts only time during which
// it ran, so timers set just before, such as a request's completion
// timeout, are not fired by a pause that the simulation never saw.
func (c *Clock) rebase() {
	if lag := c.Elapsed() - c.S.Now(); lag > 0 {
		c.start = c.start.Add(lag)
	}
}

// Advance implements host.Driver: d of wall time passes while the
// simulation keeps running.
func (c *Clock) Advance(d time.Duration) {
	c.rebase()
	end := c.S.Now() + d
	c.RunWhile(func() bool { return c.Elapsed() < end })
	c.world.Lock()
	pcie.RunUntil(c.S, end)
	c.world.Unlock()
}

// World returns the lock held while the simulation runs. Hold it to read
// or write the emulated world (host memory, say) from another goroutine:
// between steps nothing in the simulation moves.
func (c *Clock) World() sync.Locker { return &c.world }
