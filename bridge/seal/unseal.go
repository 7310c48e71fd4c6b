package seal

import (
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Reasons an Unsealer cannot open a frame, matched with errors.Is.
var (
	// ErrNoSecret: the key log holds no secret of the frame's pair and
	// generation (of its kind: handshake or session).
	ErrNoSecret = errors.New("no key log secret for the pair and generation")
	// ErrNoSecretOpens: secrets of the pair and generation exist but none
	// authenticates the frame (a session not in the log, an altered frame).
	ErrNoSecretOpens = errors.New("no key log secret opens the frame")
)

// Unsealer opens captured sealed frames with the secrets of a key log,
// offline: it keeps no replay window (a capture may hold a frame twice)
// and tries every secret of the frame's pair and generation, both sender
// roles, and for session frames the epoch nearest the last one that
// opened under that secret and role (the frame carries the epoch's low 8
// bits). It is not safe for concurrent use.
type Unsealer struct {
	secrets []Secret
	aeads   map[unsealKey]cipher.AEAD
	epochs  map[unsealKey]uint32 // last full epoch opened per secret and role (epoch field unused)
	nb      [12]byte
	hnb     [HandshakeNonceLen]byte
	buf     []byte
}

type unsealKey struct {
	secret int
	role   encap.Role
	mode   Mode
	epoch  uint32
}

// NewUnsealer returns an Unsealer holding secrets (ReadKeyLog's).
func NewUnsealer(secrets []Secret) *Unsealer {
	return &Unsealer{secrets: secrets, aeads: map[unsealKey]cipher.AEAD{}, epochs: map[unsealKey]uint32{}}
}

// Opened tells who sealed a frame Unseal opened and under what.
type Opened struct {
	Role       encap.Role // the sender
	Generation uint32
	Epoch      uint32 // 0 under the handshake key
	Handshake  bool
	Mode       Mode
}

// Unseal opens a sealed dxpu frame (from the dxpu header on; bytes after
// the body are ignored) and appends the plain frame it was sealed from
// to dst: SEALED clear, the plaintext body length, the body in clear.
// frame is not modified. A frame that fails is a *FrameError wrapping
// ErrNoSecret, ErrNoSecretOpens or the error of a malformed sealed frame
// (ErrShort, ErrVersion, ErrNotSealed, ErrBodyLength, ErrMode,
// ErrReserved).
func (u *Unsealer) Unseal(dst, frame []byte) ([]byte, Opened, error) {
	n, err := checkSealedOffline(frame)
	if err != nil {
		return dst, Opened{}, err
	}
	h := encap.Header(frame)
	pair, genByte, kind := h.PairID(), frame[offGen], frame[offKind]
	hs := kind&kindHandshake != 0
	mode := Mode(kind & kindModeMask)
	pn := binary.BigEndian.Uint64(frame[offPN:])
	end := encap.HeaderLen + n
	if hs && n < HandshakeOverhead {
		return dst, Opened{}, ferr(6, "dxpu.body_length", ErrShort, "sealed handshake body of %d bytes, the security header with boot ID and tag alone are %d", n, HandshakeOverhead)
	}
	candidates := false
	for i := range u.secrets {
		s := &u.secrets[i]
		if s.PairID != pair || byte(s.Generation) != genByte || s.Handshake != hs {
			continue
		}
		candidates = true
		for _, role := range [2]encap.Role{encap.RoleHost, encap.RoleGPU} {
			var epoch uint32
			if !hs {
				epoch = nearEpoch(u.epochs[unsealKey{secret: i, role: role}], frame[offEpoch])
			}
			aead, err := u.aead(i, role, mode, epoch)
			if err != nil {
				return dst, Opened{}, err
			}
			nb, ad, bodyAt := u.nb[:], adLen, offBody
			if hs {
				handshakeNonce(&u.hnb, role, frame[offBoot:offHSBody], pn)
				nb, ad, bodyAt = u.hnb[:], adLenHS, offHSBody
			} else {
				sessionNonce(&u.nb, role, epoch, pn)
			}
			var body []byte
			if mode == ModeGMAC {
				if _, err := aead.Open(nil, nb, frame[end-TagLen:end], frame[:end-TagLen]); err != nil {
					continue
				}
				body = frame[bodyAt : end-TagLen]
			} else {
				body, err = aead.Open(u.buf[:0], nb, frame[bodyAt:end], frame[:ad])
				if err != nil {
					continue
				}
				u.buf = body[:0]
			}
			if !hs {
				u.epochs[unsealKey{secret: i, role: role}] = epoch
			}
			start := len(dst)
			dst = append(dst, frame[:encap.HeaderLen]...)
			dst[start] &^= FlagSealed
			binary.BigEndian.PutUint16(dst[start+6:], uint16(len(body)))
			dst = append(dst, body...)
			return dst, Opened{Role: role, Generation: s.Generation, Epoch: epoch, Handshake: hs, Mode: mode}, nil
		}
	}
	what := "session"
	if hs {
		what = "handshake"
	}
	if !candidates {
		return dst, Opened{}, ferr(offGen, "seal.generation", ErrNoSecret, "pair %d generation %d (low byte) %s", pair, genByte, what)
	}
	return dst, Opened{}, ferr(offEpoch, "seal.tag", ErrNoSecretOpens, "pair %d generation %d (low byte) %s epoch %d (low byte)", pair, genByte, what, frame[offEpoch])
}

// nearEpoch extends an epoch's low 8 bits to the full epoch nearest last.
func nearEpoch(last uint32, low byte) uint32 {
	e := last&^0xff | uint32(low)
	switch {
	case e > last && e-last > 128 && e >= 256:
		e -= 256
	case e < last && last-e > 128 && e < ^uint32(0)-255:
		e += 256
	}
	return e
}

func (u *Unsealer) aead(i int, role encap.Role, mode Mode, epoch uint32) (cipher.AEAD, error) {
	k := unsealKey{secret: i, role: role, mode: mode, epoch: epoch}
	if a, ok := u.aeads[k]; ok {
		return a, nil
	}
	var a cipher.AEAD
	var err error
	if u.secrets[i].Handshake {
		a, err = expandHandshakeAEAD(u.secrets[i].PRK, role, mode)
	} else {
		a, err = expandAEAD(u.secrets[i].PRK, role, mode, epoch)
	}
	if err != nil {
		return nil, err
	}
	u.aeads[k] = a
	return a, nil
}

// checkSealedOffline is Channel.checkSealed without a pair's mode: the
// frame's own mode must be one of the two.
func checkSealedOffline(frame []byte) (int, error) {
	if len(frame) < encap.HeaderLen {
		return 0, ferr(0, "dxpu.header", ErrShort, "%d bytes, the header alone is %d", len(frame), encap.HeaderLen)
	}
	h := encap.Header(frame)
	if h.Version() != encap.Version {
		return 0, ferr(0, "dxpu.version", ErrVersion, "version %d", h.Version())
	}
	if h.Flags()&FlagSealed == 0 {
		return 0, ferr(0, "dxpu.flags", ErrNotSealed, "flags %#x", h.Flags())
	}
	n := h.BodyLen()
	if n < Overhead {
		return 0, ferr(6, "dxpu.body_length", ErrShort, "sealed body of %d bytes, the security header and tag alone are %d", n, Overhead)
	}
	if encap.HeaderLen+n > len(frame) {
		return 0, ferr(6, "dxpu.body_length", ErrBodyLength, "header says %d body bytes, frame has %d", n, len(frame)-encap.HeaderLen)
	}
	kind := frame[offKind]
	if m := Mode(kind & kindModeMask); m != ModeGCM && m != ModeGMAC {
		return 0, ferr(offKind, "seal.kind", ErrMode, "mode %d", uint8(m))
	}
	if kind&kindReserved != 0 {
		return 0, ferr(offKind, "seal.kind", ErrReserved, "kind byte %#02x", kind)
	}
	return n, nil
}

// String names the sender and key of an opened frame.
func (o Opened) String() string {
	if o.Handshake {
		return fmt.Sprintf("%v handshake gen %d", o.Role, o.Generation)
	}
	return fmt.Sprintf("%v gen %d epoch %d", o.Role, o.Generation, o.Epoch)
}
