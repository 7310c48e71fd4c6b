package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// RTX-2 (RFC 6298 5.1): the retransmission timer starts when a TLP goes
// out and none runs; TLPs sent while it runs do not restart it, so a
// sender that keeps sending into a path that loses everything still times
// out.
func TestRTOTimerNotRestartedBySends(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	p.drop = func(from *Bridge, f []byte) bool {
		return from == p.h && encap.Header(f).Type() == encap.MsgTLP
	}
	rto := p.h.Counters().RTO
	step := rto / 4
	start := p.now
	for i := 0; p.now-start < rto+step; i++ {
		p.send(p.h, mwr(0x1000*uint64(i+1), 64))
		p.advance(step, step)
	}
	if got := p.h.Counters().RTOs; got == 0 {
		t.Fatalf("no RTO %v after the first of a stream of lost TLPs, RTO %v", p.now-start, rto)
	}
}

// Once everything in flight is acknowledged the retransmission timer
// stops: no RTO (probe, backoff) fires on an empty queue.
func TestNoRTOWhenAllAcknowledged(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	p.send(p.h, mwr(0x1000, 64))
	p.run()
	p.advance(10*time.Millisecond, 50*time.Microsecond)
	if len(p.gq) != 1 {
		t.Fatalf("delivered %d", len(p.gq))
	}
	if c := p.h.Counters(); c.RTOs != 0 || c.Retransmits != 0 {
		t.Fatalf("%d RTOs, %d retransmits with nothing in flight", c.RTOs, c.Retransmits)
	}
}

// RTX-3: RTO probes carry a non-zero number (probe 0 is the routine
// KEEPALIVE, whose answer resends nothing): past 255 the number goes on at
// 1, and the answer to that probe resends the lost TLP.
func TestProbeNumberSkipsZero(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	p.h.probeSeq = 255 // the next RTO probe wraps
	lost := false
	var probes []uint8
	p.drop = func(from *Bridge, f []byte) bool {
		h := encap.Header(f)
		if from == p.h && h.Type() == encap.MsgTLP && !lost {
			lost = true
			return true
		}
		if from == p.h && h.Type() == encap.MsgControl {
			if c, err := encap.ParseControl(h.Body()); err == nil && c.Type == encap.CtlKeepalive && c.Probe != 0 {
				probes = append(probes, c.Probe)
			}
		}
		return false
	}
	p.send(p.h, mwr(0x1000, 64))
	p.run()
	rto := p.h.Counters().RTO
	p.advance(rto+rto/2, 10*time.Microsecond)
	if len(p.gq) != 1 || p.h.Counters().Retransmits != 1 {
		t.Fatalf("%v after a lost TLP (RTO %v): %d delivered, %d retransmits, RTO probes %v; want the answer to probe 1 to resend it",
			rto+rto/2, rto, len(p.gq), p.h.Counters().Retransmits, probes)
	}
	if len(probes) != 1 || probes[0] != 1 {
		t.Fatalf("RTO probes %v, want [1]", probes)
	}
}

// CRD-6: a sender stalled on credits with nothing in flight probes every
// RTO, not only every Keepalive: with a long Keepalive a lost credit
// update costs about an RTO.
func TestCreditProbeEveryRTO(t *testing.T) {
	hc := Config{Keepalive: 5 * time.Millisecond, DeadAfter: 50 * time.Millisecond}
	gc := Config{Keepalive: 5 * time.Millisecond, DeadAfter: 50 * time.Millisecond}
	gc.Credits[tlp.Posted] = ClassCredits{Headers: 1, Data: 64}
	p := newTestPair(t, hc, gc)
	p.up()
	p.accept[1] = 0 // the first write is received and acknowledged, not taken
	p.send(p.h, mwr(0x1000, 64))
	p.send(p.h, mwr(0x2000, 64)) // waits for the first one's credit
	p.advance(200*time.Microsecond, 10*time.Microsecond)
	if p.g.Queued() != 1 || !p.h.retx.empty() || !p.h.credits.anyStalled() {
		t.Fatalf("GPU side holds %d; host side %d in flight, stalled %v; want 1, nothing in flight, stalled",
			p.g.Queued(), p.h.retx.inFlight(), p.h.credits.anyStalled())
	}
	// The GPU side takes it; the CREDIT frame that says so is lost.
	p.drop = func(from *Bridge, f []byte) bool {
		return from == p.g && encap.Header(f).Type() == encap.MsgCredit
	}
	p.accept[1] = AcceptAll
	rto := p.h.Counters().RTO
	if rto >= time.Millisecond {
		t.Fatalf("RTO %v: the test needs it well below Keepalive", rto)
	}
	p.advance(time.Millisecond, 10*time.Microsecond)
	if len(p.gq) != 2 {
		t.Fatalf("delivered %d of 2 1 ms after the credit returned (RTO %v, Keepalive %v): the stalled sender did not probe",
			len(p.gq), rto, hc.Keepalive)
	}
}
