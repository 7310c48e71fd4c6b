package bridge

// probeAnswers holds the probe numbers of KEEPALIVEs received and not yet
// answered (CTL-3: each one is answered with its own number). A single
// pending number lost the first of two KEEPALIVEs that arrived in one
// batch: the peer's probe went unanswered while its routine KEEPALIVE
// (probe 0) was. Bounded: a repeated number waits once, and past
// maxProbeAnswers the oldest is forgotten, so a flood of KEEPALIVEs gets
// no more answers than it sent.
type probeAnswers struct {
	p    [maxProbeAnswers]uint8
	head int
	n    int
}

const maxProbeAnswers = 8

// add queues probe, unless it is queued already.
func (q *probeAnswers) add(probe uint8) {
	for i := range q.n {
		if q.p[(q.head+i)%maxProbeAnswers] == probe {
			return
		}
	}
	if q.n == maxProbeAnswers {
		q.head = (q.head + 1) % maxProbeAnswers
		q.n--
	}
	q.p[(q.head+q.n)%maxProbeAnswers] = probe
	q.n++
}

// next takes the oldest probe number to answer.
func (q *probeAnswers) next() (uint8, bool) {
	if q.n == 0 {
		return 0, false
	}
	p := q.p[q.head]
	q.head = (q.head + 1) % maxProbeAnswers
	q.n--
	return p, true
}

// reset forgets every pending answer (a new session).
func (q *probeAnswers) reset() { q.head, q.n = 0, 0 }
