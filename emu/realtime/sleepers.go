package realtime

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// sleepers are the clocks asleep because every processor was taken by a
// spinning clock while they had nothing of their own to poll (see
// Clock.run). Such a clock sleeps on its wake channel and a Go timer, and
// a timer of under a millisecond fires about a millisecond late once its
// processor has gone idle in the network poller: an engine pacing itself
// in microseconds would run a thousand times slower. The spinning loops
// look at the earliest wake-up once a turn (one atomic load while nobody
// sleeps) and wake a sleeper when it is due.
var sleeping = newSleepers()

// epoch is the origin of the sleepers' wake-up times.
var epoch = time.Now()

const noSleeper = math.MaxInt64

type sleepers struct {
	next atomic.Int64 // the earliest wake-up, ns since epoch, or noSleeper
	mu   sync.Mutex
	list []sleeper
}

type sleeper struct {
	c  *Clock
	at int64
}

func newSleepers() *sleepers {
	s := &sleepers{}
	s.next.Store(noSleeper)
	return s
}

// add has the spinning loops wake c d from now.
func (s *sleepers) add(c *Clock, d time.Duration) {
	at := int64(time.Since(epoch) + d)
	s.mu.Lock()
	s.list = append(s.list, sleeper{c, at})
	if at < s.next.Load() {
		s.next.Store(at)
	}
	s.mu.Unlock()
}

// remove forgets c, awake again.
func (s *sleepers) remove(c *Clock) {
	s.mu.Lock()
	for i := range s.list {
		if s.list[i].c == c {
			s.list[i] = s.list[len(s.list)-1]
			s.list = s.list[:len(s.list)-1]
			break
		}
	}
	s.reset()
	s.mu.Unlock()
}

// wakeDue wakes the sleepers that are due. Called by spinning loops once a
// turn.
func (s *sleepers) wakeDue() {
	next := s.next.Load()
	if next == noSleeper {
		return
	}
	now := int64(time.Since(epoch))
	if now < next {
		return
	}
	s.mu.Lock()
	for i := 0; i < len(s.list); {
		if sl := s.list[i]; sl.at <= now {
			sl.c.spinWoken.Add(1)
			sl.c.signal()
			s.list[i] = s.list[len(s.list)-1]
			s.list = s.list[:len(s.list)-1]
			continue
		}
		i++
	}
	s.reset()
	s.mu.Unlock()
}

// reset recomputes next. Called with mu held.
func (s *sleepers) reset() {
	next := int64(noSleeper)
	for _, sl := range s.list {
		next = min(next, sl.at)
	}
	s.next.Store(next)
}
