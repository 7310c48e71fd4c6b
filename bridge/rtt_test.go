package bridge

import (
	"testing"
	"time"
)

// TestRTTEstimator follows RFC 6298 by hand: the first sample sets SRTT =
// R, RTTVAR = R/2; later ones RTTVAR = 3/4 RTTVAR + 1/4 |SRTT-R|, SRTT =
// 7/8 SRTT + 1/8 R; RTO = SRTT + max(G, 4 RTTVAR) within [min, max];
// backoff doubles it, still clamped.
func TestRTTEstimator(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		name     string
		samples  []time.Duration
		backoffs int
		srtt     time.Duration
		rttvar   time.Duration
		rto      time.Duration
		minRTT   time.Duration
	}{
		{name: "no sample keeps the initial RTO", rto: 1000 * us},
		{name: "first sample", samples: []time.Duration{100 * us}, srtt: 100 * us, rttvar: 50 * us, rto: 300 * us, minRTT: 100 * us},
		// RTTVAR = 3/4*50 + 1/4*|100-200| = 62.5; SRTT = 7/8*100 + 1/8*200 = 112.5.
		{name: "second sample", samples: []time.Duration{100 * us, 200 * us}, srtt: 112500 * time.Nanosecond, rttvar: 62500 * time.Nanosecond, rto: 362500 * time.Nanosecond, minRTT: 100 * us},
		{name: "steady samples shrink to the floor", samples: repeat(10*us, 60), srtt: 10 * us, rttvar: 0, rto: 20 * us, minRTT: 10 * us},
		{name: "clamped to max", samples: []time.Duration{4000 * us}, srtt: 4000 * us, rttvar: 2000 * us, rto: 5000 * us, minRTT: 4000 * us},
		{name: "zero sample counts as the granularity", samples: []time.Duration{0}, srtt: 1 * us, rttvar: 500 * time.Nanosecond, rto: 20 * us, minRTT: 1 * us},
		{name: "backoff doubles", samples: []time.Duration{100 * us}, backoffs: 2, srtt: 100 * us, rttvar: 50 * us, rto: 1200 * us, minRTT: 100 * us},
		{name: "backoff clamped", backoffs: 5, rto: 5000 * us},
		{name: "minimum RTT kept", samples: []time.Duration{300 * us, 50 * us, 200 * us}, srtt: 0, rto: 0, minRTT: 50 * us},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newRTT(1000*us, 20*us, 5000*us)
			for _, s := range tc.samples {
				r.sample(s)
			}
			for i := 0; i < tc.backoffs; i++ {
				r.backoff()
			}
			if r.minRTT != tc.minRTT {
				t.Errorf("minRTT %v, want %v", r.minRTT, tc.minRTT)
			}
			if tc.name == "minimum RTT kept" {
				return
			}
			if r.srtt != tc.srtt || r.rttvar != tc.rttvar || r.rto != tc.rto {
				t.Errorf("srtt %v rttvar %v rto %v; want %v %v %v", r.srtt, r.rttvar, r.rto, tc.srtt, tc.rttvar, tc.rto)
			}
			if r.hasSample != (len(tc.samples) > 0) {
				t.Errorf("hasSample %v after %d samples", r.hasSample, len(tc.samples))
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = d
	}
	return s
}
