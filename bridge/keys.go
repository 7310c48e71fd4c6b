package bridge

import (
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// KeyNonceLen is the size of the key nonce a keyed bridge appends to its
// HELLO and HELLO-ACK (body bytes 40-55): random per session, it binds the
// session keys to both sides' starts.
const KeyNonceLen = 16

// helloKeyedLen is a keyed HELLO or HELLO-ACK body: the 40-byte message and
// the key nonce.
const helloKeyedLen = encap.HelloLen + KeyNonceLen

// sessionNonceLen is what the seal's session binding gets from each side:
// its 32-bit session and its key nonce.
const sessionNonceLen = 4 + KeyNonceLen

// ErrUnkeyed is returned by the key methods of a bridge built without a
// pair key.
var ErrUnkeyed = errors.New("bridge: pair is not keyed")

// keyState is what a keyed bridge holds beyond the unkeyed one.
type keyState struct {
	ch       *seal.Channel // nil: the pair runs unkeyed
	plain    []byte        // scratch: the frame the builder writes, before sealing
	nonce    [KeyNonceLen]byte
	peer     [KeyNonceLen]byte // the peer's key nonce of the session in b.peer
	wallBase uint64            // wall clock (ns since 1970) at now = 0, for handshake packet numbers
	failures uint64            // frames the seal refused to seal (key exhausted): lost
}

// newKeys builds the seal channel of a keyed config; unkeyed configs get
// the zero keyState.
func newKeys(cfg *Config) (keyState, error) {
	if !cfg.Keyed() {
		return keyState{}, nil
	}
	sc := seal.Config{PairID: cfg.PairID, Role: cfg.Role, Mode: cfg.SealMode, RekeyAfter: cfg.RekeyAfter, PreviousGrace: cfg.RekeyGrace, PreviousGraceTime: cfg.RekeyGraceTime, KeyLog: cfg.KeyLog}
	if cfg.Seed != 0 {
		sc.Rand = seededBootID(cfg)
	}
	ch, err := seal.New(sc, cfg.KeyGeneration, cfg.Key)
	if err != nil {
		return keyState{}, fmt.Errorf("%w: Key: %w", ErrConfig, err)
	}
	return keyState{ch: ch, plain: make([]byte, cfg.frameBudget())}, nil
}

// Keyed reports whether the bridge seals its frames.
func (b *Bridge) Keyed() bool { return b.keys.ch != nil }

// SetWallClock tells a keyed bridge the wall-clock time at which its now
// is 0. HELLO, HELLO-ACK and RESET are numbered by wall clock (see Keys in
// the package doc) so that a restarted bridge numbers above everything it
// sent before and the peer, which refuses a handshake frame numbered below
// the newest it saw, lets it in; drivers in real time call this once with
// their start time. Without it, handshake numbers follow now alone, which
// suits virtual time.
func (b *Bridge) SetWallClock(atZero time.Time) {
	if ns := atZero.UnixNano(); ns > 0 {
		b.keys.wallBase = uint64(ns)
	}
}

func (b *Bridge) handshakeClock(now time.Duration) uint64 {
	if now < 0 {
		now = 0
	}
	return b.keys.wallBase + uint64(now)
}

// Rekey makes both directions' senders move to a new key epoch, without
// loss: at this side's next frame once the peer holds the next key, and
// the peer follows when it sees it (`dxpu ctl rekey`). Without a session
// it does nothing: the next session has fresh keys anyway.
func (b *Bridge) Rekey() error {
	if b.keys.ch == nil {
		return ErrUnkeyed
	}
	b.keys.ch.Rekey()
	return nil
}

// InstallKey adds pair key generation gen (32 bytes, newer than every
// generation held), as the manager hands a new key to both bridges of a
// pair. The bridge opens the peer's frames under it at once; it seals under
// it after ActivateKey, or as soon as the peer's frames show the peer did.
// The manager's lossless order: InstallKey on both sides, then ActivateKey.
func (b *Bridge) InstallKey(gen uint32, key []byte) error {
	if b.keys.ch == nil {
		return fmt.Errorf("%w: cannot install key generation %d: build the bridge with Config.Key", ErrUnkeyed, gen)
	}
	if err := b.keys.ch.InstallKey(gen, key); err != nil {
		return fmt.Errorf("bridge: install key generation %d: %w", gen, err)
	}
	return nil
}

// ActivateKey makes the newest installed generation the one this side
// seals under from its next key epoch on.
func (b *Bridge) ActivateKey() error {
	if b.keys.ch == nil {
		return ErrUnkeyed
	}
	b.keys.ch.ActivateKey()
	return nil
}

// KeyState returns the seal's key state (generations, epochs) and whether
// the bridge is keyed at all.
func (b *Bridge) KeyState() (seal.State, bool) {
	if b.keys.ch == nil {
		return seal.State{}, false
	}
	return b.keys.ch.State(), true
}

// startKeys derives the session keys once both sides' session and key
// nonces are known: called where the bridge learns the peer's session.
func (b *Bridge) startKeys() error {
	var local, peer [sessionNonceLen]byte
	putSessionNonce(&local, b.session, &b.keys.nonce)
	putSessionNonce(&peer, b.peerSession, &b.keys.peer)
	return b.keys.ch.StartSession(local[:], peer[:])
}

func putSessionNonce(dst *[sessionNonceLen]byte, session uint32, key *[KeyNonceLen]byte) {
	dst[0], dst[1], dst[2], dst[3] = byte(session>>24), byte(session>>16), byte(session>>8), byte(session)
	copy(dst[4:], key[:])
}

// peerKeyNonce returns the key nonce of a keyed HELLO or HELLO-ACK body.
func peerKeyNonce(body []byte) ([KeyNonceLen]byte, error) {
	var n [KeyNonceLen]byte
	if len(body) < helloKeyedLen {
		return n, fmt.Errorf("body: %d-byte HELLO on a keyed pair, want %d (bytes 40-55: key nonce)", len(body), helloKeyedLen)
	}
	copy(n[:], body[encap.HelloLen:helloKeyedLen])
	return n, nil
}

// sealInto seals the plain frame the builder wrote into b.keys.plain into
// buf: HELLO, HELLO-ACK and RESET under the handshake key, all else under
// the session keys. It returns the sealed length; 0 when the seal refused
// (the frame is then lost, and retransmission recovers what it carried).
func (b *Bridge) sealInto(now time.Duration, buf []byte, n int) int {
	plain := b.keys.plain[:n]
	var out []byte
	var err error
	if isHandshake(plain) {
		out, err = b.keys.ch.SealHandshake(buf[:0], plain, b.handshakeClock(now))
	} else {
		out, err = b.keys.ch.Seal(buf[:0], plain)
	}
	if err != nil {
		b.keys.failures++
		return 0
	}
	return len(out)
}

// isHandshake reports whether a plain frame the builder wrote is HELLO,
// HELLO-ACK or RESET: the messages a side sends before (or after) it has
// session keys.
func isHandshake(frame []byte) bool {
	if encap.Header(frame).Type() != encap.MsgControl || len(frame) <= encap.HeaderLen {
		return false
	}
	switch encap.ControlType(frame[encap.HeaderLen]) {
	case encap.CtlHello, encap.CtlHelloAck, encap.CtlReset:
		return true
	}
	return false
}

// sealDrop is the error of a frame the seal refused. It holds only the
// seal's error (preallocated for the refusals a flood would hit), so a
// refusal allocates nothing; it matches ErrFrame and the seal's sentinel.
type sealDrop struct{ fe *seal.FrameError }

func (e sealDrop) Error() string        { return ErrFrame.Error() + ": " + e.fe.Error() }
func (e sealDrop) Unwrap() error        { return e.fe }
func (e sealDrop) Is(target error) bool { return target == ErrFrame }

// dropSealed counts and returns the refusal of a frame by the seal.
func (b *Bridge) dropSealed(err error) error {
	b.ctr.FramesDropped++
	if fe, ok := err.(*seal.FrameError); ok {
		return sealDrop{fe}
	}
	return fmt.Errorf("%w: %w", ErrFrame, err)
}

// sealCounters adds the seal's counts to a snapshot of the counters.
func (b *Bridge) sealCounters(c *Counters) {
	if b.keys.ch == nil {
		return
	}
	s := b.keys.ch.Counters()
	c.FramesSealed = s.Sealed + s.SealedHandshake
	c.FramesOpened = s.Opened + s.OpenedHandshake
	c.DroppedUnsealed = s.NotSealed
	c.DroppedForged = s.AuthFailed
	c.DroppedReplayed = s.Replayed
	c.DroppedUnknownKey = s.UnknownEpoch
	c.DroppedUnknownGeneration = s.UnknownGeneration
	c.LastUnknownGeneration = uint32(s.LastUnknownGeneration)
	c.DroppedNoSession = s.NoSession
	c.DroppedSealMalformed = s.Malformed
	c.DroppedHandshakeType = s.HandshakeRefused
	c.SealFailures = b.keys.failures
	c.TxRekeys = s.TxRekeys
	c.RxKeyRotations = s.RxRotations
	c.KeysInstalled = s.KeysInstalled
	c.KeyActivations = s.KeyActivations
}
