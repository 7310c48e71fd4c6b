package sim

import (
	"testing"
	"time"
)

// TestNextSkipsCancelled: Next reports the earliest live event, past a
// cancelled head, runs nothing, and reports false on an empty queue.
func TestNextSkipsCancelled(t *testing.T) {
	t.Parallel()
	s := New(1)
	if _, ok := s.Next(); ok {
		t.Fatal("Next on an empty simulator reports an event")
	}
	ran := false
	early := s.At(5*time.Microsecond, func() { ran = true })
	s.At(9*time.Microsecond, func() { ran = true })
	early.Stop()
	at, ok := s.Next()
	if !ok || at != 9*time.Microsecond {
		t.Fatalf("Next = %v, %v; want 9us, true", at, ok)
	}
	if ran || s.Steps() != 0 || s.Now() != 0 {
		t.Fatalf("Next ran something: ran %v steps %d now %v", ran, s.Steps(), s.Now())
	}
	s.Run(-1)
	if _, ok := s.Next(); ok || !ran {
		t.Fatalf("after running everything: Next ok %v, event ran %v", ok, ran)
	}
}
