package realtime

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
)

// burn spends d of wall time on the processor.
func burn(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// TestOverloadDoesNotSpiral: an event that re-arms itself every 100 ns of
// simulated time but costs 10 us of wall time can never catch up with the
// wall clock. Chasing it, each step would run a hundred times longer than
// the one before, and work posted from other goroutines (frames from the
// bridges) would wait for ever longer steps. With the lag capped, 20
// functions posted one after another all run, each soon after it is
// posted.
func TestOverloadDoesNotSpiral(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	c := New(s)
	c.MaxLag = 20 * time.Microsecond
	var tick func()
	tick = func() {
		burn(10 * time.Microsecond)
		s.After(100*time.Nanosecond, tick)
	}
	s.After(0, tick)
	const posts = 20
	var ran atomic.Int32
	ranc := make(chan struct{}, 1)
	var worst atomic.Int64
	go func() {
		for range posts {
			t0 := time.Now()
			c.Post(func() {
				worst.Store(max(worst.Load(), int64(time.Since(t0))))
				ran.Add(1)
				ranc <- struct{}{}
			})
			<-ranc
		}
	}()
	done := make(chan bool, 1)
	go func() { done <- c.RunWhile(func() bool { return ran.Load() < posts }) }()
	// A clock that chases the wall clock never gets to the posted
	// functions: their count stands still.
	waitfor.Progress(t, "posted functions running (a clock that chases the wall clock starves them)", func() (bool, uint64) {
		return len(done) > 0, uint64(ran.Load())
	})
	if !<-done {
		t.Fatal("RunWhile reported a stall")
	}
	t.Logf("longest wait of a posted function: %v", time.Duration(worst.Load()))
}

// TestFlushBetweenMoments: when a step runs events of several moments
// (the simulation caught up after a pause), flushers run after each
// moment, so that an engine pacing itself by a sender's backlog sees what
// it sent leave before its next moment.
func TestFlushBetweenMoments(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	c := New(s)
	var flushes int
	c.AddFlusher(func() bool { flushes++; return false })
	var seen []int
	for i := range 3 {
		s.At(time.Duration(i+1)*time.Microsecond, func() { seen = append(seen, flushes) })
	}
	s.At(3*time.Microsecond, func() { seen = append(seen, flushes) }) // same moment as the last
	burn(50 * time.Microsecond)                                       // all four due at the first step
	c.world.Lock()
	c.start = time.Now().Add(-50 * time.Microsecond)
	c.world.Unlock()
	c.step()
	want := []int{0, 1, 2, 2}
	if len(seen) != len(want) {
		t.Fatalf("ran %d events, want %d", len(seen), len(want))
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("flushes seen by each event %v, want %v", seen, want)
		}
	}
}

// TestPollsWhileEventsKeepComing: an engine that steps every 100 ns keeps
// the next event always near, when the loop skips its polls to run the
// event on time; it must still poll every few microseconds, or the
// frames of runners that leave their sockets to it would wait forever.
// After RunWhile returns, the pollers are told the loop stopped polling.
func TestPollsWhileEventsKeepComing(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	c := New(s)
	polls := 0
	var idles atomic.Int32
	c.AddPoller(func() int { polls++; return 0 }, func() { idles.Add(1) })
	var tick func()
	tick = func() { s.After(100*time.Nanosecond, tick) }
	s.After(0, tick)
	// Run until a few polls came (progress), with a bound far above what
	// they need: a loaded machine may stall the loop, and a step after a
	// stall runs all the events it missed with one poll, so a fixed span
	// of time proves nothing. Without the bound every step skips its poll
	// (an event is always less than pollSkip away) and none come at all.
	const want = 3
	limit := 2 * time.Second
	c.RunWhile(func() bool { return polls < want && s.Now() < limit })
	if polls < want {
		t.Fatalf("%d polls in %v of events every 100ns, want %d", polls, s.Now(), want)
	}
	t.Logf("%d polls", polls)
	waitfor.Until(t, "the pollers told the loop stopped", func() bool { return idles.Load() > 0 })
}

// TestPollHold: between two RunWhile calls closer than PollHold the
// pollers keep their sockets with the loop (no hand-back, so no runner
// goroutine wakes between two requests); once the loop stays away longer,
// they are told it stopped. With PollHold 0 they are told at once.
func TestPollHold(t *testing.T) {
	t.Parallel()
	for _, hold := range []time.Duration{0, time.Hour} {
		s := sim.New(1)
		c := New(s)
		c.PollHold = hold
		var idles atomic.Int32
		c.AddPoller(func() int { return 0 }, func() { idles.Add(1) })
		for i := range 5 {
			s.After(time.Microsecond, func() {})
			c.RunWhile(func() bool { _, ok := s.Next(); return ok })
			if got, want := idles.Load(), int32(i+1); hold == 0 && got != want {
				t.Fatalf("hold 0: %d hand-backs after %d runs, want %d", got, i+1, want)
			}
		}
		if hold > 0 && idles.Load() != 0 {
			t.Fatalf("hold %v: %d hand-backs between runs 1us apart, want none", hold, idles.Load())
		}
		// A short hold expires: the pollers hear of it without another run.
		c.PollHold = time.Millisecond
		s.After(time.Microsecond, func() {})
		before := idles.Load()
		c.RunWhile(func() bool { _, ok := s.Next(); return ok })
		waitfor.Until(t, "the hand-back after the hold", func() bool { return idles.Load() > before })
	}
}
