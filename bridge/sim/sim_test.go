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
