package seal

import (
	"crypto/cipher"
	"encoding/binary"
	"slices"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Seal appends the sealed form of frame (a plain dxpu frame: the 40-byte
// header and exactly BodyLen body bytes) to dst and returns the extended
// slice; it allocates nothing when dst has room for len(frame)+Overhead
// more bytes. frame must not overlap dst's spare capacity. The sender
// moves to a new epoch first when RekeyAfter frames were sealed under the
// current key, Rekey was called or a newer generation became active, and
// the peer's echo shows it opens nothing older than the current epoch.
func (c *Channel) Seal(dst, frame []byte) ([]byte, error) {
	n, err := checkPlain(frame)
	if err != nil {
		c.ctr.Malformed++
		return dst, err
	}
	if !c.session {
		c.ctr.NoSession++
		return dst, ferr(1, "dxpu.type", ErrNoSession, "%v frame before StartSession; only SealHandshake works now", encap.Header(frame).Type())
	}
	if err := c.maybeRekey(); err != nil {
		return dst, err
	}
	if c.tx.sent >= 2*c.cfg.RekeyAfter {
		c.ctr.Exhausted++
		return dst, ferr(offPN, "seal.packet_number", ErrKeyExhausted, "%d frames under epoch %d and the peer never showed it holds it", c.tx.sent, c.tx.epoch)
	}
	pn := c.tx.sent
	c.tx.sent++
	c.ctr.Sealed++
	sessionNonce(&c.nonceBuf, c.cfg.Role, c.tx.epoch, pn)
	return c.sealWith(dst, frame, n, byte(c.tx.epoch), 0, c.echo(), byte(c.tx.gen), pn, c.tx.aead), nil
}

// SealHandshake seals a HELLO, HELLO-ACK or RESET control frame under the
// handshake key, which needs no session. clock is the caller's wall clock
// in nanoseconds (any scale that only grows, also across restarts of this
// side): the packet number is the larger of it and the last one plus one,
// so a restarted sender still numbers above everything it sent before and
// the peer's replay window rejects old HELLOs and RESETs. The nonce does
// not rely on the clock: it holds the channel's random boot ID, which the
// frame carries (HandshakeOverhead bytes more than the plain frame), so a
// clock set back between two boots repeats no nonce under a static key.
func (c *Channel) SealHandshake(dst, frame []byte, clock uint64) ([]byte, error) {
	n, err := checkPlain(frame)
	if err != nil {
		c.ctr.Malformed++
		return dst, err
	}
	if n > 0xffff-HandshakeOverhead {
		c.ctr.Malformed++
		return dst, ferr(6, "dxpu.body_length", ErrTooLong, "%d body bytes + %d overhead > 65535", n, HandshakeOverhead)
	}
	if err := handshakeAllowed(frame, n); err != nil {
		c.ctr.HandshakeRefused++
		return dst, err
	}
	pn := max(c.hsNext, clock)
	if pn == ^uint64(0) {
		c.ctr.Exhausted++
		return dst, ferr(offPN, "seal.packet_number", ErrKeyExhausted, "handshake packet numbers used up")
	}
	c.hsNext = pn + 1
	c.ctr.SealedHandshake++
	handshakeNonce(&c.hsNonce, c.cfg.Role, c.boot[:], pn)
	return c.sealWith(dst, frame, n, 0, kindHandshake, 0, byte(c.active.gen), pn, c.active.hsTx), nil
}

// BootID returns the random ID this channel carries in its handshake
// frames (and their nonces): drawn once, in New.
func (c *Channel) BootID() [BootIDLen]byte { return c.boot }

// echo is what this side tells the peer about its receive keys: the
// oldest epoch it still opens. The peer moves on only when that is its
// current epoch, so it never starts epoch e+2 while this side still waits
// for stragglers of epoch e, and reordering within the grace loses nothing.
func (c *Channel) echo() byte {
	switch {
	case c.prev != nil:
		return byte(c.prev.epoch)
	case c.cur != nil:
		return byte(c.cur.epoch)
	}
	return 0
}

// maybeRekey moves the sender to the next epoch when one is due and the
// peer's echo allows it.
func (c *Channel) maybeRekey() error {
	if !c.peerHolds || (!c.rekeyWanted && c.tx.sent < c.cfg.RekeyAfter) {
		return nil
	}
	if c.tx.epoch == ^uint32(0) {
		c.ctr.Exhausted++
		return ferr(offEpoch, "seal.epoch", ErrKeyExhausted, "epoch space of the session used up: start a new session")
	}
	aead, err := expandAEAD(c.active.prk, c.cfg.Role, c.cfg.Mode, c.tx.epoch+1)
	if err != nil {
		return err
	}
	c.tx = txKey{aead: aead, gen: c.active.gen, epoch: c.tx.epoch + 1}
	c.rekeyWanted, c.peerHolds = false, false
	c.ctr.TxRekeys++
	return nil
}

// sealWith writes header, security header, body and tag after dst; the
// nonce is in c.nonceBuf, or for the handshake key (kind) in c.hsNonce,
// and a handshake frame's security header ends with the boot ID.
func (c *Channel) sealWith(dst, frame []byte, n int, epoch, kind, echo, gen byte, pn uint64, aead cipher.AEAD) []byte {
	ad, over, nonce := adLen, Overhead, c.nonceBuf[:]
	if kind&kindHandshake != 0 {
		ad, over, nonce = adLenHS, HandshakeOverhead, c.hsNonce[:]
	}
	start := len(dst)
	dst = slices.Grow(dst, ad+n+TagLen)
	dst = dst[:start+ad]
	hdr := dst[start:]
	copy(hdr, frame[:encap.HeaderLen])
	hdr[0] |= FlagSealed
	binary.BigEndian.PutUint16(hdr[6:], uint16(n+over))
	hdr[offEpoch] = epoch
	hdr[offKind] = kind | byte(c.cfg.Mode)
	hdr[offEcho] = echo
	hdr[offGen] = gen
	binary.BigEndian.PutUint64(hdr[offPN:], pn)
	if ad == adLenHS {
		copy(hdr[offBoot:], c.boot[:])
	}
	body := frame[encap.HeaderLen : encap.HeaderLen+n]
	if c.cfg.Mode == ModeGMAC {
		dst = append(dst, body...)
		return aead.Seal(dst, nonce, nil, dst[start:])
	}
	return aead.Seal(dst, nonce, body, dst[start:start+ad])
}

// checkPlain validates a plain frame for sealing and returns its body
// length.
func checkPlain(frame []byte) (int, error) {
	if len(frame) < encap.HeaderLen {
		return 0, ferr(0, "dxpu.header", ErrShort, "%d bytes, the header alone is %d", len(frame), encap.HeaderLen)
	}
	h := encap.Header(frame)
	if h.Version() != encap.Version {
		return 0, ferr(0, "dxpu.version", ErrVersion, "version %d", h.Version())
	}
	if h.Flags()&FlagSealed != 0 {
		return 0, ferr(0, "dxpu.flags", ErrAlreadySealed, "flags %#x", h.Flags())
	}
	n := h.BodyLen()
	if encap.HeaderLen+n != len(frame) {
		return 0, ferr(6, "dxpu.body_length", ErrBodyLength, "header says %d body bytes, frame has %d", n, len(frame)-encap.HeaderLen)
	}
	if n > MaxBody {
		return 0, ferr(6, "dxpu.body_length", ErrTooLong, "%d body bytes + %d overhead > 65535", n, Overhead)
	}
	return n, nil
}

// handshakeAllowed admits HELLO, HELLO-ACK and RESET control messages,
// the only ones a side without session keys needs to send.
func handshakeAllowed(frame []byte, n int) error {
	h := encap.Header(frame)
	if h.Type() != encap.MsgControl {
		return ferr(1, "dxpu.type", ErrHandshakeType, "%v frame", h.Type())
	}
	if n < 1 {
		return ferr(encap.HeaderLen, "control.type", ErrHandshakeType, "empty control body")
	}
	switch t := encap.ControlType(frame[encap.HeaderLen]); t {
	case encap.CtlHello, encap.CtlHelloAck, encap.CtlReset:
		return nil
	default:
		return ferr(encap.HeaderLen, "control.type", ErrHandshakeType, "%v", t)
	}
}
