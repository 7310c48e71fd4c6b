package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestManyEventsRunInTimeThenScheduleOrder schedules thousands of events
// at few distinct instants (many ties), some from inside running events,
// cancels a share, and checks that the live ones ran exactly in (time,
// scheduling order) order.
func TestManyEventsRunInTimeThenScheduleOrder(t *testing.T) {
	t.Parallel()
	s := New(1)
	rng := rand.New(rand.NewPCG(7, 9))
	var want, got []schedKey
	seq := 0
	var add func(depth int)
	add = func(depth int) {
		at := s.Now() + time.Duration(rng.IntN(20))
		k := schedKey{at, seq}
		seq++
		tm := s.At(at, func() {
			got = append(got, k)
			if depth < 2 && rng.IntN(3) == 0 {
				add(depth + 1)
			}
		})
		if rng.IntN(5) == 0 {
			tm.Stop()
			return
		}
		want = append(want, k)
	}
	for range 5000 {
		add(0)
	}
	s.Run(-1)
	// Events added while running come after every earlier-scheduled one
	// at the same instant; sorting by (at, seq) is the order to expect.
	sortBySchedule(want)
	if len(got) != len(want) {
		t.Fatalf("%d events ran, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d: ran %+v, want %+v", i, got[i], want[i])
		}
	}
}

// schedKey names an event of the order tests: when it was due and the
// order it was scheduled in.
type schedKey struct {
	at  time.Duration
	seq int
}

// sortBySchedule sorts keys into the order the simulator must run them:
// by time, then by scheduling order.
func sortBySchedule(keys []schedKey) {
	slices.SortFunc(keys, func(a, b schedKey) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.seq - b.seq
	})
}

// BenchmarkScheduleAndRunBusy is one event scheduled and one run with 512
// others pending, as in a real-time world moving a copy.
func BenchmarkScheduleAndRunBusy(b *testing.B) {
	s := New(1)
	fn := func() {}
	for i := range 512 {
		s.After(time.Duration(i), fn)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.After(512, fn)
		s.Step()
	}
}
