package bridge

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

func (b *Bridge) dropFrame(format string, args ...any) error {
	b.ctr.FramesDropped++
	return fmt.Errorf("%w: %s", ErrFrame, fmt.Sprintf(format, args...))
}

// headerDrop is the error of a frame refused for its clear dxpu header
// (too short, another version, another pair), keyed or not. The three are
// preallocated, like the seal's refusals, so that a flood of them
// allocates nothing; each matches ErrFrame, and the short and version ones
// also the seal's sentinels (seal.ErrShort, seal.ErrVersion), as when the
// seal refused them.
type headerDrop struct {
	msg      string
	sentinel error
}

func (e *headerDrop) Error() string        { return ErrFrame.Error() + ": " + e.msg }
func (e *headerDrop) Unwrap() error        { return e.sentinel }
func (e *headerDrop) Is(target error) bool { return target == ErrFrame }

var (
	errShortHeader = &headerDrop{"shorter than the 40-byte dxpu header", seal.ErrShort}
	errVersion     = &headerDrop{"byte 0: dxpu version is not 1", seal.ErrVersion}
	errUnknownPair = &headerDrop{"bytes 2-4: another pair's frame (pair ID is not this bridge's)", nil}
)

// checkHeader refuses, and counts by reason, a frame whose clear header
// is too short, of another version or of another pair.
func (b *Bridge) checkHeader(frame []byte) error {
	var err error
	switch {
	case len(frame) < encap.HeaderLen:
		b.ctr.DroppedMalformed++
		err = errShortHeader
	case encap.Header(frame).Version() != encap.Version:
		b.ctr.DroppedVersion++
		err = errVersion
	case encap.Header(frame).PairID() != b.cfg.PairID:
		b.ctr.DroppedUnknownPair++
		err = errUnknownPair
	default:
		return nil
	}
	b.ctr.FramesDropped++
	return err
}

// HandleFrame takes one frame from the fabric, from the dxpu header on. The
// bytes are not kept; a keyed bridge decrypts them in place. Frames that
// are malformed, for another pair, stale or out of protocol are dropped
// with an error wrapping ErrFrame (counted in FramesDropped); nothing in
// them takes effect. First the clear header: a frame shorter than it, of
// another version or with another pair's ID is dropped and counted by
// reason (DroppedMalformed, DroppedVersion, DroppedUnknownPair), whether
// the pair is keyed or not. Then a keyed bridge opens the frame before
// anything else: frames that are not sealed, do not authenticate or were
// seen before are dropped there (the error also wraps the seal's sentinel,
// and the seal's Dropped* counters say why), so no other field of theirs
// is ever read.
func (b *Bridge) HandleFrame(now time.Duration, frame []byte) error {
	b.HandleTimeout(now)
	now = b.now
	wireLen := len(frame)
	if err := b.checkHeader(frame); err != nil {
		return err
	}
	if b.keys.ch != nil {
		plain, err := b.keys.ch.OpenFrame(frame)
		if err != nil {
			return b.dropSealed(err)
		}
		frame = plain
	}
	h := encap.Header(frame)
	if h.Flags()&seal.FlagSealed != 0 {
		return b.dropFrame("byte 0: sealed frame (flags %#x), this pair runs unkeyed", h.Flags())
	}
	if h.BodyLen() > len(frame)-encap.HeaderLen {
		return b.dropFrame("bytes 6-7: body length %d, only %d bytes follow the header", h.BodyLen(), len(frame)-encap.HeaderLen)
	}
	body := frame[encap.HeaderLen : encap.HeaderLen+h.BodyLen()]
	t := h.Type()
	switch t {
	case encap.MsgControl:
		c, err := encap.ParseControl(body)
		if err != nil {
			return b.dropFrame("body: %v", err)
		}
		var keyNonce [KeyNonceLen]byte
		if b.keys.ch != nil && (c.Type == encap.CtlHello || c.Type == encap.CtlHelloAck) {
			if keyNonce, err = peerKeyNonce(body); err != nil {
				return b.dropFrame("%v", err)
			}
		}
		if b.state == StateUp && c.Session == b.peerSession && c.Role != b.cfg.Role {
			// KEEPALIVE and its ACK refresh acks and credits: they are
			// the probe that unblocks a sender whose update was lost.
			if err := b.headerFields(now, h, t); err != nil {
				return err
			}
			if c.Type == encap.CtlKeepaliveAck && c.Probe != 0 && h.Flags()&encap.FlagAck != 0 {
				b.onProbeAck(c.Probe, h.Ack())
			}
		}
		if err := b.handleControl(now, &c, &keyNonce); err != nil {
			return err
		}
	case encap.MsgTLP, encap.MsgAck, encap.MsgNak, encap.MsgCredit:
		if t == encap.MsgTLP {
			if err := b.checkTLPs(h, body); err != nil {
				return b.dropFrame("%v", err)
			}
		} else if h.Count() != 0 {
			return b.dropFrame("byte 5: %d TLPs in a %v frame", h.Count(), t)
		}
		if b.state != StateUp {
			if !b.peerKnown {
				// A peer still in a session this side forgot: tell it.
				b.resetPending, b.resetReason, b.resetEcho = true, encap.ResetUnknownSession, 0
				return b.dropFrame("%v frame while %v and no session", t, b.state)
			}
			// The peer only sends these once up: our HELLO-ACK reached it.
			// It has received nothing from us yet, so its Ack is our ISN; a
			// frame with another (a late one of the peer's previous session)
			// must not complete the handshake (HSK-6).
			if h.Flags()&encap.FlagAck == 0 || h.Ack() != b.retx.nxt {
				return b.dropFrame("%v frame while %v: Ack %#x (flags %#x) is not this session's ISN %#x, a stale frame", t, b.state, h.Ack(), h.Flags(), b.retx.nxt)
			}
			b.goUp(now)
		}
		if err := b.headerFields(now, h, t); err != nil {
			return err
		}
		if t == encap.MsgNak {
			b.ctr.NaksReceived++
		}
		if t == encap.MsgTLP {
			b.onTLPs(now, h, body)
		}
	default:
		return b.dropFrame("byte 1: unknown message type %d", t)
	}
	b.lastRecv = now
	b.ctr.FramesReceived++
	b.ctr.BytesReceived += uint64(wireLen)
	return nil
}

// headerFields applies the ack, SACK and credit fields of the header.
func (b *Bridge) headerFields(now time.Duration, h encap.Header, t encap.MsgType) error {
	if h.Flags()&encap.FlagAck != 0 && seqLT(b.retx.nxt, h.Ack()) {
		return b.dropFrame("bytes 12-15: ack %#x beyond the next sequence number %#x", h.Ack(), b.retx.nxt)
	}
	if h.Flags()&encap.FlagCredit != 0 {
		b.onCredits(h)
	}
	if h.Flags()&encap.FlagAck != 0 {
		var sack uint32
		if h.Flags()&encap.FlagSack != 0 {
			sack = h.Sack()
		}
		b.onAck(now, h.Ack(), sack, t == encap.MsgNak)
	}
	return nil
}

// checkTLPs validates the length table and every TLP before any takes
// effect, so a damaged frame is dropped whole and retransmitted.
func (b *Bridge) checkTLPs(h encap.Header, body []byte) error {
	n := h.Count()
	if n == 0 {
		return fmt.Errorf("byte 5: TLP frame with no TLPs")
	}
	if 2*n > len(body) {
		return fmt.Errorf("body: length table of %d TLPs needs %d bytes, body has %d", n, 2*n, len(body))
	}
	off := 2 * n
	for i := 0; i < n; i++ {
		l := int(h.TLPLen(i))
		if l > b.cfg.maxTLP() || off+l > len(body) {
			return fmt.Errorf("TLP %d: length %d at body offset %d overruns the %d-byte body or the %d-byte maximum", i, l, off, len(body), b.cfg.maxTLP())
		}
		if _, err := tlp.Parse(body[off : off+l]); err != nil {
			return fmt.Errorf("TLP %d (seq %#x): %w", i, h.Seq()+uint32(i), err)
		}
		off += l
	}
	if off != len(body) {
		return fmt.Errorf("body: %d bytes after the last TLP", len(body)-off)
	}
	return nil
}

// handleControl acts on a control message; keyNonce is the key nonce of a
// keyed HELLO or HELLO-ACK (zero otherwise).
func (b *Bridge) handleControl(now time.Duration, c *encap.Control, keyNonce *[KeyNonceLen]byte) error {
	if c.Role == b.cfg.Role {
		return b.dropFrame("control: peer has the same role %v", c.Role)
	}
	switch c.Type {
	case encap.CtlHello, encap.CtlHelloAck:
		same := b.peerKnown && c.Session == b.peerSession && *keyNonce == b.keys.peer
		if b.state == StateUp {
			if same {
				if c.Type == encap.CtlHello {
					b.helloAckPending = true // it missed our echo
				}
				return nil
			}
			b.goDown(now, "peer restarted its session", 0)
			same = false
		}
		if !same {
			b.peerSession, b.peerKnown, b.peer = c.Session, true, *c
			b.keys.peer = *keyNonce
			b.reorder.restart(c.ISN, &b.rxPool)
			if b.keys.ch != nil {
				if err := b.startKeys(); err != nil {
					b.peerKnown = false
					return b.dropFrame("session keys: %v", err)
				}
			}
		}
		b.helloAckPending = true
		if c.PeerSession == b.session {
			b.goUp(now)
		}
	case encap.CtlKeepalive:
		if b.state == StateUp && c.Session == b.peerSession {
			b.kaAcks.add(c.Probe)
		}
	case encap.CtlKeepaliveAck:
	case encap.CtlReset:
		if b.state == StateUp && (c.PeerSession == b.session || (c.PeerSession == 0 && c.Session != b.peerSession)) {
			b.goDown(now, fmt.Sprintf("peer sent RESET (reason %d)", c.Reason), 0)
		}
	}
	return nil
}

// goUp completes the handshake with the peer's HELLO parameters.
func (b *Bridge) goUp(now time.Duration) {
	p := &b.peer
	b.state = StateUp
	b.ctr.LinkUps++
	b.lastRecv, b.lastSent, b.lastProbe = now, now, now
	b.retx.limit = uint32(min(int(p.Window), b.cfg.Window))
	if b.txTags.inUse() == 0 {
		base, _ := tagSpace(int(p.TagBits))
		if uint16(base) != b.txTags.base {
			b.txTags = newTagTable(int(p.TagBits), b.cfg.MaxOutstanding)
		}
	}
	b.credits.start(p.Credits, p.Infinite)
	b.pushEvent(Event{Kind: EventLinkUp, Session: b.session})
}

// onCredits takes the peer's cumulative limits (see sendCredits.update).
func (b *Bridge) onCredits(h encap.Header) {
	before := b.credits.limit
	for t := encap.CreditType(0); t < encap.NumCreditTypes; t++ {
		if b.credits.update(t, h.CreditLimit(t)) {
			b.ctr.BogusCredits++
		}
	}
	if b.credits.limit != before {
		b.idle = false
	}
}

// onAck frees acknowledged TLPs, samples the RTT from TLPs sent once, and
// marks TLPs for retransmission: on a NAK the frame that carried the hole,
// and RACK-style every TLP that at least three later transmissions
// overtook (reordering alone rarely trips it).
func (b *Bridge) onAck(now time.Duration, ack, sack uint32, nak bool) {
	r := b.retx.acknowledge(now, ack, sack, b.rtt.minRTT, &b.txPool)
	if r.sample >= 0 {
		b.rtt.sample(r.sample)
	}
	if r.progress {
		b.rearmRTO(now)
	}
	if nak {
		// Unless that frame went out again less than half an RTT ago.
		b.retx.markNakFrame(now, ack, b.rtt.srtt/2)
	}
	if r.newMax || nak {
		b.retx.markOvertaken(ack)
	}
}

// rearmRTO restarts the retransmission timer after progress, or stops it
// when nothing is in flight.
func (b *Bridge) rearmRTO(now time.Duration) {
	if b.retx.empty() {
		b.rtoDeadline = noDeadline
	} else {
		b.rtoDeadline = now + b.rtt.rto
	}
}

// onTLPs stores the new TLPs of a validated frame in the reorder window and
// moves the in-order prefix to the class queues.
func (b *Bridge) onTLPs(now time.Duration, h encap.Header, body []byte) {
	n := h.Count()
	off := 2 * n
	fresh := false
	for i := 0; i < n; i++ {
		l := int(h.TLPLen(i))
		t := body[off : off+l]
		off += l
		if b.admit(h.Seq()+uint32(i), t) {
			fresh = true
		}
	}
	b.drainReorder()
	if fresh && b.reorder.hole() &&
		(!b.nakSent || b.nakFor != b.reorder.next || now-b.nakAt >= b.renakAfter()) {
		// New TLPs wait behind a hole: tell the sender at once; again for
		// the same hole only after two RTTs, in case the retransmission
		// was lost too (the SACK bits of every frame keep it informed).
		b.nakPending, b.nakSent, b.nakFor, b.nakAt = true, true, b.reorder.next, now
	}
	if fresh || b.ackNow {
		b.framesUnacked++
		if !b.ackPending {
			b.ackPending = true
			b.ackDeadline = now + b.cfg.AckDelay
		}
		if b.framesUnacked >= 2 {
			b.ackNow = true
		}
	}
}

// admit copies TLP seq into the reorder window unless it is a duplicate,
// beyond the window or finds no buffer; it reports whether it was new.
func (b *Bridge) admit(seq uint32, t []byte) bool {
	switch b.reorder.classify(seq) {
	case arrivalOld:
		b.ctr.Duplicates++
		b.ackNow = true
		return false
	case arrivalBeyond:
		b.ctr.OutOfWindow++
		b.ackNow = true
		return false
	case arrivalHeld:
		b.ctr.Duplicates++
		return false
	}
	slot := b.rxPool.get()
	if slot < 0 {
		b.ctr.RxOverruns++
		return false
	}
	copy(b.rxPool.bytes(slot, len(t)), t)
	b.reorder.store(seq, slot, len(t))
	return true
}

// drainReorder delivers consecutive TLPs from rcvNext while their class has
// room; a TLP that finds none stays unacknowledged and is sent again.
func (b *Bridge) drainReorder() {
	for {
		slot, n, ok := b.reorder.head()
		if !ok {
			return
		}
		v := tlp.View(b.rxPool.bytes(slot, n))
		k := v.Kind()
		c := k.Class()
		dc := v.DataCredits()
		if b.deliver[c].full() || !b.buffers.room(c, dc) {
			b.ctr.RxOverruns++
			return
		}
		b.reorder.advance()
		b.ctr.TLPsReceived++
		b.ctr.PayloadBytesRx += uint64(v.PayloadLen())
		b.buffers.hold(c, dc)
		switch c {
		case tlp.Completion:
			if !b.matchCompletion(v) {
				// Dropped: its buffer space is free again at once.
				b.rxPool.put(slot)
				b.creditReturn(c, 1, dc)
				continue
			}
		case tlp.NonPosted:
			e := &b.rxTags[v.Tag()]
			*e = tagEntry{state: tagActive, epoch: b.rxEpoch, wireReq: v.RequesterID()}
			setRequest(e, v)
			b.tr.inbound(v)
		default:
			b.tr.inbound(v)
		}
		fixECRC(v)
		m := b.deliver[c].grow() // not full: checked above
		m.fill(v, slot)
		m.order = b.rxOrder
		b.rxOrder++
	}
}

// matchCompletion matches a completion from the fabric with the request it
// answers, restores the requester's own tag and ID, and reports whether it
// is delivered (false: it matches nothing, or the request timed out).
func (b *Bridge) matchCompletion(v tlp.View) bool {
	w := v.Tag()
	t := &b.txTags
	if !t.owns(w) {
		b.ctr.UnmatchedCompletions++
		return false
	}
	e := &t.entries[w]
	switch account(e, v, e.wireReq, &b.ctr.ByteCountMismatches) {
	case cplNoMatch:
		b.ctr.UnmatchedCompletions++
		return false
	case cplLate:
		b.ctr.LateCompletions++
		if lastOfStale(e, v) {
			t.release(w)
		}
		return false
	case cplLast:
		v.SetRequesterID(e.origReq)
		v.SetTag(e.origTag)
		t.release(w)
		// A forged completion can end the tag of a request still
		// queued: pickNext drops that.
		b.idle = false
	default:
		v.SetRequesterID(e.origReq)
		v.SetTag(e.origTag)
	}
	v.SetCompleterID(b.tr.toLocal(v.CompleterID()))
	return true
}

// lastOfStale reports whether a late completion ends its request, so the
// quarantined tag can be reused.
func lastOfStale(e *tagEntry, v tlp.View) bool {
	if v.Status() != tlp.StatusSC || !v.HasData() {
		return true
	}
	carried := v.PayloadLen()
	if e.kind == tlp.MRd || e.kind == tlp.MRdLk {
		carried -= int(v.LowerAddress() & 3)
	}
	return carried >= v.ByteCount()
}

// renakAfter is how long a hole must persist before it is NAKed again.
func (b *Bridge) renakAfter() time.Duration {
	if !b.rtt.hasSample {
		return b.cfg.InitialRTO
	}
	return max(2*b.rtt.srtt, 2*b.cfg.AckDelay)
}
