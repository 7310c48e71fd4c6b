package bridge

import (
	"encoding/binary"
	"time"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// NextFrame writes the next frame to send into buf (from the dxpu header
// on; buf must hold MTU bytes) and returns its length, or 0 when nothing is
// due. Call it until it returns 0 after every input and at every deadline.
// In order of priority: link control (RESET, HELLO, HELLO-ACK,
// KEEPALIVE-ACK), retransmissions, new TLPs batched up to the MTU, then a
// standalone NAK, ACK or credit update, then KEEPALIVE. A keyed bridge
// builds the frame within MTU less seal.Overhead and seals it last.
func (b *Bridge) NextFrame(now time.Duration, buf []byte) int {
	b.HandleTimeout(now)
	now = b.now
	if len(buf) < b.cfg.MTU {
		return 0
	}
	buf = buf[:b.cfg.MTU]
	var n int
	if b.keys.ch == nil {
		n = b.nextFrame(now, buf)
	} else if n = b.nextFrame(now, b.keys.plain); n > 0 {
		if n = b.sealInto(now, buf, n); n == 0 {
			// Refused and lost: it still counts as sent for the
			// keepalive timer, or the next call would build another.
			b.lastSent = now
		}
	}
	if n > 0 {
		b.lastSent = now
		b.ctr.FramesSent++
		b.ctr.BytesSent += uint64(n)
	}
	return n
}

func (b *Bridge) nextFrame(now time.Duration, buf []byte) int {
	if b.resetPending && now-b.lastResetSent >= b.cfg.HelloInterval/4 {
		b.resetPending = false
		b.lastResetSent = now
		return b.control(buf, encap.Control{Type: encap.CtlReset, Reason: b.resetReason, PeerSession: b.resetEcho})
	}
	if b.state != StateUp {
		if b.helloAckPending {
			b.helloAckPending = false
			return b.control(buf, b.hello(encap.CtlHelloAck))
		}
		if now >= b.helloDue {
			b.helloDue = now + b.cfg.HelloInterval
			return b.control(buf, b.hello(encap.CtlHello))
		}
		return 0
	}
	if b.helloAckPending {
		b.helloAckPending = false
		return b.control(buf, b.hello(encap.CtlHelloAck))
	}
	if probe, ok := b.kaAcks.next(); ok {
		return b.control(buf, encap.Control{Type: encap.CtlKeepaliveAck, PeerSession: b.peerSession, Probe: probe})
	}
	if b.probePending {
		b.probePending = false
		b.probesOut.add(b.probeSeq, b.retx.txOrder)
		b.ctr.KeepalivesSent++
		return b.control(buf, encap.Control{Type: encap.CtlKeepalive, PeerSession: b.peerSession, Probe: b.probeSeq})
	}
	if n := b.tlpFrame(now, buf); n > 0 {
		return n
	}
	if b.nakPending {
		b.ctr.NaksSent++
		return b.bare(buf, encap.MsgNak)
	}
	if b.ackPending && (b.ackNow || now >= b.ackDeadline) {
		b.ctr.AcksSent++
		return b.bare(buf, encap.MsgAck)
	}
	if b.creditDirty && now >= b.creditDue {
		return b.bare(buf, encap.MsgCredit)
	}
	if b.probing() && now-b.lastProbe >= b.rtt.rto {
		b.lastProbe = now
		b.ctr.KeepalivesSent++
		return b.control(buf, encap.Control{Type: encap.CtlKeepalive, PeerSession: b.peerSession})
	}
	if now-b.lastSent >= b.cfg.Keepalive {
		b.ctr.KeepalivesSent++
		return b.control(buf, encap.Control{Type: encap.CtlKeepalive, PeerSession: b.peerSession})
	}
	return 0
}

func (b *Bridge) hello(t encap.ControlType) encap.Control {
	c := encap.Control{
		Type:        t,
		TagBits:     uint8(b.cfg.TagBits),
		PeerSession: b.peerSession,
		Window:      uint16(min(b.cfg.Window, 1<<15)),
		MaxTLP:      uint16(b.cfg.maxTLP()),
		ISN:         b.retx.nxt,
		Infinite:    b.buffers.infinite,
		Credits:     b.buffers.base,
	}
	return c
}

// header writes the fixed header; once up, every frame carries the
// cumulative ack, the SACK bitmap and the credit limits, which clears any
// pending standalone ack or credit update.
func (b *Bridge) header(buf []byte, t encap.MsgType, count, bodyLen int, seq uint32) {
	h := encap.Header(buf[:encap.HeaderLen])
	clear(h)
	var flags uint8
	if b.state == StateUp {
		flags = encap.FlagAck | encap.FlagCredit
		if sack := b.reorder.sack(); sack != 0 {
			flags |= encap.FlagSack
			h.SetSack(sack)
		}
		h.SetAck(b.reorder.next)
		for ct := encap.CreditType(0); ct < encap.NumCreditTypes; ct++ {
			h.SetCreditLimit(ct, b.buffers.limit(ct), b.buffers.isInfinite(ct))
		}
		b.ackPending, b.ackNow, b.nakPending, b.creditDirty = false, false, false, false
		b.framesUnacked = 0
	}
	h.SetVersionFlags(encap.Version, flags)
	h.SetType(t)
	h.SetPairID(b.cfg.PairID)
	h.SetCount(count)
	h.SetBodyLen(bodyLen)
	h.SetSeq(seq)
}

func (b *Bridge) bare(buf []byte, t encap.MsgType) int {
	b.header(buf, t, 0, 0, b.retx.nxt)
	return encap.HeaderLen
}

func (b *Bridge) control(buf []byte, c encap.Control) int {
	c.Role = b.cfg.Role
	c.Session = b.session
	n, err := c.Put(buf[encap.HeaderLen:])
	if err != nil {
		return 0
	}
	if b.keys.ch != nil && (c.Type == encap.CtlHello || c.Type == encap.CtlHelloAck) {
		// Keyed: the key nonce follows the 40-byte message (receivers
		// that parse only those ignore it).
		n += copy(buf[encap.HeaderLen+n:], b.keys.nonce[:])
	}
	b.header(buf, encap.MsgControl, 0, n, b.retx.nxt)
	return encap.HeaderLen + n
}

// tlpFrame sends the oldest run of TLPs marked for retransmission, or else
// as many new TLPs as the window, the credits, the ordering rules and the
// MTU allow. A frame carries consecutive sequence numbers.
func (b *Bridge) tlpFrame(now time.Duration, buf []byte) int {
	var first uint32
	var n, size int
	if b.retx.marked > 0 {
		first, n, size = b.resendRun(now, len(buf))
	} else {
		first, n, size = b.sendNew(now, len(buf))
	}
	if n == 0 {
		return 0
	}
	b.header(buf, encap.MsgTLP, n, size-encap.HeaderLen, first)
	off := encap.HeaderLen + 2*n
	for i := 0; i < n; i++ {
		e := b.retx.at(first + uint32(i))
		binary.BigEndian.PutUint16(buf[encap.HeaderLen+2*i:], e.n)
		off += copy(buf[off:], b.txPool.bytes(e.slot, int(e.n)))
	}
	if b.rtoDeadline == noDeadline {
		b.rtoDeadline = now + b.rtt.rto
	}
	return size
}

// resendRun picks the oldest run of consecutive TLPs marked for
// retransmission that fits mtu: its first sequence number, its length and
// the frame size.
func (b *Bridge) resendRun(now time.Duration, mtu int) (first uint32, n, size int) {
	q := &b.retx
	size = encap.HeaderLen
	first = q.firstMarked()
	for s := first; s != q.nxt && n < encap.MaxTLPs; s++ {
		e := q.at(s)
		if !e.needRetx || size+2+int(e.n) > mtu {
			break
		}
		q.resend(e, now)
		b.ctr.Retransmits++
		size += 2 + int(e.n)
		n++
	}
	if n == 0 { // inconsistent count; never loop on it
		q.marked = 0
	}
	return first, n, size
}

// sendNew moves as many queued TLPs as the window, the credits, the
// ordering rules and mtu allow into the retransmit queue: the first
// sequence number, the count and the frame size.
func (b *Bridge) sendNew(now time.Duration, mtu int) (first uint32, n, size int) {
	q := &b.retx
	size = encap.HeaderLen
	first = q.nxt
	for n < encap.MaxTLPs && q.canSend() && !b.idle {
		c, idx := b.pickNext()
		if c < 0 {
			b.idle = true
			break
		}
		m := b.pending[c].at(idx)
		if size+2+int(m.n) > mtu {
			break
		}
		b.credits.consume(m.class, dataUnits(m))
		q.push(m, now)
		b.ctr.TLPsSent++
		b.ctr.PayloadBytesTx += uint64(m.payload)
		size += 2 + int(m.n)
		n++
		b.pendingBytes -= 2 + int(m.n)
		b.pending[c].drop(idx)
	}
	return first, n, size
}

// buildSynth renders a synthesized completion into the scratch buffer.
func (b *Bridge) buildSynth(s *synthCpl) tlp.View {
	v := tlp.View(b.synthBuf[:])
	clear(v)
	v[0] = 0x0A // Cpl, 3 DW, no data
	v.SetTag(s.tag)
	v.SetCompleterID(s.completer)
	v.SetRequesterID(s.req)
	bc := s.bc
	if bc >= 4096 || bc <= 0 {
		bc = 0 // 4096 encodes as 0; a zero count cannot occur
	}
	v[6] = byte(s.status)<<5 | byte(bc>>8)&0xf
	v[7] = byte(bc)
	v[11] = s.la & 0x7f
	return v
}
