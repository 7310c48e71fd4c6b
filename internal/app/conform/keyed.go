package conform

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Keys configure a keyed run: the pair key the implementation under test
// holds and, optionally, a next generation it holds too (for judging a key
// change, KEY-8). The kit seals and opens with bridge/seal, the reference.
type Keys struct {
	Key        []byte    // the pair key (seal.KeyLen bytes); nil: the pair is unkeyed
	Generation uint32    // its generation (default 1)
	Mode       seal.Mode // seal.ModeGCM (default) or seal.ModeGMAC
	// NextKey and NextGeneration are a newer pair key the IUT holds
	// installed but not active: the kit activates it and judges that the
	// IUT follows (KEY-8). Without it KEY-8 is n/a.
	NextKey        []byte
	NextGeneration uint32
	// RekeyAfter is the IUT's frames per key before it moves to a new
	// epoch (0: seal.DefaultRekeyAfter); the kit judges it never seals
	// more than twice that under one key (KEY-6).
	RekeyAfter uint64
	// GraceTime is the IUT's bound on keeping a previous receive key after
	// the first frame under a new one (0: seal.DefaultPreviousGraceTime):
	// its echo must show the old key retired within it (KEY-7).
	GraceTime time.Duration
}

func (k Keys) keyed() bool { return k.Key != nil }

func (k Keys) withDefaults() Keys {
	if k.Generation == 0 {
		k.Generation = 1
	}
	if k.Mode == 0 {
		k.Mode = seal.ModeGCM
	}
	if k.RekeyAfter == 0 {
		k.RekeyAfter = seal.DefaultRekeyAfter
	}
	if k.GraceTime == 0 { // a negative one stays, for check to refuse
		k.GraceTime = seal.DefaultPreviousGraceTime
	}
	return k
}

func (k Keys) check() error {
	if k.GraceTime < 0 {
		return units.Errorf("%w: grace time %v is negative", ErrOptions, k.GraceTime)
	}
	if !k.keyed() {
		if k.NextKey != nil {
			return fmt.Errorf("%w: a next key without a key", ErrOptions)
		}
		return nil
	}
	if len(k.Key) != seal.KeyLen {
		return fmt.Errorf("%w: pair key of %d bytes, want %d", ErrOptions, len(k.Key), seal.KeyLen)
	}
	if k.Mode != seal.ModeGCM && k.Mode != seal.ModeGMAC {
		return fmt.Errorf("%w: seal mode %d, want gcm (1) or gmac (2)", ErrOptions, k.Mode)
	}
	if k.NextKey != nil && (len(k.NextKey) != seal.KeyLen || k.NextGeneration <= k.Generation) {
		return fmt.Errorf("%w: next key: want %d bytes under a generation above %d (got %d bytes, generation %d)", ErrOptions, seal.KeyLen, k.Generation, len(k.NextKey), k.NextGeneration)
	}
	return nil
}

// Kit-side grace: the kit retires the IUT's previous epoch soon, so its
// echo lets the IUT move on quickly (nothing reorders between the two).
const (
	kitGrace     = 64
	kitGraceTime = 20 * time.Millisecond
	maxOldChans  = 4
)

// binding is what a channel's session keys are bound to: both sides'
// sessions and key nonces.
type binding struct {
	kit, iut       uint32
	kitKey, iutKey [bridge.KeyNonceLen]byte
	ok             bool // the IUT's session and key nonce are known
}

// keyed is the kit's seal layer, sans-I/O like the end: it seals what the
// kit sends and opens what the IUT sends, judging KEY-2..KEY-8 on every
// frame. A channel serves one binding; the channels of earlier bindings
// stay to recognise stale frames of those sessions (not judged).
type keyed struct {
	keys      Keys
	cfg       seal.Config
	activated bool // the kit activated NextKey
	ch        *seal.Channel
	bound     binding
	old       []*seal.Channel
	wall      uint64 // wall clock (ns) at the kit's time 0: handshake packet numbers

	kitNonce [bridge.KeyNonceLen]byte
	// iutNonce is the key nonce of each IUT session (a late HELLO of an
	// ended one must not rebind the current); iutNonces every key nonce
	// of the IUT, to judge reuse.
	iutNonce  map[uint32][bridge.KeyNonceLen]byte
	iutNonces map[[bridge.KeyNonceLen]byte]iutNonceAt

	hsPN   uint64 // the IUT's newest handshake packet number
	hsSeen bool
	hsLast uint64 // the kit's newest handshake packet number

	// The IUT's sender as its session frames show it.
	iutEpoch    uint8
	iutGen      uint8
	iutEcho     uint8 // the oldest kit epoch it opens
	iutEchoAt   time.Duration
	iutSeen     bool
	iutMoves    int
	kitEchoMax  uint8 // the highest echo the kit sent in this binding
	kitEchoSent bool

	// The kit's latest sealed HELLO per kit session, for replaying one of
	// an earlier session (KEY-5).
	hellos map[uint32][]byte

	// why says why open last returned false (for LNK-1's message).
	why string
}

// drop records why a frame of the IUT did not open.
func (s *keyed) drop(format string, a ...any) ([]byte, bool) {
	s.why = fmt.Sprintf(format, a...)
	return nil, false
}

type iutNonceAt struct {
	session  uint32
	scenario string
}

func newKeyed(k Keys, pair uint32, kitRole encap.Role, wall time.Time) *keyed {
	return &keyed{keys: k, wall: uint64(wall.UnixNano()),
		cfg:       seal.Config{PairID: pair, Role: kitRole, Mode: k.Mode, PreviousGrace: kitGrace, PreviousGraceTime: kitGraceTime},
		iutNonce:  map[uint32][bridge.KeyNonceLen]byte{},
		iutNonces: map[[bridge.KeyNonceLen]byte]iutNonceAt{}, hellos: map[uint32][]byte{}}
}

// newChannel builds a channel holding the kit's generations.
func (s *keyed) newChannel() (*seal.Channel, error) {
	ch, err := seal.New(s.cfg, s.keys.Generation, s.keys.Key)
	if err != nil {
		return nil, err
	}
	if s.keys.NextKey != nil {
		if err := ch.InstallKey(s.keys.NextGeneration, s.keys.NextKey); err != nil {
			return nil, err
		}
		if s.activated {
			ch.ActivateKey()
		}
	}
	return ch, nil
}

// sync gives the kit a channel for the current sessions, keeping the
// previous ones.
func (s *keyed) sync(e *end) error {
	n, known := s.iutNonce[e.iut.Session]
	want := binding{kit: e.session, kitKey: s.kitNonce, ok: e.iutKnown && known && e.iut.Session != 0}
	if want.ok {
		want.iut, want.iutKey = e.iut.Session, n
	}
	if s.ch != nil && want == s.bound {
		return nil
	}
	ch, err := s.newChannel()
	if err != nil {
		return err
	}
	if want.ok {
		var local, peer [4 + bridge.KeyNonceLen]byte
		binary.BigEndian.PutUint32(local[:], want.kit)
		copy(local[4:], want.kitKey[:])
		binary.BigEndian.PutUint32(peer[:], want.iut)
		copy(peer[4:], want.iutKey[:])
		if err := ch.StartSession(local[:], peer[:]); err != nil {
			return err
		}
	}
	if s.ch != nil {
		s.old = append(s.old, s.ch)
		if len(s.old) > maxOldChans {
			s.old = s.old[1:]
		}
	}
	s.ch, s.bound = ch, want
	s.iutSeen, s.iutMoves, s.kitEchoSent, s.kitEchoMax = false, 0, false, 0
	return nil
}

// newKitNonce draws the kit's key nonce of a new kit session.
func (s *keyed) newKitNonce(e *end) {
	for i := range s.kitNonce {
		s.kitNonce[i] = byte(e.rng.Uint32())
	}
}

// appendNonce appends the kit's key nonce to a plain HELLO or HELLO-ACK
// frame and fixes its body length.
func (s *keyed) appendNonce(b []byte) []byte {
	b = append(b, s.kitNonce[:]...)
	h := encap.Header(b)
	h.SetBodyLen(h.BodyLen() + bridge.KeyNonceLen)
	return b
}

func isHandshakeFrame(b []byte) bool {
	if len(b) <= encap.HeaderLen || encap.Header(b).Type() != encap.MsgControl {
		return false
	}
	switch encap.ControlType(b[encap.HeaderLen]) {
	case encap.CtlHello, encap.CtlHelloAck, encap.CtlReset:
		return true
	}
	return false
}

// seal seals a plain frame the kit sends: HELLO, HELLO-ACK and RESET under
// the handshake key, all else under the session keys. A frame the seal
// refuses (a malformed one on purpose, or one before session keys) goes
// out as it is: the IUT must drop it unsealed (KEY-3).
func (s *keyed) seal(e *end, now time.Duration, b []byte) []byte {
	if err := s.sync(e); err != nil {
		return b
	}
	var out []byte
	var err error
	if isHandshakeFrame(b) {
		// Above the last one also across channels (a new one per binding).
		out, err = s.ch.SealHandshake(nil, b, max(s.wall+uint64(max(now, 0)), s.hsLast+1))
		if err == nil {
			s.hsLast = binary.BigEndian.Uint64(out[44:52])
		}
		if err == nil && encap.ControlType(b[encap.HeaderLen]) == encap.CtlHello {
			s.hellos[e.session] = out
		}
	} else {
		out, err = s.ch.Seal(nil, b)
	}
	if err != nil {
		return b
	}
	if out[41]&0x80 == 0 {
		if echo := out[42]; !s.kitEchoSent || int8(echo-s.kitEchoMax) > 0 {
			s.kitEchoMax, s.kitEchoSent = echo, true
		}
	}
	return out
}

// sealSession seals a plain frame under the session keys, for the keyed
// scenario's probes (it returns nil when there are none).
func (s *keyed) sealSession(e *end, b []byte) []byte {
	if err := s.sync(e); err != nil || !s.bound.ok {
		return nil
	}
	out, err := s.ch.Seal(nil, b)
	if err != nil {
		return nil
	}
	return out
}

// open authenticates a frame of the IUT and returns the plain frame, or
// false when it is dropped. It judges KEY-2 (sealed, under the pair key
// and mode), KEY-4 (session keys of both nonces), KEY-5 (handshake frames
// under the handshake key, numbers increasing) and KEY-6 (epoch moves
// only after the kit's echo, numbers within 2 x RekeyAfter).
func (s *keyed) open(e *end, now time.Duration, b []byte) ([]byte, bool) {
	if len(b) < encap.HeaderLen || encap.Header(b).Version() != encap.Version {
		return b, true // the format rules judge it
	}
	h := encap.Header(b)
	kind := h.Type().String() // a sealed body may be encrypted
	if h.Flags()&seal.FlagSealed == 0 {
		kind = frameKind(b)
		if e.unsealed == 0 {
			e.firstUnsealed = now
		}
		e.unsealed++
		e.led.fail("KEY-2", "a %s frame not sealed (byte 0 bit 3 clear) on a keyed pair", kind)
		return s.drop("unsealed %s frame", kind)
	}
	bl := h.BodyLen()
	if encap.HeaderLen+bl > len(b) || bl < seal.Overhead {
		e.led.fail("KEY-2", "a sealed frame of %d bytes with body length %d (at least %d: security header and tag)", len(b), bl, seal.Overhead)
		return s.drop("a sealed frame with body length %d", bl)
	}
	if e.exact && encap.HeaderLen+bl != len(b) {
		e.led.fail("FRM-2", "datagram of %d bytes, header and sealed body are %d", len(b), encap.HeaderLen+bl)
	}
	if m := seal.Mode(b[41] & 3); m != s.keys.Mode {
		e.led.fail("KEY-2", "byte 41: mode %v, the pair uses %v", m, s.keys.Mode)
		return s.drop("mode %v", m)
	}
	if err := s.sync(e); err != nil {
		e.led.fail("KEY-4", "the kit cannot derive session keys: %v", err)
		return s.drop("no session keys: %v", err)
	}
	hs := b[41]&0x80 != 0
	pn := binary.BigEndian.Uint64(b[44:52])
	epoch, echo, gen := b[40], b[42], b[43]
	buf := append([]byte(nil), b...)
	s.ch.Tick(now)
	plain, err := s.ch.OpenFrame(buf)
	if hs {
		return s.openedHandshake(e, plain, err, pn, gen)
	}
	if err != nil {
		for _, old := range s.old {
			old.Tick(now)
			if _, oerr := old.OpenFrame(append([]byte(nil), b...)); oerr == nil {
				return s.drop("a %s frame of an earlier session", kind) // stale, not judged
			}
		}
		switch {
		case errors.Is(err, seal.ErrNoSession):
			// The kit has no keys with that session (yet): not judged.
		case errors.Is(err, seal.ErrReplayed):
			e.led.fail("KEY-2", "a %s frame repeats packet number %d under one key (epoch %d, generation %d)", kind, pn, epoch, gen)
		case errors.Is(err, seal.ErrUnknownEpoch) && !s.holds(gen):
			e.led.fail("KEY-8", "a %s frame under key generation %d (low 8 bits), which the kit neither holds nor activated", kind, gen)
		case errors.Is(err, seal.ErrUnknownEpoch):
			e.led.fail("KEY-6", "a %s frame under epoch %d (its previous was %d): it moved more than one epoch, or without the kit's echo", kind, epoch, s.iutEpoch)
		case errors.Is(err, seal.ErrAuth):
			e.led.fail("KEY-4", "a %s frame (epoch %d, generation %d, packet %d) does not authenticate under the session keys of both sides' session and key nonces", kind, epoch, gen, pn)
		default:
			e.led.fail("KEY-2", "a %s frame: %v", kind, err)
		}
		return s.drop("a %s frame (epoch %d, generation %d, packet %d): %v", kind, epoch, gen, pn, err)
	}
	if isHandshakeFrame(plain) {
		e.led.fail("KEY-5", "a %s sealed under the session keys, not the handshake key", frameKind(plain))
		return s.drop("a %s under the session keys", frameKind(plain))
	}
	e.led.pass("KEY-2", "every frame sealed under the pair key (%v)", s.keys.Mode)
	e.led.pass("KEY-4", "session frames open under keys derived from both sides' session and key nonces")
	s.sessionFrame(e, now, epoch, echo, gen, pn)
	return plain, true
}

func (s *keyed) holds(gen uint8) bool {
	return gen == uint8(s.keys.Generation) || s.keys.NextKey != nil && gen == uint8(s.keys.NextGeneration)
}

func (s *keyed) openedHandshake(e *end, plain []byte, err error, pn uint64, gen uint8) ([]byte, bool) {
	switch {
	case err == nil:
	case errors.Is(err, seal.ErrHandshakeType):
		e.led.fail("KEY-5", "a frame other than HELLO, HELLO-ACK or RESET under the handshake key: %v", err)
		return s.drop("a handshake frame (packet %d): %v", pn, err)
	case errors.Is(err, seal.ErrReplayed):
		e.led.fail("KEY-5", "handshake packet number %d is not above its previous %d", pn, s.hsPN)
		return s.drop("a handshake frame (packet %d): %v", pn, err)
	case errors.Is(err, seal.ErrUnknownEpoch) && !s.holds(gen):
		e.led.fail("KEY-2", "a handshake frame under key generation %d (low 8 bits); the pair's is %d", gen, uint8(s.keys.Generation))
		return s.drop("a handshake frame (packet %d): %v", pn, err)
	default:
		e.led.fail("KEY-2", "a handshake frame does not open under the pair key's handshake key: %v", err)
		return s.drop("a handshake frame (packet %d): %v", pn, err)
	}
	if s.hsSeen && pn <= s.hsPN {
		e.led.fail("KEY-5", "a %s with handshake packet number %d, not above its previous %d", frameKind(plain), pn, s.hsPN)
		return s.drop("a handshake frame with packet number %d, not above %d", pn, s.hsPN)
	}
	s.hsPN, s.hsSeen = pn, true
	e.led.pass("KEY-2", "every frame sealed under the pair key (%v)", s.keys.Mode)
	e.led.pass("KEY-5", "HELLO, HELLO-ACK and RESET under the handshake key, packet numbers increasing")
	return plain, true
}

// sessionFrame follows the IUT's sender: epochs, generations, echo.
func (s *keyed) sessionFrame(e *end, now time.Duration, epoch, echo, gen uint8, pn uint64) {
	if pn >= 2*s.keys.RekeyAfter {
		e.led.fail("KEY-6", "packet number %d under one key (epoch %d): more than 2 x RekeyAfter (%d)", pn, epoch, s.keys.RekeyAfter)
	}
	if !s.iutSeen {
		s.iutEpoch, s.iutGen, s.iutSeen = epoch, gen, true
	} else if epoch != s.iutEpoch {
		// A move to the next epoch needs the kit's echo of the current one.
		if !s.kitEchoSent || int8(s.kitEchoMax-s.iutEpoch) < 0 {
			e.led.fail("KEY-6", "moved from epoch %d to %d before the kit's echo showed %d (the kit echoed at most %d)", s.iutEpoch, epoch, s.iutEpoch, s.kitEchoMax)
		} else {
			e.led.pass("KEY-6", "moved to a new epoch only after the kit's echo allowed it, within 2 x RekeyAfter frames")
		}
		s.iutEpoch, s.iutGen = epoch, gen
		s.iutMoves++
	}
	if echo != s.iutEcho {
		s.iutEcho, s.iutEchoAt = echo, now
	}
}

// helloBody takes the key nonce of the IUT's HELLO or HELLO-ACK body and
// judges it (KEY-4); false drops the frame, as a keyed bridge must.
func (s *keyed) helloBody(e *end, c *encap.Control, body []byte) bool {
	if len(body) < encap.HelloLen+bridge.KeyNonceLen {
		e.led.fail("KEY-4", "a %v with a %d-byte body on a keyed pair: no %d-byte key nonce after the %d-byte message", c.Type, len(body), bridge.KeyNonceLen, encap.HelloLen)
		return false
	}
	var n [bridge.KeyNonceLen]byte
	copy(n[:], body[encap.HelloLen:])
	switch prev, ok := s.iutNonces[n]; {
	case ok && prev.session != c.Session:
		e.led.fail("KEY-4", "session %#x carries key nonce %x, that of its session %#x (scenario %s): key nonces must be random per session", c.Session, n, prev.session, prev.scenario)
	case !ok:
		e.led.pass("KEY-4", "a fresh %d-byte key nonce in every session's HELLO and HELLO-ACK", bridge.KeyNonceLen)
		s.iutNonces[n] = iutNonceAt{session: c.Session, scenario: e.scenario()}
	}
	s.iutNonce[c.Session] = n
	return true
}
