package bridge

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

func (b *Bridge) dropFrame(format string, args ...any) error {
	b.ctr.FramesDropped++
	return fmt.Errorf("%w: %s", ErrFrame, fmt.Sprintf(format, args...))
}

// HandleFrame takes one frame from the fabric, from the dxpu header on. The
// bytes are not kept. Frames that are malformed, for another pair, stale or
// out of protocol are dropped with an error wrapping ErrFrame (counted in
// FramesDropped); nothing in them takes effect.
func (b *Bridge) HandleFrame(now time.Duration, frame []byte) error {
	b.HandleTimeout(now)
	now = b.now
	if len(frame) < encap.HeaderLen {
		return b.dropFrame("%d bytes, shorter than the %d-byte header", len(frame), encap.HeaderLen)
	}
	h := encap.Header(frame)
	if h.Version() != encap.Version {
		return b.dropFrame("byte 0: version %d, want %d", h.Version(), encap.Version)
	}
	if h.PairID() != b.cfg.PairID {
		return b.dropFrame("bytes 2-4: pair %#x, this bridge serves %#x", h.PairID(), b.cfg.PairID)
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
		if b.state == StateUp && c.Session == b.peerSession && c.Role != b.cfg.Role {
			// KEEPALIVE and its ACK refresh acks and credits: they are
			// the probe that unblocks a sender whose update was lost.
			if err := b.headerFields(now, h, t); err != nil {
				return err
			}
			if c.Type == encap.CtlKeepaliveAck && b.probeOut && c.Probe == b.probeSeq && h.Flags()&encap.FlagAck != 0 {
				b.onProbeAck(h.Ack())
			}
		}
		if err := b.handleControl(now, &c); err != nil {
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
	b.ctr.BytesReceived += uint64(len(frame))
	return nil
}

// headerFields applies the ack, SACK and credit fields of the header.
func (b *Bridge) headerFields(now time.Duration, h encap.Header, t encap.MsgType) error {
	if h.Flags()&encap.FlagAck != 0 && seqLT(b.sndNxt, h.Ack()) {
		return b.dropFrame("bytes 12-15: ack %#x beyond the next sequence number %#x", h.Ack(), b.sndNxt)
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

func (b *Bridge) handleControl(now time.Duration, c *encap.Control) error {
	if c.Role == b.cfg.Role {
		return b.dropFrame("control: peer has the same role %v", c.Role)
	}
	switch c.Type {
	case encap.CtlHello, encap.CtlHelloAck:
		if b.state == StateUp {
			if c.Session == b.peerSession {
				if c.Type == encap.CtlHello {
					b.helloAckPending = true // it missed our echo
				}
				return nil
			}
			b.goDown(now, "peer restarted its session", 0)
		}
		if !b.peerKnown || c.Session != b.peerSession {
			b.peerSession, b.peerKnown, b.peer = c.Session, true, *c
			b.rcvNext = c.ISN
			for i, s := range b.reorder {
				if s >= 0 {
					b.rxPool.put(s)
					b.reorder[i] = -1
				}
			}
			b.reorderHeld = 0
		}
		b.helloAckPending = true
		if c.PeerSession == b.session {
			b.goUp(now)
		}
	case encap.CtlKeepalive:
		if b.state == StateUp && c.Session == b.peerSession {
			b.kaAckPending, b.kaAckProbe = true, c.Probe
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
	b.effWindow = uint32(min(int(p.Window), b.cfg.Window))
	if b.txTags.inUse() == 0 {
		base, _ := tagSpace(int(p.TagBits))
		if uint16(base) != b.txTags.base {
			b.txTags = newTagTable(int(p.TagBits), b.cfg.MaxOutstanding)
		}
	}
	b.peerLimit = p.Credits
	b.peerCap = p.Credits
	b.peerInf = p.Infinite
	b.consumed = [encap.NumCreditTypes]uint32{}
	b.pushEvent(Event{Kind: EventLinkUp, Session: b.session})
}

// onCredits takes the peer's cumulative limits; frames may arrive out of
// order, so a limit only ever moves forward. A limit can never run further
// ahead of what this side consumed than the peer's buffers hold (its HELLO
// credits): one that does is corrupt or forged, and accepting it would be
// permanent, since later true limits would look like steps back.
func (b *Bridge) onCredits(h encap.Header) {
	for t := encap.CreditType(0); t < encap.NumCreditTypes; t++ {
		l := h.CreditLimit(t)
		if t == encap.CreditPH || t == encap.CreditNPH || t == encap.CreditCplH {
			if int16(uint16(l)-uint16(b.peerLimit[t])) <= 0 {
				continue
			}
			if b.peerInf&(1<<t) == 0 && uint16(l)-uint16(b.consumed[t]) > uint16(b.peerCap[t]) {
				b.ctr.BogusCredits++
				continue
			}
			b.peerLimit[t] = b.peerLimit[t]&^0xffff | l
		} else if int32(l-b.peerLimit[t]) > 0 {
			if b.peerInf&(1<<t) == 0 && l-b.consumed[t] > b.peerCap[t] {
				b.ctr.BogusCredits++
				continue
			}
			b.peerLimit[t] = l
		}
	}
}

// onAck frees acknowledged TLPs, samples the RTT from TLPs sent once, and
// marks for retransmission every TLP that at least three later
// transmissions overtook (RACK-style: reordering alone rarely trips it).
func (b *Bridge) onAck(now time.Duration, ack, sack uint32, nak bool) {
	var sample time.Duration = -1
	prevMax := b.maxAckedTxOrder
	progress := false
	for ; seqLT(b.sndUna, ack); b.sndUna++ {
		e := &b.replay[b.sndUna&b.mask]
		if e.txCount == 1 && !e.sacked {
			sample = now - e.sentAt
		}
		if b.plausible(now, e) {
			b.maxAckedTxOrder = max(b.maxAckedTxOrder, e.txOrder)
		}
		if e.needRetx {
			b.retxCount--
		}
		b.txPool.put(e.slot)
		*e = replayEntry{}
		progress = true
	}
	for i := 0; sack != 0 && i < 32; i++ {
		if sack&(1<<i) == 0 {
			continue
		}
		s := ack + 1 + uint32(i)
		if !seqLT(s, b.sndNxt) {
			break
		}
		if seqLT(s, b.sndUna) {
			continue // a stale ack: that TLP is acknowledged and its entry reused
		}
		e := &b.replay[s&b.mask]
		if e.sacked {
			continue
		}
		e.sacked = true
		if e.txCount == 1 {
			sample = now - e.sentAt
		}
		if b.plausible(now, e) {
			b.maxAckedTxOrder = max(b.maxAckedTxOrder, e.txOrder)
		}
		if e.needRetx {
			e.needRetx = false
			b.retxCount--
		}
	}
	if sample >= 0 {
		b.rtt.sample(sample)
	}
	if progress {
		if b.sndUna == b.sndNxt {
			b.rtoDeadline = noDeadline
		} else {
			b.rtoDeadline = now + b.rtt.rto
		}
	}
	if nak && b.sndUna == ack && ack != b.sndNxt {
		// The receiver holds later TLPs behind a hole at ack: resend the
		// frame that carried it (TLPs sent together with it), unless it
		// went out again less than half an RTT ago.
		first := &b.replay[ack&b.mask]
		if !first.sacked && !first.needRetx && now-first.sentAt >= b.rtt.srtt/2 {
			sentAt := first.sentAt
			for s := ack; s != b.sndNxt; s++ {
				e := &b.replay[s&b.mask]
				if e.sacked || e.sentAt != sentAt {
					break
				}
				if !e.needRetx {
					e.needRetx = true
					b.retxCount++
				}
			}
		}
	}
	if b.maxAckedTxOrder > prevMax || nak {
		// Only what the SACK bitmap covers can be judged: the receiver
		// may hold TLPs beyond it without saying so.
		end := ack + 33
		for s := b.sndUna; s != b.sndNxt && seqLT(s, end); s++ {
			e := &b.replay[s&b.mask]
			if e.sacked || e.needRetx {
				continue
			}
			if e.txOrder+3 <= b.maxAckedTxOrder {
				e.needRetx = true
				b.retxCount++
			} else if e.txCount == 1 {
				// First transmissions go out in sequence order, and a
				// retransmission is newer than every first transmission
				// before it: nothing further on can qualify.
				break
			}
		}
	}
}

// plausible reports whether the acknowledgement of e can be for its latest
// transmission: an ack arriving sooner than the smallest RTT seen after a
// retransmission answers an earlier copy, and taking the retransmission's
// order for it would declare everything sent in between lost.
func (b *Bridge) plausible(now time.Duration, e *replayEntry) bool {
	return e.txCount == 1 || now-e.sentAt >= b.rtt.minRTT
}

// onTLPs stores the new TLPs of a validated frame in the reorder buffer and
// moves the in-order prefix to the class queues.
func (b *Bridge) onTLPs(now time.Duration, h encap.Header, body []byte) {
	n := h.Count()
	off := 2 * n
	fresh := false
	for i := 0; i < n; i++ {
		l := int(h.TLPLen(i))
		t := body[off : off+l]
		off += l
		seq := h.Seq() + uint32(i)
		if seqLT(seq, b.rcvNext) {
			b.ctr.Duplicates++
			b.ackNow = true
			continue
		}
		d := seq - b.rcvNext
		if d >= uint32(len(b.reorder)) {
			b.ctr.OutOfWindow++
			b.ackNow = true
			continue
		}
		idx := seq & b.mask
		if b.reorder[idx] >= 0 {
			b.ctr.Duplicates++
			continue
		}
		slot := b.rxPool.get()
		if slot < 0 {
			b.ctr.RxOverruns++
			continue
		}
		copy(b.rxPool.bytes(slot, l), t)
		b.reorder[idx], b.reorderN[idx] = slot, uint16(l)
		b.reorderHeld++
		fresh = true
	}
	b.drainReorder()
	if fresh && b.reorderHeld > 0 && b.reorder[b.rcvNext&b.mask] < 0 &&
		(!b.nakSent || b.nakFor != b.rcvNext || now-b.nakAt >= b.renakAfter()) {
		// New TLPs wait behind a hole: tell the sender at once; again for
		// the same hole only after two RTTs, in case the retransmission
		// was lost too (the SACK bits of every frame keep it informed).
		b.nakPending, b.nakSent, b.nakFor, b.nakAt = true, true, b.rcvNext, now
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

// drainReorder delivers consecutive TLPs from rcvNext while their class has
// room; a TLP that finds none stays unacknowledged and is sent again.
func (b *Bridge) drainReorder() {
	for {
		idx := b.rcvNext & b.mask
		slot := b.reorder[idx]
		if slot < 0 {
			return
		}
		v := tlp.View(b.rxPool.bytes(slot, int(b.reorderN[idx])))
		k := v.Kind()
		c := k.Class()
		dc := v.DataCredits()
		if b.deliver[c].full() ||
			(b.capData[c] != 0 && b.heldData[c]+dc > b.capData[c]) ||
			(b.advInf&(1<<hdrType(c)) == 0 && b.heldHdr[c] >= b.capHdr[c]) {
			b.ctr.RxOverruns++
			return
		}
		b.reorder[idx] = -1
		b.reorderHeld--
		b.rcvNext++
		b.ctr.TLPsReceived++
		b.ctr.PayloadBytesRx += uint64(v.PayloadLen())
		b.heldHdr[c]++
		b.heldData[c] += dc
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
		m := metaOf(v, slot)
		m.order = b.rxOrder
		b.rxOrder++
		b.deliver[c].push(m)
	}
}

// matchCompletion matches a completion from the fabric with the request it
// answers, restores the requester's own tag and ID, and reports whether it
// is delivered (false: it matches nothing, or the request timed out).
func (b *Bridge) matchCompletion(v tlp.View) bool {
	w := v.Tag()
	t := &b.txTags
	if int(w) < int(t.base) || int(w) >= int(t.base)+len(t.free.buf) {
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
