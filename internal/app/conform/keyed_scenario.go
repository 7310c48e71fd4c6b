package conform

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

var keyRules = []string{"KEY-2", "KEY-3", "KEY-4", "KEY-5", "KEY-6", "KEY-7", "KEY-8"}

// Probe numbers of the keyed scenario's KEEPALIVEs, apart from the ones
// probe counts up from 1 (an answer counts only after its frame went out).
const (
	probeUnsealed uint8 = 0xe1 + iota
	probeForged
	probeUnknownKey
	probeOldEpoch
	probeRetired
)

// poolLen is how many KEEPALIVEs the window check seals ahead and holds
// back: more than the window, so that one 2048 behind the newest exists.
const poolLen = seal.WindowLen + 100

// keysScenario judges KEY-3..KEY-8 by what the IUT answers: a KEEPALIVE
// it accepts draws a KEEPALIVE-ACK with its probe number, one it drops
// draws nothing. KEY-2, KEY-4, KEY-5 and KEY-6 are judged on every frame
// too (keyed.open).
func (k *kit) keysScenario() error {
	if k.keys == nil {
		for _, id := range keyRules {
			k.led.na(id, "the pair is unkeyed (give the kit the pair key: --key-file)")
		}
		return nil
	}
	if err := k.begin(defaultAdvert()); err != nil {
		return err
	}
	if err := k.keyDrops(); err != nil {
		return err
	}
	if err := k.keyWindow(); err != nil {
		return err
	}
	if err := k.keyHelloReplay(); err != nil {
		return err
	}
	if err := k.keyRekey(); err != nil {
		return err
	}
	if err := k.keyIUTMoves(); err != nil {
		return err
	}
	return k.keyChange()
}

func (k *kit) keepalive(p uint8) []byte {
	k.kaSent[p] = true // an answer to it is no stray (CTL-3)
	return k.control(encap.Control{Type: encap.CtlKeepalive, PeerSession: k.iut.Session, Probe: p})
}

// answered sends f as it is and reports whether the IUT answered probe p
// within d.
func (k *kit) answered(f []byte, p uint8, d time.Duration) (bool, error) {
	t0 := k.now()
	if err := k.sendWire(f); err != nil {
		return false, err
	}
	return k.await(d, func() bool { at, ok := k.kaAcks[p]; return ok && at >= t0 })
}

// alive checks the IUT still answers a sealed probe after a refused frame.
func (k *kit) alive(what string) error {
	ok, err := k.probe()
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("KEY-3", "after %s the IUT no longer answers a valid KEEPALIVE within %v", what, k.reply())
		return errNoLink
	}
	return nil
}

// keyDrops: an unsealed, a forged and an unknown-key KEEPALIVE draw no
// answer (KEY-3).
func (k *kit) keyDrops() error {
	ok, err := k.answered(k.keepalive(probeUnsealed), probeUnsealed, k.reply())
	if err != nil {
		return err
	}
	if ok {
		k.led.fail("KEY-3", "an unsealed KEEPALIVE (probe %d) was answered: unsealed frames must be dropped", probeUnsealed)
	}
	if err := k.alive("an unsealed frame"); err != nil {
		return err
	}
	f := k.keys.sealSession(k.end, k.keepalive(probeForged))
	if f == nil {
		return fmt.Errorf("conform: no session keys while up")
	}
	f[len(f)-1] ^= 0x01 // the tag's last bit
	if ok, err = k.answered(f, probeForged, k.reply()); err != nil {
		return err
	}
	if ok {
		k.led.fail("KEY-3", "a KEEPALIVE with an altered tag (probe %d) was answered: forged frames must be dropped", probeForged)
	}
	if err := k.alive("a forged frame"); err != nil {
		return err
	}
	f, err = k.unknownKeyFrame(k.keepalive(probeUnknownKey))
	if err != nil {
		return err
	}
	if ok, err = k.answered(f, probeUnknownKey, k.reply()); err != nil {
		return err
	}
	if ok {
		k.led.fail("KEY-3", "a KEEPALIVE sealed under a key generation it does not hold (probe %d) was answered", probeUnknownKey)
	}
	return k.alive("a frame under an unknown key")
}

// unknownKeyFrame seals a plain frame under a random pair key of a
// generation the IUT does not hold, with the session's nonces.
func (k *kit) unknownKeyFrame(plain []byte) ([]byte, error) {
	s := k.keys
	gen := s.keys.Generation + 0x80
	if s.holds(uint8(gen)) {
		gen++
	}
	key := make([]byte, seal.KeyLen)
	_, _ = rand.Read(key)
	ch, err := seal.New(s.cfg, gen, key)
	if err != nil {
		return nil, err
	}
	var local, peer [4 + 16]byte
	binary.BigEndian.PutUint32(local[:], s.bound.kit)
	copy(local[4:], s.bound.kitKey[:])
	binary.BigEndian.PutUint32(peer[:], s.bound.iut)
	copy(peer[4:], s.bound.iutKey[:])
	if err := ch.StartSession(local[:], peer[:]); err != nil {
		return nil, err
	}
	return ch.Seal(nil, plain)
}

// keyWindow: sealed KEEPALIVEs held back, sent once the IUT has seen
// newer ones: 2048 behind the newest is dropped, 2047 behind accepted
// once, and its replay dropped (KEY-3).
func (k *kit) keyWindow() error {
	s := k.keys
	first := s.ch.State().TxFrames // the pool's first packet number
	epoch := s.ch.State().TxEpoch
	pool := make([][]byte, poolLen)
	probes := make([]uint8, poolLen)
	for i := range pool {
		probes[i] = uint8(0x10 + i%0xc0)
		pool[i] = s.sealSession(k.end, k.keepalive(probes[i]))
		if pool[i] == nil {
			return fmt.Errorf("conform: no session keys while up")
		}
	}
	// The kit only answers the IUT's KEEPALIVEs meanwhile: few frames, all
	// newer than the pool.
	k.quiet = true
	defer func() { k.quiet = false }()
	if err := k.alive("sealing ahead"); err != nil {
		return err
	}
	// behind returns the pool frame n packets behind the newest the kit
	// sent, and false when the kit sent too much since.
	behind := func(n uint64) ([]byte, uint8, bool) {
		st := s.ch.State()
		if st.TxEpoch != epoch {
			return nil, 0, false
		}
		i := st.TxFrames - 1 - n - first
		if i >= uint64(len(pool)) {
			return nil, 0, false
		}
		return pool[i], probes[i], true
	}
	f, p, ok := behind(seal.WindowLen)
	if !ok {
		k.led.na("KEY-3", "the kit sent too many frames to check the replay window's edge")
		return nil
	}
	got, err := k.answered(f, p, k.reply())
	if err != nil {
		return err
	}
	if got {
		k.led.fail("KEY-3", "a KEEPALIVE %d packets behind the newest (left of the %d-frame window) was answered", seal.WindowLen, seal.WindowLen)
	}
	f, p, ok = behind(seal.WindowLen - 1)
	if !ok {
		k.led.na("KEY-3", "the kit sent too many frames to check the replay window's edge")
		return nil
	}
	if got, err = k.answered(f, p, k.reply()); err != nil {
		return err
	}
	if !got {
		k.led.fail("KEY-3", "a KEEPALIVE %d packets behind the newest (the window's edge, never seen) was not answered within %v", seal.WindowLen-1, k.reply())
		return nil
	}
	if got, err = k.answered(f, p, k.reply()); err != nil {
		return err
	}
	if got {
		k.led.fail("KEY-3", "a replayed KEEPALIVE (the same frame again, probe %d) was answered", p)
	}
	if err := k.alive("a replayed frame"); err != nil {
		return err
	}
	k.led.pass("KEY-3", "unsealed, forged, unknown-key, replayed and too-old (%d behind) frames dropped; %d behind accepted once", seal.WindowLen, seal.WindowLen-1)
	return nil
}

// keyHelloReplay: the kit's HELLO of an earlier session, replayed while
// up, must not take the session down (KEY-5).
func (k *kit) keyHelloReplay() error {
	var old []byte
	for s, h := range k.keys.hellos {
		if s != k.session {
			old = h
			break
		}
	}
	if old == nil {
		if err := k.begin(defaultAdvert()); err != nil {
			return err
		}
		return k.keyHelloReplay()
	}
	session := k.iut.Session
	if err := k.sendWire(old); err != nil {
		return err
	}
	if err := k.watch(k.reply()); err != nil {
		return err
	}
	ok, err := k.probe()
	if err != nil {
		return err
	}
	if !ok || k.iut.Session != session {
		k.led.fail("KEY-5", "a replayed HELLO of an earlier kit session (handshake packet number below the newest) took the session down")
		return k.begin(defaultAdvert())
	}
	k.led.pass("KEY-5", "a replayed HELLO of an earlier kit session was refused")
	return nil
}

// keyRekey: the kit moves to its next epoch twice. The IUT must open the
// new epoch (KEY-6), still open a frame of the old one sent after the
// move, show the old one retired in its echo within its grace and then
// drop frames under it (KEY-7).
func (k *kit) keyRekey() error {
	s := k.keys
	e0 := s.ch.State().TxEpoch
	held := s.sealSession(k.end, k.keepalive(probeOldEpoch))
	late := s.sealSession(k.end, k.keepalive(probeRetired))
	if held == nil || late == nil {
		return fmt.Errorf("conform: no session keys while up")
	}
	s.ch.Rekey()
	ok, err := k.probe()
	if err != nil {
		return err
	}
	if st := s.ch.State(); st.TxEpoch != e0+1 {
		k.led.fail("KEY-7", "its echo never showed the kit's epoch %d, so the kit could not move to the next", e0)
		return nil
	}
	if !ok {
		k.led.fail("KEY-6", "a KEEPALIVE under the kit's next epoch %d was not answered within %v: the move lost it%s", e0+1, k.reply(), k.probeMiss)
		return errNoLink
	}
	moved := k.now()
	if ok, err = k.answered(held, probeOldEpoch, k.reply()); err != nil {
		return err
	}
	if !ok {
		k.led.fail("KEY-7", "a KEEPALIVE under the previous epoch %d, sent right after the move to %d, was not answered: the previous key was not kept for its grace", e0, e0+1)
	} else {
		k.led.pass("KEY-7", "the previous epoch open for a grace after the move")
	}
	// Its echo shows the previous key retired within the grace.
	bound := s.keys.GraceTime + k.reply()
	ok, _, err = k.within(bound, func() bool { return s.iutEcho == uint8(e0+1) })
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("KEY-7", "its echo still shows epoch %d %v after the kit's first frame under %d (grace %v)", s.iutEcho, (k.now() - moved).Round(time.Millisecond), e0+1, s.keys.GraceTime)
		return nil
	}
	if ok, err = k.answered(late, probeRetired, k.reply()); err != nil {
		return err
	}
	if ok {
		k.led.fail("KEY-7", "a KEEPALIVE under epoch %d opened after its echo showed that epoch retired", e0)
	} else {
		k.led.pass("KEY-7", "the previous epoch open for a grace, retired after it (echo %d)", e0+1)
	}
	s.ch.Rekey()
	if ok, err = k.probe(); err != nil {
		return err
	}
	if st := s.ch.State(); st.TxEpoch != e0+2 {
		k.led.fail("KEY-6", "the kit could not make its second move (to epoch %d): its sealing epoch is %d, the IUT's echo %d", e0+2, st.TxEpoch, s.iutEcho)
		return nil
	}
	if !ok {
		k.led.fail("KEY-6", "the kit's second move (to epoch %d, its echo allowing it) was not answered within %v%s", e0+2, k.reply(), k.probeMiss)
		return nil
	}
	k.led.pass("KEY-6", "the kit's moves to epochs %d and %d, each once its echo allowed, lost nothing", e0+1, e0+2)
	return nil
}

// keyIUTMoves makes the IUT seal more than twice its RekeyAfter frames
// when that is few (KEEPALIVE-ACKs to probes), so that KEY-6 sees its
// moves; with the default 2^22 it is left to whatever the run shows.
func (k *kit) keyIUTMoves() error {
	s := k.keys
	if s.keys.RekeyAfter > 1024 {
		if s.iutMoves == 0 {
			k.led.na("KEY-6", "the IUT did not move to a new epoch in the run (RekeyAfter %d frames); the kit's own moves lost nothing", s.keys.RekeyAfter)
		}
		return nil
	}
	for i := uint64(0); i < 2*s.keys.RekeyAfter+8 && s.iutMoves < 2; i++ {
		if ok, err := k.probe(); err != nil || !ok {
			return err
		}
	}
	if s.iutMoves == 0 {
		k.led.fail("KEY-6", "no move to a new epoch in %d frames (RekeyAfter %d)", 2*s.keys.RekeyAfter+8, s.keys.RekeyAfter)
	}
	return nil
}

// keyChange: the kit activates the next generation; the IUT must open
// the kit's frames under it and follow with its own (KEY-8).
func (k *kit) keyChange() error {
	s := k.keys
	if s.keys.NextKey == nil {
		k.led.na("KEY-8", "needs a next key the IUT holds installed (--next-key-file)")
		return nil
	}
	next := uint8(s.keys.NextGeneration)
	s.activated = true
	s.ch.ActivateKey()
	// The kit moves at its next frame once the IUT's echo shows the kit's
	// current epoch (the previous one retired, within the grace).
	bound := s.keys.GraceTime + k.reply()
	moved, _, err := k.within(bound, func() bool { return s.ch.State().TxGeneration == s.keys.NextGeneration })
	if err != nil {
		return err
	}
	if !moved {
		k.led.fail("KEY-7", "its echo did not allow the kit's move to generation %d within %v", s.keys.NextGeneration, bound)
		return nil
	}
	ok, err := k.probe()
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("KEY-8", "a KEEPALIVE under the installed generation %d was not answered within %v", s.keys.NextGeneration, k.reply())
		return errNoLink
	}
	ok, _, err = k.within(bound, func() bool { return s.iutSeen && s.iutGen == next })
	if err != nil {
		return err
	}
	if !ok {
		k.led.fail("KEY-8", "its frames still under generation %d %v after the kit's under %d", s.iutGen, bound, s.keys.NextGeneration)
		return nil
	}
	k.led.pass("KEY-8", "opened the kit's frames under the installed generation %d and followed to it", s.keys.NextGeneration)
	return nil
}
