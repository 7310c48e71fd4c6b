package manager

import (
	"context"
	"sync"
	"time"

	"github.com/dxpu/dxpu/fabric/pool"
)

// Event is one thing that happened to the pool, for operators and hosts
// that watch GET /v1/events. Events are a notification channel, not state:
// they live in memory (the last 4096), and a new leader starts a new
// sequence (starting at its wall clock in microseconds), so a watcher that
// sees a gap re-reads the state it cares about. The wire type lives in
// package pool, which the control client shares.
type Event = pool.Event

// Event types.
const (
	EventAllocated      = "allocated"
	EventReleased       = "released"
	EventGPUFailed      = "gpu_failed" // a lent GPU failed: surprise removal on its host
	EventGPUHealth      = "gpu_health" // a GPU's health changed otherwise: Healthy says to which
	EventBoxDrained     = "box_drained"
	EventBoxUndrained   = "box_undrained"
	EventBoxRegistered  = "box_registered"
	EventBoxRemoved     = "box_removed"
	EventHostRegistered = "host_registered"
	EventHostRemoved    = "host_removed"
	// A pair of the allocation has been down past Config.DegradedAfter
	// (reason says which and why); recovered: its link is up again.
	EventAllocationDegraded  = "allocation_degraded"
	EventAllocationRecovered = "allocation_recovered"
	// A box's agent has not answered past Config.UnreachableAfter (reason
	// says which and why); reachable: it answers again. Its GPUs stay.
	EventBoxUnreachable = "box_unreachable"
	EventBoxReachable   = "box_reachable"
)

const eventRing = 4096

type eventLog struct {
	mu      sync.Mutex
	next    uint64
	ring    []Event
	changed chan struct{}
}

func newEventLog() *eventLog {
	return &eventLog{next: uint64(time.Now().UnixMicro()), changed: make(chan struct{})}
}

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.Seq, e.Time = l.next, time.Now().UTC()
	l.next++
	if len(l.ring) == eventRing {
		copy(l.ring, l.ring[1:])
		l.ring = l.ring[:eventRing-1]
	}
	l.ring = append(l.ring, e)
	close(l.changed)
	l.changed = make(chan struct{})
}

// since returns the events after seq that match host (empty: all), the
// sequence to ask from next, and a channel closed at the next event.
func (l *eventLog) since(seq uint64, host string) ([]Event, uint64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if seq >= l.next {
		seq = 0 // a sequence from another leader's term: start over
	}
	out := []Event{}
	for _, e := range l.ring {
		if e.Seq > seq && (host == "" || e.Host == host) {
			out = append(out, e)
		}
	}
	return out, l.next - 1, l.changed
}

// wait returns events after seq, blocking until there is one or ctx ends.
func (l *eventLog) wait(ctx context.Context, seq uint64, host string) ([]Event, uint64) {
	for {
		evs, last, changed := l.since(seq, host)
		if len(evs) > 0 {
			return evs, last
		}
		seq = last
		select {
		case <-changed:
		case <-ctx.Done():
			return evs, last
		}
	}
}
