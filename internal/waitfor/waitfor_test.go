package waitfor

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records failures instead of ending the test.
type fakeTB struct {
	testing.TB
	fatals []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// A wait whose progress keeps moving outlasts Stall many times over; one
// whose progress stands still fails after Stall, naming what it waited for
// and where it stuck.
func TestWatch(t *testing.T) {
	t.Parallel()
	const stall = 30 * time.Millisecond
	f := &fakeTB{}
	w := newWatch(f, "moving", stall)
	start := time.Now()
	for p := uint64(1); time.Since(start) < 5*stall; p++ {
		if !w.Wait(p) {
			t.Fatalf("failed while moving: %q", f.fatals)
		}
	}
	if len(f.fatals) != 0 {
		t.Fatalf("fatals %q", f.fatals)
	}

	// start is taken before the first Wait, where the watch starts its
	// own clock: it may fail no sooner than stall after that.
	start = time.Now()
	w = newWatch(f, "writes delivered", stall)
	w.Wait(7)
	for w.Wait(7) {
		if time.Since(start) > 100*stall {
			t.Fatal("a stuck wait never failed")
		}
	}
	if since := time.Since(start); since < stall {
		t.Fatalf("failed after %v, before the stall of %v", since, stall)
	}
	if len(f.fatals) != 1 || !strings.Contains(f.fatals[0], "writes delivered") || !strings.Contains(f.fatals[0], "stuck at 7") {
		t.Fatalf("fatals %q", f.fatals)
	}
}

// Progress returns once the condition holds, with the work done on
// another goroutine.
func TestProgress(t *testing.T) {
	t.Parallel()
	var n atomic.Uint64
	go func() {
		for range 100 {
			n.Add(1)
		}
	}()
	if !Progress(t, "counting", func() (bool, uint64) { v := n.Load(); return v == 100, v }) {
		t.Fatal("Progress reported a failure")
	}
	if !Until(t, "counted", func() bool { return n.Load() == 100 }) {
		t.Fatal("Until reported a failure")
	}
}

// Settle returns true when the check finishes and false, without failing
// the test, when it stops moving (here: never moves, with a short stall).
func TestSettle(t *testing.T) {
	t.Parallel()
	n := 0
	if !Settle(func() (bool, uint64) { n++; return n == 50, uint64(n) }) {
		t.Fatal("Settle gave up on a moving check")
	}
	w := NewStall(20 * time.Millisecond)
	start := time.Now()
	for p := uint64(1); time.Since(start) < 100*time.Millisecond; p++ {
		if w.Stalled(p) {
			t.Fatal("stalled while moving")
		}
	}
	start = time.Now()
	for !w.Stalled(3) {
		w.sleep()
	}
	if since := time.Since(start); since < 20*time.Millisecond {
		t.Fatalf("stalled after %v", since)
	}
}

// Receive returns what was sent; with nothing sent it fails once, naming
// what it waited for.
func TestReceive(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	f := &fakeTB{}
	if v := receive(f, ch, "the answer", 30*time.Millisecond); v != 7 || len(f.fatals) != 0 {
		t.Fatalf("got %d, fatals %q", v, f.fatals)
	}
	start := time.Now()
	receive(f, ch, "the second answer", 30*time.Millisecond)
	if time.Since(start) < 30*time.Millisecond || len(f.fatals) != 1 || !strings.Contains(f.fatals[0], "the second answer: nothing came within 30ms") {
		t.Fatalf("after %v: fatals %q", time.Since(start), f.fatals)
	}
}
