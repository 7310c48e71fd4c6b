package driver

import (
	"time"

	"github.com/dxpu/dxpu/bridge"
)

// After a stall. A bridge judges its deadlines (completion timeouts, the
// peer's silence, retransmissions) when the runner hands it the time. If
// this process did not run for a while (a loaded host: 50 ms and more
// seen), the first thing to run after it, the timer, a receive or a send,
// handed the bridge the late time first: reads whose completions had
// arrived meanwhile were answered with a Completer Abort, the completions
// dropped as late, because they still waited in the socket, unread. A
// NIC's bridge takes frames as they arrive whatever its processor does.
//
// So: when the bridge's deadline passed LateAfter or more ago without
// being served, the process stalled, and the runner first feeds the
// bridge what waits in the socket, as of just before that deadline (when
// within the stall each frame came is unknown; PCIe completion timeouts
// are ranges, and a completion taken late is within one), then serves the
// deadline at the real time. Only a runner over a Poller can look into
// its socket without blocking.

// maxCatchUp bounds the batches one catch-up takes: a peer that keeps the
// socket full must not hold the runner in it.
const maxCatchUp = 1024

// stalledAt returns the time to feed waiting frames at: just before the
// bridge's deadline when it passed LateAfter or more before now unserved,
// else now. Called with mu held.
func (r *Runner) stalledAt(now time.Duration) time.Duration {
	if r.poller == nil || r.timer == nil {
		return now
	}
	d := r.b.Deadline()
	if d == bridge.NoDeadline || now-d < LateAfter {
		return now
	}
	return d - 1
}

// catchUp feeds what waits in the socket before a caller hands the bridge
// now, if the process stalled past the bridge's deadline. It reports
// false when another goroutine holds the socket (a receive under way: it
// catches up itself). Called with mu held, rxMu not held by the caller.
func (r *Runner) catchUp(now time.Duration) bool {
	at := r.stalledAt(now)
	if at >= now {
		return true
	}
	// mu before rxMu is the reverse of a receive's order: only try.
	if !r.rxMu.TryLock() {
		return false
	}
	defer r.rxMu.Unlock()
	bufs, sizes := r.rxBuffers()
	r.drainAt(at, bufs, sizes)
	return true
}

// drainAt feeds the bridge, at at, what the socket holds, up to
// maxCatchUp batches, through bufs. Called with mu and rxMu held.
func (r *Runner) drainAt(at time.Duration, bufs [][]byte, sizes []int) bool {
	progress := false
	for range maxCatchUp {
		k, segs, err := r.tryRecv(bufs, sizes)
		if err != nil || k == 0 {
			break
		}
		r.caughtUp += uint64(k)
		if r.feed(at, nil, bufs[:k], sizes[:k], segs) {
			progress = true
		}
		if k < len(bufs) {
			break // a part-filled batch took everything queued
		}
	}
	return progress
}

// CaughtUp returns how many frames (messages, with GRO) the runner took
// from its socket after a stall, ahead of the deadline it stalled past.
func (r *Runner) CaughtUp() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.caughtUp
}
