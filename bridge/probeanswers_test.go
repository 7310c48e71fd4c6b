package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp/encap"
)

// TestEveryKeepaliveAnswered: KEEPALIVEs that arrive together (one receive
// batch, before the bridge frames again) are each answered with their own
// probe number, in order (CTL-3). With one pending answer the first was
// lost: the conformance kit's probe 1 went unanswered when its routine
// KEEPALIVE (probe 0) came in the same batch under load.
func TestEveryKeepaliveAnswered(t *testing.T) {
	t.Parallel()
	p := newTestPair(t, Config{}, Config{})
	p.up()
	keepalive := func(probe uint8) []byte {
		buf := make([]byte, 256)
		n := p.h.control(buf, encap.Control{Type: encap.CtlKeepalive, PeerSession: p.h.peerSession, Probe: probe})
		return buf[:n]
	}
	answers := func() []uint8 {
		var got []uint8
		for {
			n := p.g.NextFrame(p.now, p.buf)
			if n == 0 {
				return got
			}
			f := p.buf[:n]
			if encap.Header(f).Type() != encap.MsgControl {
				continue
			}
			if c, err := encap.ParseControl(encap.Header(f).Body()); err == nil && c.Type == encap.CtlKeepaliveAck {
				got = append(got, c.Probe)
			}
		}
	}
	for _, probes := range [][]uint8{{1, 0}, {5, 6, 7}, {9, 9}} {
		for _, pr := range probes {
			if err := p.g.HandleFrame(p.now, keepalive(pr)); err != nil {
				t.Fatal(err)
			}
		}
		want := probes
		if probes[0] == probes[len(probes)-1] && len(probes) == 2 {
			want = probes[:1] // the same number twice: one answer says it
		}
		if got := answers(); string(got) != string(want) {
			t.Errorf("KEEPALIVEs %v answered with probes %v, want %v", probes, got, want)
		}
	}
	// A flood gets at most maxProbeAnswers answers, the newest.
	for pr := range uint8(3 * maxProbeAnswers) {
		if err := p.g.HandleFrame(p.now, keepalive(100+pr)); err != nil {
			t.Fatal(err)
		}
	}
	if got := answers(); len(got) != maxProbeAnswers || got[0] != 100+2*maxProbeAnswers || got[len(got)-1] != 100+3*maxProbeAnswers-1 {
		t.Errorf("%d KEEPALIVEs at once answered with %v, want the last %d", 3*maxProbeAnswers, got, maxProbeAnswers)
	}
}

// TestStaleKeepaliveNotAnswered: CTL-3 answers KEEPALIVEs of the current
// session only; one of the peer's previous session (late, or replayed on
// an unkeyed pair) gets no KEEPALIVE-ACK, whose probe number could match
// one of the new session's RTO probes.
func TestStaleKeepaliveNotAnswered(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	buf := make([]byte, 256)
	n := p.h.control(buf, encap.Control{Type: encap.CtlKeepalive, PeerSession: p.h.peerSession, Probe: 7})
	old := append([]byte(nil), buf[:n]...)
	p.h.Reset(p.now)
	p.run()
	p.advance(3*time.Millisecond, 100*time.Microsecond)
	if p.h.State() != StateUp || p.g.State() != StateUp {
		t.Fatalf("states %v/%v after the reset", p.h.State(), p.g.State())
	}
	if err := p.g.HandleFrame(p.now, old); err != nil {
		t.Fatal(err)
	}
	for {
		n := p.g.NextFrame(p.now, p.buf)
		if n == 0 {
			break
		}
		h := encap.Header(p.buf[:n])
		if h.Type() != encap.MsgControl {
			continue
		}
		if c, err := encap.ParseControl(h.Body()); err == nil && c.Type == encap.CtlKeepaliveAck {
			t.Fatalf("the previous session's KEEPALIVE was answered (probe %d)", c.Probe)
		}
	}
}
