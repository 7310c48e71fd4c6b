package sim

import (
	"testing"
	"time"
)

func TestOrderAndCancel(t *testing.T) {
	s := New(1)
	var got []int
	s.After(2*time.Microsecond, func() { got = append(got, 2) })
	s.After(1*time.Microsecond, func() { got = append(got, 1) })
	s.After(1*time.Microsecond, func() { got = append(got, 11) })
	tm := s.After(3*time.Microsecond, func() { got = append(got, 3) })
	if !tm.Stop() {
		t.Fatal("Stop on a pending timer returned false")
	}
	s.Run(-1)
	want := []int{1, 11, 2}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if s.Now() != 2*time.Microsecond {
		t.Fatalf("now = %v, want 2us", s.Now())
	}
}

func TestRunUntil(t *testing.T) {
	s := New(1)
	ran := false
	s.After(time.Second, func() { ran = true })
	s.Run(time.Millisecond)
	if ran || s.Now() != time.Millisecond {
		t.Fatalf("ran=%v now=%v", ran, s.Now())
	}
}

func TestDeterministicRand(t *testing.T) {
	a, b := New(42), New(42)
	for i := 0; i < 10; i++ {
		if a.Rand().Uint64() != b.Rand().Uint64() {
			t.Fatal("same seed, different streams")
		}
	}
}

// A cancelled event at the head of the queue must not let Run execute a live
// event that lies beyond until.
func TestRunUntilWithCancelledHead(t *testing.T) {
	s := New(1)
	s.After(time.Microsecond, func() {}).Stop()
	ran := false
	s.After(time.Millisecond, func() { ran = true })
	s.Run(10 * time.Microsecond)
	if ran || s.Now() != 10*time.Microsecond {
		t.Fatalf("ran=%v now=%v, want not run and now=10us", ran, s.Now())
	}
}

// A stale handle to a recycled event must not cancel the event that reuses it.
func TestStaleTimerDoesNotCancelReusedEvent(t *testing.T) {
	s := New(1)
	old := s.After(time.Microsecond, func() {})
	s.Run(-1)
	ran := false
	s.After(time.Microsecond, func() { ran = true })
	if old.Stop() {
		t.Fatal("Stop on a fired timer returned true")
	}
	s.Run(-1)
	if !ran {
		t.Fatal("a stale Stop cancelled a newer event")
	}
}

func BenchmarkScheduleAndRun(b *testing.B) {
	s := New(1)
	fn := func() {}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.After(time.Nanosecond, fn)
		s.Step()
	}
}
