package conform

import (
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// defaultMTU is the protocol's default MTU from the dxpu header on (FRM-3).
const defaultMTU = 1472

// checkMTU judges FRM-3 on a frame of the IUT.
func (e *end) checkMTU(b []byte) {
	mtu := e.mtu
	if mtu == 0 {
		mtu = defaultMTU
	}
	if n := encap.HeaderLen + encap.Header(b).BodyLen(); n > mtu {
		e.led.fail("FRM-3", "a %s frame of %d bytes from the dxpu header on, the MTU is %d", frameKind(b), n, mtu)
	} else {
		e.led.pass("FRM-3", "every frame within the %d-byte MTU", mtu)
	}
}

// checkSeq judges FRM-11: a HELLO or HELLO-ACK carries its ISN in Seq, a
// frame without TLPs of the current session the next new sequence number
// (never one behind what the IUT already sent: a TLP frame lost on the way
// may put it ahead).
func (e *end) checkSeq(h encap.Header, body []byte) {
	switch t := h.Type(); t {
	case encap.MsgTLP:
		if e.iutKnown {
			if next := h.Seq() + uint32(h.Count()); seqLT(e.iutNext, next) {
				e.iutNext = next
			}
		}
	case encap.MsgControl:
		c, err := encap.ParseControl(body)
		if err != nil {
			return
		}
		switch c.Type {
		case encap.CtlHello, encap.CtlHelloAck:
			if h.Seq() != c.ISN {
				e.led.fail("FRM-11", "a %v with ISN %#x carries Seq %#x", c.Type, c.ISN, h.Seq())
			} else {
				e.led.pass("FRM-11", "HELLOs carry their ISN in Seq, other frames without TLPs the next sequence number")
			}
		case encap.CtlKeepalive, encap.CtlKeepaliveAck:
			if e.iutKnown && c.Session == e.iut.Session {
				e.seqNotBehind(h)
			}
		}
	default:
		if e.iutKnown && !e.deaf {
			e.seqNotBehind(h)
		}
	}
}

func (e *end) seqNotBehind(h encap.Header) {
	if seqLT(h.Seq(), e.iutNext) {
		e.led.fail("FRM-11", "a %v frame carries Seq %#x, behind the next sequence number %#x (TLPs up to %#x were sent)", h.Type(), h.Seq(), e.iutNext, e.iutNext-1)
	}
}

// checkReset judges CTL-4 on a RESET of the IUT.
func (e *end) checkReset(c *encap.Control) {
	switch {
	case c.Reason < encap.ResetAdmin || c.Reason > encap.ResetLinkDown:
		e.led.fail("CTL-4", "RESET with reason %d, want 1 to 4", c.Reason)
	case c.PeerSession != 0 && e.kitSessions[c.PeerSession] == "":
		e.led.fail("CTL-4", "RESET (reason %d) names session %#x, none of the kit's", c.Reason, c.PeerSession)
	default:
		e.led.pass("CTL-4", "RESET reasons in 1..4, naming a session of the kit or 0")
	}
}

// checkInitialLimits judges CRD-1 on the first limits of an IUT session:
// before the kit's TLPs consumed anything, each finite limit is the
// initial credit of the IUT's HELLO.
func (e *end) checkInitialLimits(h encap.Header) {
	for t := encap.CreditType(0); t < encap.NumCreditTypes; t++ {
		if e.iut.Infinite&(1<<t) != 0 || e.kitConsumed[t] != 0 {
			continue
		}
		l, want := h.CreditLimit(t), e.iut.Credits[t]
		if t == encap.CreditPH || t == encap.CreditNPH || t == encap.CreditCplH {
			l, want = l&0xffff, want&0xffff
		}
		// Ahead of the initial credits is CRD-4's (beyond the buffers).
		if hdr := t == encap.CreditPH || t == encap.CreditNPH || t == encap.CreditCplH; hdr && int16(uint16(l)-uint16(want)) < 0 || !hdr && int32(l-want) < 0 {
			e.led.fail("CRD-1", "credit type %d: first limit of the session %d, below the %d initial credits the HELLO announced (nothing was consumed)", t, l, want)
			return
		}
	}
	e.led.pass("CRD-1", "limits start at the HELLO's initial credits")
}

// judgeTimers judges TMR-1 on the Keepalive and DeadAfter the kit measured
// (its options once the measurements agreed with them).
func (l *ledger) judgeTimers(keepalive, deadAfter time.Duration) {
	switch {
	case keepalive <= 0 || deadAfter <= keepalive:
		l.fail("TMR-1", "Keepalive %v is not below DeadAfter %v", keepalive, deadAfter)
	case deadAfter < 10*keepalive:
		l.pass("TMR-1", "Keepalive %v below DeadAfter %v (SHOULD be at least ten times: a few lost keepalives may end a session)", keepalive, deadAfter)
	default:
		l.pass("TMR-1", "Keepalive %v, DeadAfter %v: within bounds", keepalive, deadAfter)
	}
}

// judgeHeld judges SEQ-4 after the kit filled the hole at hole with the
// two TLPs behind it sent first: the IUT held them if its SACK bits said
// so, or if they were executed without the kit sending them again.
func (k *kit) judgeHeld(hole uint32, resent int) {
	switch {
	case k.sackAck == hole && k.sackBits&3 == 3:
		k.led.pass("SEQ-4", "TLPs behind a hole held (SACKed) until it was filled")
	case k.resent == resent:
		k.led.pass("SEQ-4", "TLPs behind a hole executed once it was filled, without being sent again")
	default:
		k.led.fail("SEQ-4", "the 2 TLPs behind the hole at %#x were neither SACKed nor held: the kit had to send them again", hole)
	}
}

// notUpEdges judges LNK-8 right after a RESET took the IUT down, the kit
// silent: its HELLOs name no peer session, and a RESET while it is not up
// changes nothing.
func (k *kit) notUpEdges() error {
	if k.iut.PeerSession != 0 {
		k.led.fail("LNK-8", "its first HELLO after going down names peer session %#x, want 0 until it hears the peer's new session", k.iut.PeerSession)
	}
	session, restarts, hellos := k.iut.Session, k.restarts, k.hellos
	if err := k.send(k.control(encap.Control{Type: encap.CtlReset, Reason: encap.ResetAdmin, PeerSession: session})); err != nil {
		return err
	}
	ok, _, err := k.within(4*k.timers.HelloInterval+2*k.timers.Slack, func() bool { return k.hellos >= hellos+2 || k.restarts != restarts })
	if err != nil {
		return err
	}
	switch {
	case k.restarts != restarts || k.iut.Session != session:
		k.led.fail("LNK-8", "a RESET while not up restarted its handshake (session %#x -> %#x)", session, k.iut.Session)
	case !ok:
		k.led.fail("HSK-1", "fewer than 2 HELLOs within %v while not up", 4*k.timers.HelloInterval+2*k.timers.Slack)
	case k.helloTo != 0:
		k.led.fail("LNK-8", "its HELLOs while the kit was silent name peer session %#x, want 0", k.helloTo)
	default:
		k.led.pass("LNK-8", "after going down its HELLOs name no peer session, and a RESET while not up changed nothing")
	}
	return nil
}

// moreMalformed are the malformed frames of the second round, each
// carrying a read that must not be executed: a sealed frame on an unkeyed
// pair (KEY-1) and TLPs that break FRM-9's list (ECRC, 4 KiB crossing).
func (k *kit) moreMalformed(seq uint32) []badFrame {
	var out []badFrame
	add := func(name, rule string, f func(rd []byte) []byte) {
		tag := k.newTag()
		out = append(out, badFrame{name: name, rule: rule, read: true, tag: tag, b: f(memRead(k.kitID, tag, k.addr(0), 4))})
	}
	if k.keys == nil { // on a keyed pair such a frame is KEY-3's, judged there
		add("sealed bit on an unkeyed pair", "KEY-1", func(rd []byte) []byte {
			b := k.rawFrame(k.pair, seq, rd)
			b[0] |= 0x08
			return b
		})
	}
	add("TLP with a wrong ECRC", "FRM-9", func(rd []byte) []byte {
		t := append([]byte(nil), rd...)
		t[2] |= 0x80 // TD
		e := tlp.ComputeECRC(rd) ^ 0x5a5a5a5a
		t = append(t, byte(e>>24), byte(e>>16), byte(e>>8), byte(e))
		return k.rawFrame(k.pair, seq, t)
	})
	add("read crossing 4 KiB", "FRM-9", func(rd []byte) []byte {
		v := tlp.View(rd)
		p := tlp.Packet{Kind: tlp.MRd, Length: 2, RequesterID: k.kitID, Tag: v.Tag(), FirstBE: 0xf, LastBE: 0xf, Address: k.opt.Addr&^0xfff | 0xffc}
		b, err := p.AppendTo(nil)
		if err != nil { // the encoder refuses it: build it in place
			return k.rawFrame(k.pair, seq, crossing(rd))
		}
		return k.rawFrame(k.pair, seq, b)
	})
	return out
}

// crossing turns a 1-DW read into a 2-DW read at the last DW of a 4 KiB
// page, which crosses into the next.
func crossing(rd []byte) []byte {
	t := append([]byte(nil), rd...)
	t[3] = 2
	t[7] = 0xff // Last BE and First BE
	hl := len(t)
	t[hl-1] = 0xfc
	t[hl-2] |= 0x0f
	return t
}
