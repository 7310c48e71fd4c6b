package bridge

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// The attacks of issue 14, repeated against keyed pairs. The attacker can
// send any datagram from the peer's address and read every frame on the
// wire (so the clear header, and in GMAC mode the bodies too), but holds
// no pair key.

// plainFrame builds an unsealed dxpu frame as an attacker would.
func plainFrame(t encap.MsgType, pair, seq uint32, count int, body []byte) []byte {
	f := make([]byte, encap.HeaderLen, encap.HeaderLen+len(body))
	h := encap.Header(f)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(t)
	h.SetPairID(pair)
	h.SetCount(count)
	h.SetBodyLen(len(body))
	h.SetSeq(seq)
	return append(f, body...)
}

// tlpBody is the body of a TLP frame carrying raw.
func tlpBody(raw []byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(raw))), raw...)
}

// nextSeq reads the sequence number after the last TLP frame captured:
// what the receiver expects next.
func nextSeq(t *testing.T, frames [][]byte) uint32 {
	t.Helper()
	for i := len(frames) - 1; i >= 0; i-- {
		if h := encap.Header(frames[i]); h.Type() == encap.MsgTLP {
			return h.Seq() + uint32(h.Count())
		}
	}
	t.Fatal("no TLP frame captured")
	return 0
}

// freshPN gives a sealed frame a packet number far above any sent, so the
// replay window lets it through to the tag check.
func freshPN(f []byte, i uint32) {
	binary.BigEndian.PutUint64(f[encap.HeaderLen+4:], 1<<50+uint64(i))
}

// refuse feeds a copy of frame to b and fails unless it is dropped with an
// error wrapping ErrFrame and want (nil: any).
func refuse(t *testing.T, b *Bridge, now time.Duration, frame []byte, want error, what string) {
	t.Helper()
	err := b.HandleFrame(now, append([]byte(nil), frame...))
	if err == nil || !errors.Is(err, ErrFrame) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("%s: HandleFrame returned %v, want ErrFrame and %v", what, err, want)
	}
}

// staysUp fails unless both sides are up with no link-down event.
func (p *testPair) staysUp(t *testing.T, what string) {
	t.Helper()
	p.run()
	if p.h.State() != StateUp || p.g.State() != StateUp || hasKind(p.hev, EventLinkDown) || hasKind(p.gev, EventLinkDown) {
		t.Fatalf("%s: host %v, gpu %v, events %v / %v", what, p.h.State(), p.g.State(), p.hev, p.gev)
	}
}

// One forged datagram knowing the pair ID and the next sequence numbers
// wrote device memory; keyed, nothing is delivered, every forgery is
// counted, and the sequence numbers it named still carry the genuine
// writes afterwards.
func TestForgedWritesRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		p := newKeyedPair(t, mode, Config{}, Config{})
		wire := p.capture(p.h, nil)
		p.up()
		p.send(p.h, mwr(0x1000, 64))
		p.run()
		if len(p.gq) != 1 {
			t.Fatalf("%v: genuine write not delivered", mode)
		}
		seq := nextSeq(t, *wire)
		genuine := (*wire)[len(*wire)-1]
		var forged [][]byte
		for i := uint32(0); i < 8; i++ {
			raw := enc(mwr(0xdead0000+uint64(i)*0x100, 16))
			// Unsealed, at the next sequence numbers.
			forged = append(forged, plainFrame(encap.MsgTLP, 0x123456, seq+i, 1, tlpBody(raw)))
			// SEALED set, a plausible security header with a fresh packet
			// number (so the replay window lets it through to the tag), a
			// made-up tag.
			body := append([]byte{0, byte(mode), 0, 0, 0, 0, 0, 1, 0, 0, 0, byte(i)}, tlpBody(raw)...)
			f := plainFrame(encap.MsgTLP, 0x123456, seq+i, 1, append(body, make([]byte, seal.TagLen)...))
			f[0] |= seal.FlagSealed
			forged = append(forged, f)
			// A genuine frame with its clear header moved on and its body changed.
			g := append([]byte(nil), genuine...)
			encap.Header(g).SetSeq(seq + i)
			freshPN(g, i)
			g[len(g)-seal.TagLen-1] ^= byte(i + 1)
			forged = append(forged, g)
		}
		before := p.g.Counters()
		for i, f := range forged {
			refuse(t, p.g, p.now, f, nil, mode.String()+" forgery "+string(rune('0'+i%3)))
		}
		p.staysUp(t, mode.String()+" after forged writes")
		c := p.g.Counters()
		if len(p.gq) != 1 || c.TLPsReceived != before.TLPsReceived {
			t.Fatalf("%v: %d TLPs delivered after the forgeries, want the 1 genuine", mode, len(p.gq))
		}
		if got := c.DroppedUnsealed - before.DroppedUnsealed; got != 8 {
			t.Fatalf("%v: %d unsealed forgeries counted, want 8", mode, got)
		}
		if got := c.DroppedForged - before.DroppedForged; got != 16 {
			t.Fatalf("%v: %d forged tags counted, want 16", mode, got)
		}
		if got := c.FramesDropped - before.FramesDropped; got != 24 {
			t.Fatalf("%v: %d frames dropped, want 24", mode, got)
		}
		for i := 0; i < 8; i++ {
			p.send(p.h, mwr(0x2000+uint64(i)*0x100, 16))
		}
		p.run()
		if len(p.gq) != 9 {
			t.Fatalf("%v: %d of 8 genuine writes after the forgeries delivered", mode, len(p.gq)-1)
		}
		for i, d := range p.gq[1:] {
			if a := d.v().Address(); a != 0x2000+uint64(i)*0x100 {
				t.Fatalf("%v: write %d at %#x", mode, i, a)
			}
		}
	}
}

// A forged RESET, or a HELLO with a new session, tore the pair down; keyed,
// neither does, nor does a genuine HELLO or RESET replayed.
func TestForgedResetAndHelloRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		p := newKeyedPair(t, mode, Config{}, Config{})
		wire := p.capture(p.h, nil)
		p.up()
		var hello []byte
		for _, f := range *wire {
			if encap.Header(f).Type() == encap.MsgControl && encap.Header(f).BodyLen() > 60 {
				hello = f // the last HELLO or HELLO-ACK of the handshake
			}
		}
		if hello == nil {
			t.Fatalf("%v: no HELLO captured", mode)
		}
		// The attacker knows both sessions (in GMAC mode they are in clear).
		reset := (&encap.Control{Type: encap.CtlReset, Role: RoleHost, Reason: encap.ResetAdmin, Session: p.h.Session(), PeerSession: p.g.Session()}).AppendTo(nil)
		newHello := p.h.hello(encap.CtlHello)
		newHello.Role, newHello.Session = RoleHost, p.h.Session()+1
		helloBody := append(newHello.AppendTo(nil), make([]byte, KeyNonceLen)...)
		other, err := seal.New(seal.Config{PairID: 0x123456, Role: RoleHost, Mode: mode}, 0, pairKey(7))
		if err != nil {
			t.Fatal(err)
		}
		otherKey := func(body []byte) []byte {
			f, err := other.SealHandshake(nil, plainFrame(encap.MsgControl, 0x123456, 0, 0, body), uint64(p.now)+1<<40)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		tampered := append([]byte(nil), hello...)
		tampered[len(tampered)-seal.TagLen-20] ^= 0x01
		freshPN(tampered, 0)
		cases := []struct {
			name  string
			frame []byte
			want  error
		}{
			{"unsealed RESET", plainFrame(encap.MsgControl, 0x123456, 0, 0, reset), seal.ErrNotSealed},
			{"unsealed HELLO with a new session", plainFrame(encap.MsgControl, 0x123456, 0, 0, helloBody), seal.ErrNotSealed},
			{"RESET under another key", otherKey(reset), seal.ErrAuth},
			{"HELLO under another key", otherKey(helloBody), seal.ErrAuth},
			{"genuine HELLO replayed", hello, seal.ErrReplayed},
			{"genuine HELLO with a byte changed", tampered, seal.ErrAuth},
		}
		for _, c := range cases {
			refuse(t, p.g, p.now, c.frame, c.want, mode.String()+" "+c.name)
			p.staysUp(t, mode.String()+" "+c.name)
		}
		// A genuine RESET does end the session; replayed later it does not.
		p.h.Reset(p.now)
		p.up()
		p.hev, p.gev = nil, nil
		for _, f := range *wire {
			if encap.Header(f).Type() == encap.MsgControl {
				refuse(t, p.g, p.now, f, nil, mode.String()+" earlier control frame replayed")
			}
		}
		p.staysUp(t, mode.String()+" after replaying every earlier control frame")
		if c := p.g.Counters(); c.LinkDowns != 1 {
			t.Fatalf("%v: %d link downs, want only the genuine Reset's", mode, c.LinkDowns)
		}
	}
}

// Session nonces and ISNs were the same after every restart, and a frame
// captured before a restart was accepted after it. Now each start draws
// new ones (Seed 0) and the frames of the earlier life are refused, at a
// restarted receiver and at a peer of a restarted sender alike.
func TestReplayAcrossRestartRefused(t *testing.T) {
	t.Parallel()
	cfg := func(r Role) Config { return Config{Role: r, PairID: 0x123456, Key: pairKey(1)} }
	build := func(r Role) *Bridge {
		b, err := New(cfg(r))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b := build(RoleHost), build(RoleHost)
	if a.session == b.session || a.retx.nxt == b.retx.nxt || a.keys.nonce == b.keys.nonce {
		t.Fatalf("two starts drew session %#x/%#x, ISN %#x/%#x, key nonce %x/%x: want all different",
			a.session, b.session, a.retx.nxt, b.retx.nxt, a.keys.nonce, b.keys.nonce)
	}
	for _, restart := range []string{"sender", "receiver"} {
		p := pairOf(t, build(RoleHost), build(RoleGPU))
		wire := p.capture(p.h, nil)
		p.up()
		for i := 0; i < 4; i++ {
			p.send(p.h, mwr(0x1000+uint64(i)*0x100, 64))
		}
		p.run()
		old := append([][]byte(nil), *wire...)
		if restart == "sender" {
			p.h = build(RoleHost)
		} else {
			p.g = build(RoleGPU)
		}
		p.capture(p.h, nil)
		p.advance(3*time.Millisecond, 100*time.Microsecond)
		if p.h.State() != StateUp || p.g.State() != StateUp {
			t.Fatalf("%s restarted: pair not up again (%v/%v)", restart, p.h.State(), p.g.State())
		}
		p.gq, p.hev, p.gev = nil, nil, nil
		before := p.g.Counters()
		for i, f := range old {
			refuse(t, p.g, p.now, f, nil, restart+" restarted: frame "+string(rune('a'+i%26)))
		}
		p.staysUp(t, restart+" restarted, old frames replayed")
		c := p.g.Counters()
		if len(p.gq) != 0 || c.TLPsReceived != before.TLPsReceived {
			t.Fatalf("%s restarted: %d replayed TLPs delivered", restart, len(p.gq))
		}
		if got := c.FramesDropped - before.FramesDropped; got != uint64(len(old)) {
			t.Fatalf("%s restarted: %d of %d replayed frames dropped", restart, got, len(old))
		}
	}
}

// Any single bit flipped anywhere in a sealed frame (header, security
// header, body, tag) gets it refused, without changing the receiver's
// state: the untouched frame is then delivered, once.
func TestBitFlipsRefused(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		p := newKeyedPair(t, mode, Config{}, Config{})
		var held []byte
		p.up()
		p.drop = func(b *Bridge, f []byte) bool {
			if b == p.h && encap.Header(f).Type() == encap.MsgTLP && held == nil {
				held = append([]byte(nil), f...)
				return true
			}
			return false
		}
		p.send(p.h, mwr(0x4000, 32))
		p.run()
		p.drop = nil
		if held == nil || len(p.gq) != 0 {
			t.Fatalf("%v: no TLP frame held back (delivered %d)", mode, len(p.gq))
		}
		before := p.g.Counters()
		for bit := 0; bit < 8*len(held); bit++ {
			f := append([]byte(nil), held...)
			f[bit/8] ^= 1 << (bit % 8)
			if err := p.g.HandleFrame(p.now, f); !errors.Is(err, ErrFrame) {
				t.Fatalf("%v: bit %d (byte %d) flipped: %v, want a refusal", mode, bit, bit/8, err)
			}
		}
		p.collect()
		if c := p.g.Counters(); len(p.gq) != 0 || c.FramesDropped-before.FramesDropped != uint64(8*len(held)) || c.FramesOpened != before.FramesOpened {
			t.Fatalf("%v: after %d flips: delivered %d, dropped %d, opened %d", mode, 8*len(held), len(p.gq), c.FramesDropped-before.FramesDropped, c.FramesOpened-before.FramesOpened)
		}
		if err := p.g.HandleFrame(p.now, append([]byte(nil), held...)); err != nil {
			t.Fatalf("%v: the untouched frame: %v", mode, err)
		}
		refuse(t, p.g, p.now, held, seal.ErrReplayed, mode.String()+" the frame again")
		p.run()
		if len(p.gq) != 1 || p.gq[0].v().Address() != 0x4000 {
			t.Fatalf("%v: delivered %d TLPs, want the one write", mode, len(p.gq))
		}
	}
}

// Refusing a forged frame costs no allocation: a flood is no GC load.
func TestForgedFrameRefusalAllocatesNothing(t *testing.T) {
	p := newKeyedPair(t, seal.ModeGCM, Config{}, Config{})
	wire := p.capture(p.h, nil)
	p.up()
	p.send(p.h, mwr(0x1000, 256))
	p.run()
	forged := append([]byte(nil), (*wire)[len(*wire)-1]...)
	forged[encap.HeaderLen+seal.SecHeaderLen] ^= 1
	buf := make([]byte, len(forged))
	allocs := testing.AllocsPerRun(200, func() {
		copy(buf, forged)
		if err := p.g.HandleFrame(p.now, buf); err == nil {
			t.Fatal("forged frame accepted")
		}
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per forged frame refused", allocs)
	}
}
