package driver

import (
	"context"
	"sync"

	"github.com/dxpu/dxpu/tlp"
)

// TLPQueue carries the TLPs a runner delivers to a worker goroutine that
// serves them in arrival order. A runner's OnTLP runs with the runner's
// lock held and must not send into it, so a device that answers (a
// completer, a VMM front) queues there and answers from the worker. The
// buffers are recycled: once warm, no allocation per TLP.
type TLPQueue struct {
	mu    sync.Mutex
	q     [][]byte // waiting, oldest first
	spare [][]byte // the other queue, swapped with q by Serve
	free  [][]byte // buffers to reuse
	wake  chan struct{}
}

// NewTLPQueue returns an empty queue.
func NewTLPQueue() *TLPQueue { return &TLPQueue{wake: make(chan struct{}, 1)} }

// Push copies v onto the queue; it never blocks (use it as OnTLP).
func (q *TLPQueue) Push(v tlp.View) {
	q.mu.Lock()
	var b []byte
	if k := len(q.free); k > 0 {
		b, q.free = q.free[k-1][:0], q.free[:k-1]
	}
	q.q = append(q.q, append(b, v...))
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Serve calls serve for each queued TLP in arrival order, from this
// goroutine, until ctx ends (it returns nil) or serve returns an error (it
// returns that, dropping what was still queued). The slice is valid only
// during the call.
func (q *TLPQueue) Serve(ctx context.Context, serve func(t []byte) error) error {
	for ctx.Err() == nil {
		q.mu.Lock()
		batch := q.q
		q.q, q.spare = q.spare[:0], nil
		q.mu.Unlock()
		var err error
		for _, b := range batch {
			if err = serve(b); err != nil {
				break
			}
		}
		q.mu.Lock()
		q.free = append(q.free, batch...)
		clear(batch)
		q.spare = batch[:0]
		q.mu.Unlock()
		if err != nil {
			return err
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-q.wake:
		}
	}
	return nil
}
