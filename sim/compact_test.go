package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// A model that arms a long timeout per request and stops it when the answer
// comes (a completion timeout) keeps the queue at its live size: the
// stopped timeouts are dropped long before they are due.
func TestStoppedTimeoutsDoNotPileUp(t *testing.T) {
	t.Parallel()
	s := New(1)
	const requests = 100_000
	answered, fired := 0, 0
	var request func(i int)
	request = func(i int) {
		timeout := s.After(time.Second, func() { fired++ })
		s.After(time.Microsecond, func() {
			timeout.Stop()
			answered++
			if i+1 < requests {
				request(i + 1)
			}
		})
	}
	request(0)
	most := 0
	for s.Step() {
		most = max(most, len(s.events))
	}
	if answered != requests || fired != 0 {
		t.Fatalf("%d answered, %d timeouts fired; want %d and 0", answered, fired, requests)
	}
	// Two live events at any time; a few thousand stopped ones may wait
	// for the next compaction.
	if most > 4096 {
		t.Fatalf("the queue held up to %d events for 2 live ones", most)
	}
	if s.Pending() != 0 || s.Now() != requests*time.Microsecond {
		t.Fatalf("after the run: %d pending at %v, want 0 at %v", s.Pending(), s.Now(), requests*time.Microsecond)
	}
}

// With most events stopped, so that the queue is compacted again and again
// while it runs, the live ones still run in (time, scheduling order), and
// handles kept from before a compaction cancel nothing they no longer own.
func TestCompactionKeepsOrder(t *testing.T) {
	t.Parallel()
	s := New(1)
	rng := rand.New(rand.NewPCG(3, 5))
	var want, got []schedKey
	var stopped []Timer
	seq := 0
	var add func(depth int)
	add = func(depth int) {
		at := s.Now() + time.Duration(rng.IntN(50))
		k := schedKey{at, seq}
		seq++
		tm := s.At(at, func() {
			got = append(got, k)
			if depth < 3 && rng.IntN(2) == 0 {
				add(depth + 1)
			}
			// Old handles, some of whose events were recycled by a
			// compaction since: stopping them again must do nothing.
			if len(stopped) > 0 && stopped[rng.IntN(len(stopped))].Stop() {
				t.Errorf("a handle stopped twice reported a pending event")
			}
		})
		if rng.IntN(5) != 0 {
			tm.Stop()
			stopped = append(stopped, tm)
			return
		}
		want = append(want, k)
	}
	for range 20_000 {
		add(0)
	}
	if s.Pending() != len(want) {
		t.Fatalf("Pending %d, want the %d live events", s.Pending(), len(want))
	}
	s.Run(-1)
	sortBySchedule(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d events ran, want %d, or in another order", len(got), len(want))
	}
}

// TestCompactionWithStoppedHead: the compaction runs while the head of the
// queue (the earliest event) is a stopped one. The head leaves with the
// other stopped events, and the first live event in the heap's array (here
// one at 100, scheduled right after the head, ahead of one at 50) is not
// the earliest: the rebuilt heap must sift its root too, or the event at
// 100 would run first. The stopped head never runs and Pending counts only
// live events.
func TestCompactionWithStoppedHead(t *testing.T) {
	t.Parallel()
	s := New(1)
	var want, got []schedKey
	seq := 0
	add := func(at time.Duration, live bool) Timer {
		k := schedKey{at, seq}
		seq++
		tm := s.At(at, func() { got = append(got, k) })
		if live {
			want = append(want, k)
		}
		return tm
	}
	head := add(1, false)
	add(100, true) // array slot 1: the first live event once the head leaves
	add(50, true)  // slot 2: the earliest live event
	var stop []Timer
	for i := range 2 * compactAbove {
		stop = append(stop, add(time.Duration(1000+i), false))
		if i%8 == 0 {
			add(time.Duration(200+i), true)
		}
	}
	if !head.Stop() {
		t.Fatal("the head was not pending")
	}
	for _, tm := range stop {
		tm.Stop()
	}
	// The next At compacts: the stopped events are over 1024 and over half.
	add(60, true)
	if len(s.events) != len(want) || s.cancelled != 0 {
		t.Fatalf("after the compaction the heap holds %d events, %d stopped; want the %d live ones and none stopped", len(s.events), s.cancelled, len(want))
	}
	if s.Pending() != len(want) {
		t.Fatalf("Pending %d, want %d", s.Pending(), len(want))
	}
	if at, ok := s.Next(); !ok || at != 50 {
		t.Fatalf("Next %v %v, want 50", at, ok)
	}
	s.Run(-1)
	sortBySchedule(want)
	if !slices.Equal(got, want) {
		n := min(len(got), 3)
		t.Fatalf("%d events ran (first %v), want %d in order (first %v)", len(got), got[:n], len(want), want[:3])
	}
	if s.Pending() != 0 {
		t.Fatalf("Pending %d after the run", s.Pending())
	}
}

// BenchmarkRequestWithTimeout is one request of a model that arms a 1 s
// timeout per request and stops it when the answer comes 1 us later, with
// 64 requests in flight: the queue's cost once stopped timeouts are many.
func BenchmarkRequestWithTimeout(b *testing.B) {
	s := New(1)
	slots := make([]*inFlight, 64)
	for i := range slots {
		r := &inFlight{s: s}
		r.onTimeout = func() { b.Fatal("a timeout fired") }
		r.onAnswer = func() { r.timeout.Stop(); r.request() }
		r.request()
		slots[i] = r
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s.Step()
	}
}

// inFlight is one request slot of BenchmarkRequestWithTimeout; its
// callbacks are made once, so the benchmark measures the queue alone.
type inFlight struct {
	s                   *Sim
	timeout             Timer
	onTimeout, onAnswer func()
}

func (r *inFlight) request() {
	r.timeout = r.s.After(time.Second, r.onTimeout)
	r.s.After(time.Microsecond, r.onAnswer)
}
