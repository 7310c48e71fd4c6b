package bridge

// probesOut holds the RTO probes sent and not yet answered, each with the
// transmissions before it, newest last. Any of their answers says which
// TLPs sent before that probe are missing: when the round trip exceeds
// the retransmission timeout, a newer probe goes out before the answer to
// the last one comes back, and answers matched against the newest probe
// only never matched at all, so a lost tail was never resent. Bounded:
// past maxProbesOut the oldest is forgotten.
type probesOut struct {
	p [maxProbesOut]sentProbe
	n int
}

type sentProbe struct {
	seq     uint8
	txOrder uint64
}

const maxProbesOut = 8

// add records probe seq, sent after txOrder transmissions.
func (q *probesOut) add(seq uint8, txOrder uint64) {
	if q.n == maxProbesOut {
		copy(q.p[:], q.p[1:])
		q.n--
	}
	q.p[q.n] = sentProbe{seq, txOrder}
	q.n++
}

// answer takes the answer to probe seq: it returns the transmissions
// before that probe and forgets it and every older probe (the answer
// covers what theirs would say). ok is false for a probe not out.
func (q *probesOut) answer(seq uint8) (txOrder uint64, ok bool) {
	for i := q.n - 1; i >= 0; i-- {
		if q.p[i].seq == seq {
			txOrder = q.p[i].txOrder
			q.n = copy(q.p[:], q.p[i+1:q.n])
			return txOrder, true
		}
	}
	return 0, false
}

func (q *probesOut) reset() { q.n = 0 }
