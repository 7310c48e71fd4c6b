package conform

import (
	"sync"
	"time"
)

// stallWatch measures the kit's own stalls: a ticker that wakes late means
// the kit's process could not run, and whatever the IUT did meanwhile was
// seen late. Time bounds the kit judges leave such stalls out, so a
// loaded machine running the kit does not fail an IUT that kept them.
type stallWatch struct {
	start time.Time
	done  chan struct{}
	mu    sync.Mutex
	spans []span // newest last, at most maxSpans
}

type span struct{ from, to time.Duration }

// madeUpStalls, when set (tests), stands in for the kit's measured
// stalls: a kit that stalls on cue.
var madeUpStalls func(from, to time.Duration) time.Duration

const (
	watchTick = time.Millisecond
	maxSpans  = 4096
)

func startStallWatch(start time.Time) *stallWatch {
	w := &stallWatch{start: start, done: make(chan struct{})}
	go w.run()
	return w
}

func (w *stallWatch) run() {
	t := time.NewTicker(watchTick)
	defer t.Stop()
	last := time.Since(w.start)
	for {
		select {
		case <-t.C:
			now := time.Since(w.start)
			if now-last > 2*watchTick {
				w.mu.Lock()
				if len(w.spans) == maxSpans {
					w.spans = append(w.spans[:0], w.spans[maxSpans/2:]...)
				}
				w.spans = append(w.spans, span{last + watchTick, now})
				w.mu.Unlock()
			}
			last = now
		case <-w.done:
			return
		}
	}
}

func (w *stallWatch) stop() { close(w.done) }

// stalled returns how much of [from, to) the kit spent stalled.
func (w *stallWatch) stalled(from, to time.Duration) time.Duration {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var sum time.Duration
	for i := len(w.spans) - 1; i >= 0; i-- {
		s := w.spans[i]
		if s.to <= from {
			break
		}
		sum += max(min(s.to, to)-max(s.from, from), 0)
	}
	return sum
}
