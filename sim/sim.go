// Package sim is dxpu's discrete-event, virtual-time simulator: bridges,
// links, switches and PCIe models schedule callbacks at virtual instants and
// the simulator runs them in time order. Runs are deterministic: events at the
// same instant run in the order they were scheduled, and all randomness comes
// from the simulator's seeded source, so any failing run replays exactly from
// its seed.
package sim

import (
	"math/rand/v2"
	"time"
)

// Sim is a virtual clock and event queue. It is not safe for concurrent use:
// everything in a simulation runs on the goroutine that calls Run.
type Sim struct {
	now    time.Duration
	seq    uint64
	events eventHeap
	// cancelled counts the stopped events still in events. A model that
	// arms a timeout per request and stops it on the answer (a completion
	// timeout) would otherwise grow the heap by every request of the
	// timeout's span, and each step would sift through all of them.
	cancelled int
	free      []*event // recycled events: scheduling allocates nothing in steady state
	rng       *rand.Rand
	seed      uint64
	steps     uint64
}

// New returns a simulator at virtual time 0 whose random source is seeded
// with seed.
func New(seed uint64) *Sim {
	return &Sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed}
}

// Seed returns the seed the simulator was created with.
func (s *Sim) Seed() uint64 { return s.seed }

// Now returns the current virtual time since the start of the simulation.
func (s *Sim) Now() time.Duration { return s.now }

// Rand returns the simulation's deterministic random source.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Steps returns how many events have run.
func (s *Sim) Steps() uint64 { return s.steps }

// Timer is a handle to a scheduled event. Events are recycled, so the handle
// also holds the event's generation: a stale handle never cancels a newer
// event that reuses the same slot.
type Timer struct {
	ev  *event
	gen uint64
}

// Stop cancels the event; it reports whether it was still pending.
func (t Timer) Stop() bool {
	if t.ev == nil || t.ev.gen != t.gen || t.ev.fn == nil {
		return false
	}
	t.ev.fn = nil
	t.ev.s.cancelled++ // a pending event is always in its heap
	return true
}

// At schedules fn at virtual time t (or now, if t is in the past).
func (s *Sim) At(t time.Duration, fn func()) Timer {
	if t < s.now {
		t = s.now
	}
	var ev *event
	if n := len(s.free); n > 0 {
		ev = s.free[n-1]
		s.free = s.free[:n-1]
	} else {
		ev = new(event)
	}
	ev.gen++
	ev.at, ev.seq, ev.fn, ev.s = t, s.seq, fn, s
	s.seq++
	if s.cancelled > compactAbove && s.cancelled > len(s.events)/2 {
		s.compact()
	}
	s.events.push(ev)
	return Timer{ev, ev.gen}
}

// After schedules fn d after now.
func (s *Sim) After(d time.Duration, fn func()) Timer { return s.At(s.now+d, fn) }

// Pending reports the number of scheduled events that were not cancelled.
func (s *Sim) Pending() int { return len(s.events) - s.cancelled }

// compactAbove is how many cancelled events the heap may hold before At
// considers dropping them; it drops them once they are more than half.
const compactAbove = 1024

// compact drops the cancelled events from the heap and rebuilds it. The
// order in which live events run is unchanged: it is (at, seq), unique
// per event, whatever the heap's shape.
func (s *Sim) compact() {
	live := s.events[:0]
	for _, ev := range s.events {
		if ev.fn != nil {
			live = append(live, ev)
		} else {
			s.free = append(s.free, ev)
		}
	}
	clear(s.events[len(live):])
	s.events = live
	s.cancelled = 0
	s.events.heapify()
}

// dropHead recycles the cancelled event at the head of the queue.
func (s *Sim) dropHead() {
	head := s.events.pop()
	s.cancelled--
	s.free = append(s.free, head)
}

// Next returns the time of the earliest live event, and false when none
// is scheduled. It drops cancelled events from the head of the queue
// (they would be skipped anyway) and runs nothing.
func (s *Sim) Next() (time.Duration, bool) {
	for len(s.events) > 0 {
		head := s.events[0]
		if head.fn != nil {
			return head.at, true
		}
		s.dropHead()
	}
	return 0, false
}

// Step runs the next event and reports whether there was one.
func (s *Sim) Step() bool {
	for len(s.events) > 0 {
		ev := s.events.pop()
		fn := ev.fn
		ev.fn = nil
		s.free = append(s.free, ev)
		if fn == nil {
			s.cancelled--
			continue
		}
		s.now = ev.at
		s.steps++
		fn()
		return true
	}
	return false
}

// Run runs events until none are left or the next one is after until; the
// clock then stands at until (or at the last event, if the queue drained
// earlier and until is negative). It returns the number of events run.
func (s *Sim) Run(until time.Duration) uint64 {
	start := s.steps
	for len(s.events) > 0 {
		if s.events[0].fn == nil {
			// Drop cancelled events here, so a cancelled head never lets
			// Step run a live event that lies beyond until.
			s.dropHead()
			continue
		}
		if until >= 0 && s.events[0].at > until {
			break
		}
		s.Step()
	}
	if until >= 0 && until > s.now {
		s.now = until
	}
	return s.steps - start
}

// RunWhile runs events while cond holds and events remain, with maxSteps as a
// guard against livelock (0: no guard). It reports whether cond became false.
func (s *Sim) RunWhile(cond func() bool, maxSteps uint64) bool {
	start := s.steps
	for cond() {
		if maxSteps > 0 && s.steps-start >= maxSteps {
			return false
		}
		if !s.Step() {
			return !cond()
		}
	}
	return true
}

type event struct {
	at  time.Duration
	seq uint64
	gen uint64
	fn  func()
	s   *Sim // whose heap holds it, for Stop's count
}

// eventHeap is a binary min-heap of events by (at, seq). It is written out
// rather than run through container/heap, whose interface calls cost a
// fifth of a busy real-time simulation; seq is unique, so the order in
// which events leave is the same either way.
type eventHeap []*event

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

func (h *eventHeap) push(ev *event) {
	*h = append(*h, ev)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !ev.before(q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = ev
}

func (h *eventHeap) pop() *event {
	q := *h
	n := len(q) - 1
	top, last := q[0], q[n]
	q[n] = nil
	q = q[:n]
	*h = q
	if n > 0 {
		q.siftDown(0, last)
	}
	return top
}

// heapify restores the heap order of the whole slice (Floyd's method).
func (h eventHeap) heapify() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.siftDown(i, h[i])
	}
}

// siftDown puts ev at position i, or below it, moving smaller children up.
func (h eventHeap) siftDown(i int, ev *event) {
	q, n := h, len(h)
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && q[r].before(q[c]) {
			c = r
		}
		if !q[c].before(ev) {
			break
		}
		q[i] = q[c]
		i = c
	}
	q[i] = ev
}
