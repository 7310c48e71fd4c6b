package driver

import (
	"errors"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// QueuedSender hands TLPs from inside a simulation (an emulated GPU or
// host) to a Runner, keeping them in order in a queue while the bridge
// pushes back (ErrBusy) or is not up yet. The queue's length is the
// backlog that the emulated engines pace themselves by. Use it from the
// simulation's goroutine only.
//
// By default each TLP goes to the runner as it is sent, and a refused one
// is retried every 20 µs of the simulation's time. With Batch set, SendTLP
// only queues, and the owner calls Flush once the simulation has run what
// was due (package realtime's Clock does, after each step): the TLPs of a
// step go under one lock in as few frames as the MTU allows and one
// sendmmsg, instead of a frame and a system call each; Flush also retries
// what the bridge refused, when the runner reports progress. Over a runner
// with HoldSends, Flush only hands the TLPs to the bridge, and the owner's
// Runner.SendHeld frames them with the rest of its turn.
type QueuedSender struct {
	s *sim.Sim
	r *Runner
	// Batch defers sending to Flush.
	Batch bool
	q     tlpQueue
	armed bool
	batch [][]byte // views into q handed to SendMany
}

// NewQueuedSender returns a sender to r that retries on s.
func NewQueuedSender(s *sim.Sim, r *Runner) *QueuedSender { return &QueuedSender{s: s, r: r} }

// retryEvery is how often a refused queue is tried again without news
// from the runner.
const retryEvery = 20 * time.Microsecond

func refused(err error) bool {
	return errors.Is(err, bridge.ErrBusy) || errors.Is(err, bridge.ErrNotUp)
}

// SendTLP sends v now if nothing waits before it (and Batch is off), else
// queues a copy.
func (s *QueuedSender) SendTLP(v tlp.View) {
	if !s.Batch && s.q.len() == 0 {
		if err := s.r.Send(v); !refused(err) {
			return // sent, or malformed (counted by the bridge)
		}
	}
	s.q.push(v)
	if !s.Batch {
		s.retry()
	}
}

// Flush hands the queued TLPs to the runner, as many as the bridge takes,
// and reports whether some are still queued. A queue the bridge refused
// is tried again only once the runner signalled progress (acknowledgements
// or credits came in), so a caller may call Flush as often as it likes.
func (s *QueuedSender) Flush() (backlog bool) {
	if s.q.len() == 0 {
		return false
	}
	if s.q.refused && s.s.Now()-s.q.refusedAt < retryEvery {
		// Progress is one signal shared with every other waiter on the
		// runner: one may be missed, so the old retry period bounds the
		// wait.
		select {
		case <-s.r.Progress:
		default:
			return true
		}
	}
	s.send()
	return s.q.len() > 0
}

// send hands the queue to the runner in batches until it is empty or the
// bridge refuses.
func (s *QueuedSender) send() {
	for s.q.len() > 0 {
		s.batch = s.q.views(s.batch[:0], maxTxBatch)
		n, err := s.r.sendMany(s.batch, s.Batch)
		clear(s.batch)
		if n == 0 && err != nil && !refused(err) {
			n = 1 // malformed (counted by the bridge): drop it, go on
		}
		s.q.pop(n)
		if err != nil && refused(err) {
			s.q.refused, s.q.refusedAt = true, s.s.Now()
			return
		}
	}
	s.q.refused = false
}

func (s *QueuedSender) retry() {
	if s.armed {
		return
	}
	s.armed = true
	s.s.After(retryEvery, func() {
		s.armed = false
		s.send()
		if s.q.len() > 0 {
			s.retry()
		}
	})
}

// Backlog estimates the queueing in front of the bridge: 100 ns a TLP.
func (s *QueuedSender) Backlog() time.Duration {
	return time.Duration(s.q.len()) * 100 * time.Nanosecond
}

// tlpQueue is a FIFO of TLP copies in one reused byte buffer: queueing
// allocates nothing once the buffers have grown to the working set.
type tlpQueue struct {
	buf     []byte
	ends    []int // end offset of each queued TLP in buf
	head    int   // first queued TLP
	refused bool  // the bridge refused the head; wait for progress
	// refusedAt is when, in the simulation's time.
	refusedAt time.Duration
}

func (q *tlpQueue) len() int { return len(q.ends) - q.head }

func (q *tlpQueue) push(v tlp.View) {
	if q.head > 0 && q.head == len(q.ends) {
		q.buf, q.ends, q.head = q.buf[:0], q.ends[:0], 0
	}
	q.buf = append(q.buf, v...)
	q.ends = append(q.ends, len(q.buf))
}

func (q *tlpQueue) start(i int) int {
	if i == 0 {
		return 0
	}
	return q.ends[i-1]
}

// views appends up to max queued TLPs, from the head, to dst.
func (q *tlpQueue) views(dst [][]byte, max int) [][]byte {
	for i := q.head; i < len(q.ends) && len(dst) < max; i++ {
		a, b := q.start(i), q.ends[i]
		dst = append(dst, q.buf[a:b:b])
	}
	return dst
}

// pop drops the first n queued TLPs, compacting once half the buffer is
// dead.
func (q *tlpQueue) pop(n int) {
	q.head += n
	switch {
	case q.head == len(q.ends):
		q.buf, q.ends, q.head = q.buf[:0], q.ends[:0], 0
	case q.head >= 64 && 2*q.head >= len(q.ends):
		off := q.start(q.head)
		k := copy(q.buf, q.buf[off:])
		q.buf = q.buf[:k]
		m := copy(q.ends, q.ends[q.head:])
		q.ends = q.ends[:m]
		for i := range q.ends {
			q.ends[i] -= off
		}
		q.head = 0
	}
}
