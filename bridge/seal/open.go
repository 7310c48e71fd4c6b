package seal

import (
	"encoding/binary"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Open authenticates a sealed frame (from the dxpu header on; bytes after
// the body, such as Ethernet padding, are ignored) and returns its
// plaintext body, decrypted in place: a view into frame. The header stays
// as it came (SEALED set, sealed body length). A frame that fails changes
// no state of the channel (only a counter), but in ModeGCM its body bytes
// may have been overwritten.
//
// Checks, in order, each failure a *FrameError: header present (ErrShort),
// version 1 (ErrVersion), SEALED set (ErrNotSealed), body length at least
// Overhead (ErrShort; HandshakeOverhead under the handshake key) and
// within the frame (ErrBodyLength), the pair's mode
// and reserved bits clear (ErrMode, ErrReserved), session keys for session
// frames (ErrNoSession), a key for the epoch and generation
// (ErrUnknownEpoch), a packet number not seen and not left of the window
// (ErrReplayed), the tag (ErrAuth), and under the handshake key a HELLO,
// HELLO-ACK or RESET (ErrHandshakeType).
func (c *Channel) Open(frame []byte) ([]byte, error) {
	sealedLen, err := c.checkSealed(frame)
	if err != nil {
		return nil, err
	}
	kind := frame[offKind]
	pn := binary.BigEndian.Uint64(frame[offPN:])
	end := encap.HeaderLen + sealedLen
	var k *rxKey
	role := c.cfg.peerRole()
	hs := kind&kindHandshake != 0
	if hs {
		if sealedLen < HandshakeOverhead {
			c.ctr.Malformed++
			return nil, ferr(6, "dxpu.body_length", ErrShort, "sealed handshake body of %d bytes, the security header with boot ID and tag alone are %d", sealedLen, HandshakeOverhead)
		}
		if frame[offEpoch] != 0 || frame[offEcho] != 0 {
			c.ctr.Malformed++
			return nil, ferr(offEpoch, "seal.epoch/echo", ErrReserved, "handshake frame with epoch %d echo %d", frame[offEpoch], frame[offEcho])
		}
		if pk := c.keyFor(frame[offGen]); pk != nil {
			k = &pk.hsRx
		}
	} else {
		if !c.session {
			c.ctr.NoSession++
			return nil, errNoSessionOpen
		}
		k = c.rxFor(frame[offEpoch], frame[offGen])
	}
	if k == nil {
		c.ctr.UnknownEpoch++
		// No key of the frame's generation at all (rather than an epoch
		// this side has not derived): the peer holds another pair key.
		// Counted, not logged here: the owner reports it (rate-limited).
		if hs || c.keyFor(frame[offGen]) == nil {
			c.ctr.UnknownGeneration++
			c.ctr.LastUnknownGeneration = frame[offGen]
		}
		return nil, errUnknownFrame
	}
	// Handshake packet numbers come from the sender's clock and must grow:
	// a HELLO or RESET numbered below the newest is old, seen or not.
	if !k.win.fresh(pn) || (hs && k.win.any && pn <= k.win.newest) {
		c.ctr.Replayed++
		return nil, errReplayFrame
	}
	// A handshake frame's nonce holds the sender's boot ID, from its
	// security header (authenticated as additional data like the rest).
	nonce, ad, bodyAt := c.nonceBuf[:], adLen, offBody
	if hs {
		handshakeNonce(&c.hsNonce, role, frame[offBoot:offHSBody], pn)
		nonce, ad, bodyAt = c.hsNonce[:], adLenHS, offHSBody
	} else {
		sessionNonce(&c.nonceBuf, role, k.epoch, pn)
	}
	var body []byte
	if c.cfg.Mode == ModeGMAC {
		if _, err := k.aead.Open(nil, nonce, frame[end-TagLen:end], frame[:end-TagLen]); err != nil {
			c.ctr.AuthFailed++
			return nil, errAuthFrame
		}
		body = frame[bodyAt : end-TagLen]
	} else {
		ct := frame[bodyAt:end]
		if body, err = k.aead.Open(ct[:0], nonce, ct, frame[:ad]); err != nil {
			c.ctr.AuthFailed++
			return nil, errAuthFrame
		}
	}
	if hs {
		// Only this package's SealHandshake writes the handshake key, and
		// it refuses other messages: the peer is not running it.
		if err := handshakeBody(frame, body); err != nil {
			c.ctr.HandshakeRefused++
			return nil, err
		}
		k.win.mark(pn)
		k.opened++
		c.ctr.OpenedHandshake++
		c.sawPeerGen(k.gen)
		return body, nil
	}
	k.win.mark(pn)
	k.opened++
	c.ctr.Opened++
	c.afterOpen(k, frame[offEcho])
	c.sawPeerGen(k.gen)
	return body, nil
}

// sawPeerGen records the generation of the peer's latest authenticated
// frame; the one it used before may go.
func (c *Channel) sawPeerGen(gen uint32) {
	if c.peerGen != gen {
		c.peerGen = gen
		c.gcKeys()
	}
}

// OpenFrame is Open that also rewrites frame into the plain dxpu frame it
// was sealed from (SEALED clear, plaintext body length, body moved up to
// right after the header) and returns frame[:40+body length]: what a
// bridge's HandleFrame takes.
func (c *Channel) OpenFrame(frame []byte) ([]byte, error) {
	body, err := c.Open(frame)
	if err != nil {
		return nil, err
	}
	n := copy(frame[encap.HeaderLen:], body)
	frame[0] &^= FlagSealed
	binary.BigEndian.PutUint16(frame[6:], uint16(n))
	return frame[:encap.HeaderLen+n], nil
}

// checkSealed validates the clear parts of a sealed frame and returns the
// sealed body length.
func (c *Channel) checkSealed(frame []byte) (int, error) {
	if len(frame) < encap.HeaderLen {
		c.ctr.Malformed++
		return 0, ferr(0, "dxpu.header", ErrShort, "%d bytes, the header alone is %d", len(frame), encap.HeaderLen)
	}
	h := encap.Header(frame)
	if h.Version() != encap.Version {
		c.ctr.Malformed++
		return 0, ferr(0, "dxpu.version", ErrVersion, "version %d", h.Version())
	}
	if h.Flags()&FlagSealed == 0 {
		c.ctr.NotSealed++
		return 0, errNotSealedFrm
	}
	n := h.BodyLen()
	if n < Overhead {
		c.ctr.Malformed++
		return 0, ferr(6, "dxpu.body_length", ErrShort, "sealed body of %d bytes, the security header and tag alone are %d", n, Overhead)
	}
	if encap.HeaderLen+n > len(frame) {
		c.ctr.Malformed++
		return 0, ferr(6, "dxpu.body_length", ErrBodyLength, "header says %d body bytes, frame has %d", n, len(frame)-encap.HeaderLen)
	}
	kind := frame[offKind]
	if Mode(kind&kindModeMask) != c.cfg.Mode {
		c.ctr.Malformed++
		return 0, ferr(offKind, "seal.kind", ErrMode, "frame is %v, the pair uses %v", Mode(kind&kindModeMask), c.cfg.Mode)
	}
	if kind&kindReserved != 0 {
		c.ctr.Malformed++
		return 0, ferr(offKind, "seal.kind", ErrReserved, "kind byte %#02x", kind)
	}
	return n, nil
}

func handshakeBody(frame, body []byte) error {
	h := encap.Header(frame)
	if h.Type() != encap.MsgControl {
		return ferr(1, "dxpu.type", ErrHandshakeType, "%v frame", h.Type())
	}
	if len(body) < 1 {
		return ferr(offHSBody, "control.type", ErrHandshakeType, "empty control body")
	}
	switch t := encap.ControlType(body[0]); t {
	case encap.CtlHello, encap.CtlHelloAck, encap.CtlReset:
		return nil
	default:
		return ferr(offHSBody, "control.type", ErrHandshakeType, "%v", t)
	}
}

// rxFor finds the receive key a session frame names.
func (c *Channel) rxFor(epoch, gen byte) *rxKey {
	if c.cur != nil && byte(c.cur.epoch) == epoch && byte(c.cur.gen) == gen {
		return c.cur
	}
	for _, s := range c.nexts {
		if s != nil && byte(s.epoch) == epoch && byte(s.gen) == gen {
			return s
		}
	}
	if c.prev != nil && byte(c.prev.epoch) == epoch && byte(c.prev.gen) == gen {
		return c.prev
	}
	return nil
}

// afterOpen moves the key state on an authenticated session frame: a
// frame under a next key makes it current (the old current becomes
// previous), the previous key retires after its grace of frames (Tick
// retires it after its grace of time), and the peer's echo (the oldest
// epoch it still opens) tells the sender whether it may move on.
func (c *Channel) afterOpen(k *rxKey, echo byte) {
	if echo == byte(c.tx.epoch) {
		c.peerHolds = true
	}
	if k != c.cur && k != c.prev {
		c.prev, c.cur, c.curSince = c.cur, k, c.now
		c.nexts = [maxNexts]*rxKey{}
		c.rotated = true
		c.ctr.RxRotations++
		if k.gen == c.newest.gen && c.active != c.newest {
			c.activate() // the peer has the new generation: follow it
		}
		c.gcKeys()
		c.deriveNexts()
		return
	}
	if k == c.cur && c.prev != nil && c.cur.opened >= c.cfg.PreviousGrace {
		c.retirePrevious()
	}
}
