package memlink

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/sim"
)

func run(t *testing.T, f Faults, n int, setup func(l *Link, s *sim.Sim)) ([]time.Duration, []byte, *Link) {
	t.Helper()
	s := sim.New(3)
	var at []time.Duration
	var got []byte
	l := New(SimClock(s), s.Rand(), f, func(b []byte) {
		at = append(at, s.Now())
		got = append(got, b[0])
	})
	if setup != nil {
		setup(l, s)
	}
	for i := 0; i < n; i++ {
		s.At(time.Duration(i)*time.Microsecond, func() { l.Send([]byte{byte(i), 0, 0, 0, 0, 0, 0, 0}) })
	}
	s.Run(-1)
	return at, got, l
}

func TestDelayAndBandwidth(t *testing.T) {
	t.Parallel()
	at, got, _ := run(t, Faults{Delay: 5 * time.Microsecond, Bandwidth: 64e6}, 3, nil)
	// 64-bit frames at 64 Mb/s take 1 us to serialize.
	want := []time.Duration{6 * time.Microsecond, 7 * time.Microsecond, 8 * time.Microsecond}
	for i := range want {
		if at[i] != want[i] || got[i] != byte(i) {
			t.Fatalf("frame %d at %v (%d), want %v", i, at[i], got[i], want[i])
		}
	}
}

func TestFaultsCounted(t *testing.T) {
	t.Parallel()
	_, got, l := run(t, Faults{Loss: 1}, 50, nil)
	if len(got) != 0 || l.Stats.Lost != 50 {
		t.Fatalf("loss 1: delivered %d, lost %d", len(got), l.Stats.Lost)
	}
	_, got, l = run(t, Faults{Duplicate: 1}, 50, nil)
	if len(got) != 100 || l.Stats.Duplicated != 50 {
		t.Fatalf("dup 1: delivered %d", len(got))
	}
	_, got, l = run(t, Faults{Corrupt: 1}, 50, nil)
	if len(got) != 0 || l.Stats.Corrupted != 50 {
		t.Fatalf("corrupt 1 without PassCorrupt: delivered %d", len(got))
	}
	_, got, _ = run(t, Faults{Reorder: 0.5, Delay: time.Microsecond}, 200, nil)
	inversions := 0
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			inversions++
		}
	}
	if len(got) != 200 || inversions == 0 {
		t.Fatalf("reorder: delivered %d with %d inversions", len(got), inversions)
	}
	_, got, l = run(t, Faults{Delay: 10 * time.Microsecond}, 20, func(l *Link, s *sim.Sim) {
		s.At(5*time.Microsecond, func() { l.SetDown(true) })
		s.At(12*time.Microsecond, func() { l.SetDown(false) })
	})
	// Sent at 0..19 us, arriving at 10..29: down from 5 to 12 us drops the
	// frames sent in [5, 12) (7) and those arriving in [10, 12) (2).
	if len(got) != 11 || l.Stats.DownDrops != 9 {
		t.Fatalf("down/up: delivered %v, down drops %d", got, l.Stats.DownDrops)
	}
}
