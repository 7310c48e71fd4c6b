package bridge

import (
	"fmt"
	"time"
)

// retransmitEntry is one sent, unacknowledged TLP.
type retransmitEntry struct {
	meta
	sentAt   time.Duration
	txOrder  uint64 // transmission number of its latest copy
	txCount  uint16 // copies sent
	sacked   bool   // selectively acknowledged
	needRetx bool   // marked for retransmission
}

// retransmitQueue keeps every sent, unacknowledged TLP by sequence number,
// from una (the oldest unacknowledged) to nxt (the next to assign), in a
// ring of Window entries, and decides what to send again. Every
// transmission, first or not, gets the next transmission number (txOrder),
// which is what loss detection compares.
type retransmitQueue struct {
	entries  []retransmitEntry
	mask     uint32 // Window-1
	una, nxt uint32
	limit    uint32 // most TLPs in flight: the smaller of both windows
	txOrder  uint64 // transmissions so far this session
	maxAcked uint64 // highest txOrder known to have arrived
	marked   int    // entries with needRetx
}

// ackResult is what an acknowledgement did to the queue.
type ackResult struct {
	sample   time.Duration // RTT of a TLP sent once; -1 none
	progress bool          // una moved
	newMax   bool          // maxAcked moved: later transmissions arrived
}

func newRetransmitQueue(window int) retransmitQueue {
	return retransmitQueue{entries: make([]retransmitEntry, window), mask: uint32(window - 1)}
}

// restart begins a session at initial sequence number isn; the queue must
// be empty (see clear).
func (q *retransmitQueue) restart(isn uint32) {
	q.una, q.nxt = isn, isn
	q.marked = 0
	q.txOrder, q.maxAcked = 0, 0
}

func (q *retransmitQueue) at(seq uint32) *retransmitEntry { return &q.entries[seq&q.mask] }

func (q *retransmitQueue) inFlight() int { return int(q.nxt - q.una) }

func (q *retransmitQueue) empty() bool { return q.una == q.nxt }

// canSend reports whether the window has room for another TLP.
func (q *retransmitQueue) canSend() bool { return q.nxt-q.una < q.limit }

// push records the first transmission of m at now under sequence number
// nxt.
func (q *retransmitQueue) push(m *meta, now time.Duration) {
	q.txOrder++
	*q.at(q.nxt) = retransmitEntry{meta: *m, sentAt: now, txOrder: q.txOrder, txCount: 1}
	q.nxt++
}

// firstMarked returns the oldest sequence number marked for retransmission;
// nxt if none.
func (q *retransmitQueue) firstMarked() uint32 {
	s := q.una
	for ; s != q.nxt && !q.at(s).needRetx; s++ {
	}
	return s
}

// resend records that e, marked, went out again at now.
func (q *retransmitQueue) resend(e *retransmitEntry, now time.Duration) {
	e.needRetx = false
	q.marked--
	q.txOrder++
	e.txOrder, e.sentAt = q.txOrder, now
	e.txCount++
}

func (q *retransmitQueue) mark(e *retransmitEntry) {
	if !e.needRetx {
		e.needRetx = true
		q.marked++
	}
}

func (q *retransmitQueue) unmark(e *retransmitEntry) {
	if e.needRetx {
		e.needRetx = false
		q.marked--
	}
}

// acknowledge applies a cumulative ack (every TLP before ack arrived) and
// the SACK bitmap (bit i: TLP ack+1+i arrived), returning acknowledged
// slots to slots. The RTT sample comes from the last TLP acknowledged that
// was sent once (Karn). An acknowledgement raises maxAcked only if it can
// be for the entry's latest copy: one arriving sooner than minRTT after a
// retransmission answers an earlier copy, and taking the retransmission's
// order for it would declare everything sent in between lost.
func (q *retransmitQueue) acknowledge(now time.Duration, ack, sack uint32, minRTT time.Duration, slots *pool) ackResult {
	r := ackResult{sample: -1}
	prevMax := q.maxAcked
	for ; seqLT(q.una, ack); q.una++ {
		e := q.at(q.una)
		if e.txCount == 1 && !e.sacked {
			r.sample = now - e.sentAt
		}
		q.noteArrived(now, e, minRTT)
		q.unmark(e)
		slots.put(e.slot)
		*e = retransmitEntry{}
		r.progress = true
	}
	for i := 0; sack != 0 && i < 32; i++ {
		if sack&(1<<i) == 0 {
			continue
		}
		s := ack + 1 + uint32(i)
		if !seqLT(s, q.nxt) {
			break
		}
		if seqLT(s, q.una) {
			continue // a stale ack: that TLP is acknowledged and its entry reused
		}
		e := q.at(s)
		if e.sacked {
			continue
		}
		e.sacked = true
		if e.txCount == 1 {
			r.sample = now - e.sentAt
		}
		q.noteArrived(now, e, minRTT)
		q.unmark(e)
	}
	r.newMax = q.maxAcked > prevMax
	return r
}

func (q *retransmitQueue) noteArrived(now time.Duration, e *retransmitEntry, minRTT time.Duration) {
	if e.txCount == 1 || now-e.sentAt >= minRTT {
		q.maxAcked = max(q.maxAcked, e.txOrder)
	}
}

// markNakFrame answers a NAK for the hole at ack (the oldest unacknowledged
// TLP): it marks the TLPs sent together with it, unless that frame went out
// again less than minAge ago or the hole moved on.
func (q *retransmitQueue) markNakFrame(now time.Duration, ack uint32, minAge time.Duration) {
	if q.una != ack || ack == q.nxt {
		return
	}
	first := q.at(ack)
	if first.sacked || first.needRetx || now-first.sentAt < minAge {
		return
	}
	sentAt := first.sentAt
	for s := ack; s != q.nxt; s++ {
		e := q.at(s)
		if e.sacked || e.sentAt != sentAt {
			break
		}
		q.mark(e)
	}
}

// markOvertaken marks, RACK-style, every TLP that at least three later
// transmissions overtook, as far as the SACK bitmap of an ack can tell:
// the receiver may hold TLPs beyond it without saying so.
func (q *retransmitQueue) markOvertaken(ack uint32) {
	end := ack + 33
	for s := q.una; s != q.nxt && seqLT(s, end); s++ {
		e := q.at(s)
		if e.sacked || e.needRetx {
			continue
		}
		if e.txOrder+3 <= q.maxAcked {
			q.mark(e)
		} else if e.txCount == 1 {
			// First transmissions go out in sequence order, and a
			// retransmission is newer than every first transmission
			// before it: nothing further on can qualify.
			break
		}
	}
}

// markSentBefore marks every TLP whose latest copy went out before
// transmission number txOrder and that is neither acknowledged nor
// selectively acknowledged, as far as the SACK bitmap of ack can tell: the
// answer to an RTO probe sent after txOrder transmissions.
func (q *retransmitQueue) markSentBefore(ack uint32, txOrder uint64) {
	end := ack + 33
	for s := q.una; s != q.nxt && seqLT(s, end); s++ {
		e := q.at(s)
		if !e.sacked && e.txOrder <= txOrder {
			q.mark(e)
		}
	}
}

// clear empties the queue, handing each TLP in flight to drop in sequence
// order.
func (q *retransmitQueue) clear(drop func(*meta)) {
	for s := q.una; s != q.nxt; s++ {
		e := q.at(s)
		drop(&e.meta)
		*e = retransmitEntry{}
	}
	q.una = q.nxt
	q.marked = 0
}

// check verifies the window and the count of marked entries.
func (q *retransmitQueue) check() error {
	inflight := q.inFlight()
	if inflight < 0 || inflight > len(q.entries) {
		return fmt.Errorf("bridge: %d TLPs in flight, window %d", inflight, len(q.entries))
	}
	marked := 0
	for s := q.una; s != q.nxt; s++ {
		if q.at(s).needRetx {
			marked++
		}
	}
	if marked != q.marked {
		return fmt.Errorf("bridge: %d TLPs marked for retransmission, count says %d", marked, q.marked)
	}
	return nil
}
