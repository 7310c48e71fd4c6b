package driver

import "errors"

// ErrNotDelivering is returned by Reply called outside the runner's
// callbacks.
var ErrNotDelivering = errors.New("driver: Reply outside OnTLP, OnPolledTLP or OnDelivered")

// Reply hands TLPs to the bridge from inside OnTLP, OnPolledTLP or
// OnDelivered, where the runner is locked and SendMany would deadlock: a
// PCIe side that answers requests as they arrive (a memory device's
// completions) sends its answers in the flush that delivered the requests,
// without waking a goroutine of its own, which costs a round trip a
// scheduler's wake-up. It returns how many it took; on an error (ErrBusy:
// the bridge's queue or window is full) the rest were not taken, and the
// caller's own goroutine sends them (SendManyWait). It never blocks.
// Called from any other goroutine it is a data race; outside a callback on
// the runner's it returns ErrNotDelivering.
func (r *Runner) Reply(tlps [][]byte) (int, error) {
	if !r.delivering {
		return 0, ErrNotDelivering
	}
	now := r.Now()
	for i, t := range tlps {
		if err := r.b.HandleTLP(now, t); err != nil {
			return i, err
		}
	}
	return len(tlps), nil
}
