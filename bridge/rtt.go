package bridge

import "time"

// rttEstimator keeps the smoothed RTT and the retransmission timeout the way
// RFC 6298 does: SRTT and RTTVAR with gains 1/8 and 1/4, RTO = SRTT +
// max(G, 4 RTTVAR) clamped to [min, max], doubled on every expiry (Karn:
// retransmitted TLPs give no samples) and recomputed on the next sample.
type rttEstimator struct {
	srtt, rttvar time.Duration
	rto          time.Duration
	min, max     time.Duration
	hasSample    bool
	minRTT       time.Duration // smallest sample seen
}

const clockGranularity = time.Microsecond

func newRTT(initial, min, max time.Duration) rttEstimator {
	return rttEstimator{rto: initial, min: min, max: max}
}

func (r *rttEstimator) sample(rtt time.Duration) {
	if rtt <= 0 {
		rtt = clockGranularity
	}
	if !r.hasSample || rtt < r.minRTT {
		r.minRTT = rtt
	}
	if !r.hasSample {
		r.srtt, r.rttvar, r.hasSample = rtt, rtt/2, true
	} else {
		d := r.srtt - rtt
		if d < 0 {
			d = -d
		}
		r.rttvar = (3*r.rttvar + d) / 4
		r.srtt = (7*r.srtt + rtt) / 8
	}
	v := 4 * r.rttvar
	if v < clockGranularity {
		v = clockGranularity
	}
	r.rto = r.clamp(r.srtt + v)
}

func (r *rttEstimator) backoff() { r.rto = r.clamp(2 * r.rto) }

func (r *rttEstimator) clamp(d time.Duration) time.Duration {
	if d < r.min {
		return r.min
	}
	if d > r.max {
		return r.max
	}
	return d
}
