package bridge

import "fmt"

// CheckInvariants verifies the bridge's internal bookkeeping: every buffer
// slot accounted for exactly once, the window and retransmission counts
// consistent, tag and credit counts in range. Tests and fuzzers call it
// after every step; it returns the first inconsistency found.
func (b *Bridge) CheckInvariants() error {
	if err := b.retx.check(); err != nil {
		return err
	}
	queued, inflight := b.queuedToSend(), b.retx.inFlight()
	if got, want := len(b.txPool.free)+queued+inflight, b.txPool.capacity(); got != want {
		return fmt.Errorf("bridge: transmit slots: %d free + %d queued + %d in flight != %d", len(b.txPool.free), queued, inflight, want)
	}
	bytes := 0
	for c := range b.pending {
		for i := range b.pending[c].len() {
			bytes += 2 + int(b.pending[c].at(i).n)
		}
	}
	if bytes != b.pendingBytes {
		return fmt.Errorf("bridge: queued TLPs take %d bytes of frames, count says %d", bytes, b.pendingBytes)
	}
	held, delivering := b.reorder.count(), b.queuedToDeliver()
	if held != b.reorder.held {
		return fmt.Errorf("bridge: %d TLPs in the reorder window, count says %d", held, b.reorder.held)
	}
	if got, want := len(b.rxPool.free)+held+delivering, b.rxPool.capacity(); got != want {
		return fmt.Errorf("bridge: receive slots: %d free + %d reordering + %d queued != %d", len(b.rxPool.free), held, delivering, want)
	}
	if err := b.txTags.check(); err != nil {
		return err
	}
	if b.idle {
		// Nothing changed since pickNext found nothing: it finds nothing
		// again, and does nothing.
		if c, idx := b.pickNext(); c >= 0 {
			return fmt.Errorf("bridge: marked idle while TLP %d of class %d can be sent", idx, c)
		}
	}
	return b.buffers.check()
}
