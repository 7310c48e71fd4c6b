// Package waitfor waits, in tests, for work that happens on real time. A
// wait fails the test when nothing has moved for Stall, never after a
// fixed total: on a loaded machine a transfer may take many times its usual
// time, but a transfer that stops moving is stuck.
//
// The work's progress is any count that grows while it moves (writes
// delivered, frames sent, TLPs acknowledged); the wait polls it, backing
// off from 50 µs to 2 ms between looks.
package waitfor

import (
	"testing"
	"time"
)

// Stall is how long a wait lets its progress stand still before it fails
// the test.
const Stall = 20 * time.Second

// Poll intervals: short at first (most waits end within microseconds on an
// idle machine), longer later (so a long wait does not spin).
const (
	firstPoll = 50 * time.Microsecond
	maxPoll   = 2 * time.Millisecond
)

// Progress polls check until it reports done, failing tb when the progress
// it reports has not changed for Stall. It reports whether check finished
// (false only when tb's Fatalf returns, as a fake TB's does).
func Progress(tb testing.TB, what string, check func() (done bool, progress uint64)) bool {
	tb.Helper()
	w := newWatch(tb, what, Stall)
	for {
		done, p := check()
		if done {
			return true
		}
		if !w.Wait(p) {
			return false
		}
	}
}

// Settle polls check like Progress but, instead of failing the test,
// returns false when the progress stands still for Stall: for a test that
// then reports in detail what did not settle.
func Settle(check func() (done bool, progress uint64)) bool {
	w := newWatch(nil, "", Stall)
	for {
		done, p := check()
		if done {
			return true
		}
		if w.stalled(p) {
			return false
		}
		w.sleep()
	}
}

// Until polls cond until it holds, failing tb after Stall: for one event
// with nothing to count on the way (a link coming up).
func Until(tb testing.TB, what string, cond func() bool) bool {
	tb.Helper()
	return Progress(tb, what, func() (bool, uint64) { return cond(), 0 })
}

// Watch is Progress for a loop the test drives itself (sending while the
// other side drains): call Wait with the current progress when there is
// nothing to do but wait.
type Watch struct {
	tb    testing.TB
	what  string
	stall time.Duration
	last  uint64
	moved time.Time // when last changed
	poll  time.Duration
}

// NewWatch starts watching progress, from zero, now.
func NewWatch(tb testing.TB, what string) *Watch { return newWatch(tb, what, Stall) }

func newWatch(tb testing.TB, what string, stall time.Duration) *Watch {
	return &Watch{tb: tb, what: what, stall: stall, moved: time.Now(), poll: firstPoll}
}

// Wait notes progress, fails the test when it has not changed for Stall,
// and otherwise sleeps one poll interval (shorter again after a change).
// It reports false when it failed the test.
func (w *Watch) Wait(progress uint64) bool {
	w.tb.Helper()
	if w.stalled(progress) {
		w.tb.Fatalf("%s: no progress for %v (stuck at %d)", w.what, time.Since(w.moved).Round(time.Millisecond), progress)
		return false
	}
	w.sleep()
	return true
}

// NewStall starts watching progress, from zero, now, for a loop that
// reports its own failure: see Stalled.
func NewStall(stall time.Duration) *Watch { return newWatch(nil, "", stall) }

// Stalled notes progress and reports, failing nothing, whether it has
// stood still for the watch's stall.
func (w *Watch) Stalled(progress uint64) bool { return w.stalled(progress) }

// stalled notes progress and reports whether it has stood still for the
// stall limit.
func (w *Watch) stalled(progress uint64) bool {
	if progress != w.last {
		w.last, w.moved, w.poll = progress, time.Now(), firstPoll
		return false
	}
	return time.Since(w.moved) >= w.stall
}

// sleep waits one poll interval and lengthens the next.
func (w *Watch) sleep() {
	time.Sleep(w.poll)
	w.poll = min(2*w.poll, maxPoll)
}

// Receive takes the value a goroutine sends on ch, failing the test when
// none came within Stall; what names the value in the failure.
func Receive[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	return receive(tb, ch, what, Stall)
}

func receive[T any](tb testing.TB, ch <-chan T, what string, stall time.Duration) T {
	tb.Helper()
	t := time.NewTimer(stall)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("%s: nothing came within %v", what, stall)
		var zero T
		return zero // Fatalf ended the test's goroutine: not reached
	}
}
