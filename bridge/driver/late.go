package driver

import "time"

// LateAfter is how far past its deadline the runner's timer must fire to
// count as late: far beyond a timer's and a lock's usual delay (tens of
// microseconds), and a fraction of any keepalive a pair would use.
const LateAfter = 10 * time.Millisecond

// Lateness says how often, and by how much at most, the runner's timer
// fired LateAfter or more past its deadline. A late timer means frames
// due then (KEEPALIVEs, acknowledgements, retransmissions) left late:
// the peer saw the silence, but its cause was this process not running.
type Lateness struct {
	Count uint64
	Max   time.Duration
}

// Lateness returns the runner's timer lateness so far.
func (r *Runner) Lateness() Lateness {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.late
}

// noteLate records a timer that fired late past its deadline. Called
// with mu held.
func (r *Runner) noteLate(late time.Duration) {
	if late < LateAfter {
		return
	}
	r.late.Count++
	r.late.Max = max(r.late.Max, late)
	if r.OnLate != nil {
		r.OnLate(late)
	}
}
