package bridge

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp/encap"
)

// heldFrames has the host side send n posted writes, one TLP frame each,
// and returns those frames undelivered, for the test to hand to the GPU
// side itself.
func heldFrames(p *testPair, n int) [][]byte {
	p.t.Helper()
	var frames [][]byte
	p.drop = func(from *Bridge, f []byte) bool {
		if from == p.h && encap.Header(f).Type() == encap.MsgTLP {
			frames = append(frames, append([]byte(nil), f...))
			return true
		}
		return false
	}
	for i := range n {
		p.send(p.h, mwr(0x1000*uint64(i+1), 64))
		p.run()
	}
	p.drop = nil
	if len(frames) != n {
		p.t.Fatalf("%d TLP frames, want one per write", len(frames))
	}
	return frames
}

// framesDue returns (copies of) the frames b sends at p.now; they go
// nowhere.
func framesDue(p *testPair, b *Bridge) [][]byte {
	var out [][]byte
	for {
		n := b.NextFrame(p.now, p.buf)
		if n == 0 {
			return out
		}
		out = append(out, append([]byte(nil), p.buf[:n]...))
	}
}

// ofType returns the first frame of type t among frames; nil if none.
func ofType(frames [][]byte, t encap.MsgType) encap.Header {
	for _, f := range frames {
		if encap.Header(f).Type() == t {
			return encap.Header(f)
		}
	}
	return nil
}

func handOver(t *testing.T, p *testPair, b *Bridge, f []byte) {
	t.Helper()
	if err := b.HandleFrame(p.now, f); err != nil {
		t.Fatal(err)
	}
}

// ACK-5: one unacknowledged TLP frame is acknowledged after AckDelay, a
// second one at once.
func TestAckAtOnceAfterSecondFrame(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	f := heldFrames(p, 3)
	handOver(t, p, p.g, f[0])
	if ofType(framesDue(p, p.g), encap.MsgAck) != nil {
		t.Fatal("one frame acknowledged before AckDelay")
	}
	p.now += p.g.cfg.AckDelay
	if ofType(framesDue(p, p.g), encap.MsgAck) == nil {
		t.Fatal("one frame not acknowledged after AckDelay")
	}
	handOver(t, p, p.g, f[1])
	handOver(t, p, p.g, f[2])
	ack := ofType(framesDue(p, p.g), encap.MsgAck)
	if ack == nil {
		t.Fatal("a second unacknowledged frame was not acknowledged at once")
	}
	if want := encap.Header(f[2]).Seq() + 1; ack.Ack() != want {
		t.Fatalf("ACK %#x, want %#x", ack.Ack(), want)
	}
}

// ACK-3, ACK-5: an ack that rides on a TLP frame counts; the next frame
// received is the first unacknowledged one again, not the second.
func TestPiggybackedAckRestartsCount(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	f := heldFrames(p, 2)
	handOver(t, p, p.g, f[0])
	p.send(p.g, mwr(0x9000, 64)) // reverse traffic carries the ack
	out := framesDue(p, p.g)
	if tf := ofType(out, encap.MsgTLP); tf == nil || tf.Ack() != encap.Header(f[0]).Seq()+1 {
		t.Fatalf("no TLP frame carrying the ack among %d frames", len(out))
	}
	if ofType(out, encap.MsgAck) != nil {
		t.Fatal("a standalone ACK besides the TLP frame that carried it")
	}
	handOver(t, p, p.g, f[1])
	if ofType(framesDue(p, p.g), encap.MsgAck) != nil {
		t.Fatal("acknowledged at once: the piggybacked ack was not counted")
	}
	p.now += p.g.cfg.AckDelay
	if ofType(framesDue(p, p.g), encap.MsgAck) == nil {
		t.Fatal("not acknowledged after AckDelay")
	}
}

// ACK-5: a duplicate is acknowledged at once: the sender's copy says the
// ack it had was lost.
func TestDuplicateAckedAtOnce(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	f := heldFrames(p, 1)
	handOver(t, p, p.g, f[0])
	p.now += p.g.cfg.AckDelay
	if ofType(framesDue(p, p.g), encap.MsgAck) == nil {
		t.Fatal("not acknowledged after AckDelay")
	}
	handOver(t, p, p.g, f[0])
	ack := ofType(framesDue(p, p.g), encap.MsgAck)
	if ack == nil {
		t.Fatal("duplicate not acknowledged at once")
	}
	if want := encap.Header(f[0]).Seq() + 1; ack.Ack() != want {
		t.Fatalf("ACK %#x, want %#x", ack.Ack(), want)
	}
}

// NAK-1: a NAK goes out at once for every new hole, even while the NAK of
// an earlier, since filled hole would keep the same hole from being NAKed
// again.
func TestNewHoleNakedAtOnce(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	f := heldFrames(p, 4)
	handOver(t, p, p.g, f[1])
	nak := ofType(framesDue(p, p.g), encap.MsgNak)
	if nak == nil || nak.Ack() != encap.Header(f[0]).Seq() {
		t.Fatal("no NAK for the first hole")
	}
	handOver(t, p, p.g, f[0]) // the hole is filled
	framesDue(p, p.g)
	handOver(t, p, p.g, f[3])
	nak = ofType(framesDue(p, p.g), encap.MsgNak)
	if nak == nil {
		t.Fatal("no NAK at once for the new hole")
	}
	if want := encap.Header(f[2]).Seq(); nak.Ack() != want {
		t.Fatalf("NAK for %#x, want %#x", nak.Ack(), want)
	}
}

// CRD-5: credits the local side releases are advertised within AckDelay,
// even while it goes on releasing: a later release does not postpone the
// standalone CREDIT already due.
func TestCreditUpdateNotPostponed(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	p.accept[1] = 0 // the GPU side's local side takes nothing yet
	const n = 8
	for i := range n {
		p.send(p.h, mwr(0x1000*uint64(i+1), 64))
	}
	p.advance(100*time.Microsecond, 10*time.Microsecond)
	if p.g.Queued() != n {
		t.Fatalf("%d TLPs queued on the GPU side, want %d", p.g.Queued(), n)
	}
	ackDelay := p.g.cfg.AckDelay
	before := p.g.buffers.limit(encap.CreditPH)
	start := p.now
	for range n {
		v, ok := p.g.NextTLP(AcceptAll)
		if !ok {
			t.Fatal("nothing to take")
		}
		if err := p.g.Release(v.Class(), 1, v.DataCredits()); err != nil {
			t.Fatal(err)
		}
		for _, f := range framesDue(p, p.g) {
			h := encap.Header(f)
			if h.Flags()&encap.FlagCredit != 0 && h.CreditLimit(encap.CreditPH) != before&0xffff {
				if d := p.now - start; d > ackDelay {
					t.Fatalf("raised limit advertised %v after the first release, AckDelay %v", d, ackDelay)
				}
				return
			}
		}
		p.now += ackDelay / 2
	}
	t.Fatalf("released %d TLPs over %v, AckDelay %v: no frame advertised the raised limit", n, p.now-start, ackDelay)
}

// ACK-5: a TLP beyond the receive window is acknowledged at once (the
// sender has a wrong idea of what arrived).
func TestOutOfWindowAckedAtOnce(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	f := heldFrames(p, 1)
	encap.Header(f[0]).SetSeq(p.g.reorder.next + uint32(p.g.cfg.Window))
	handOver(t, p, p.g, f[0])
	if p.g.Counters().OutOfWindow != 1 {
		t.Fatalf("%d out-of-window TLPs counted, want 1", p.g.Counters().OutOfWindow)
	}
	if ofType(framesDue(p, p.g), encap.MsgAck) == nil {
		t.Fatal("out-of-window TLP not acknowledged at once")
	}
}

// NAK-1: a hole is NAKed again only once it outlives two smoothed RTTs.
func TestReNakAfterTwoSRTT(t *testing.T) {
	// The host side acks late, so the GPU side's SRTT is about 80 us,
	// well above twice its own AckDelay.
	p := newTestPair(t, Config{AckDelay: 80 * time.Microsecond}, Config{AckDelay: time.Microsecond})
	p.up()
	for i := range 8 {
		p.send(p.g, mwr(0x1000*uint64(i+1), 64))
		p.advance(200*time.Microsecond, 5*time.Microsecond)
	}
	srtt := p.g.Counters().SRTT
	if srtt < 60*time.Microsecond || srtt > 100*time.Microsecond {
		t.Fatalf("GPU side SRTT %v, want about 80us", srtt)
	}
	f := heldFrames(p, 2)
	handOver(t, p, p.g, f[1]) // hole at f[0]
	start := p.now
	var naks []time.Duration
	for p.now-start <= 3*srtt {
		if ofType(framesDue(p, p.g), encap.MsgNak) != nil {
			naks = append(naks, p.now-start)
		}
		p.now += time.Microsecond
	}
	if len(naks) != 2 || naks[0] != 0 || naks[1] < 2*srtt {
		t.Fatalf("NAKs at %v after the hole, SRTT %v; want one at once and one after 2 SRTT", naks, srtt)
	}
}
