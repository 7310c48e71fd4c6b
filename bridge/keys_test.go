package bridge

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// pairKey returns a 32-byte pair key derived from b, as a manager would
// issue one (tests only need distinct keys).
func pairKey(b byte) []byte {
	k := make([]byte, seal.KeyLen)
	for i := range k {
		k[i] = b ^ byte(i*7)
	}
	return k
}

// keyed returns c with the pair key and mode set.
func keyed(c Config, mode seal.Mode) Config {
	c.Key, c.SealMode = pairKey(1), mode
	return c
}

// newKeyedPair is newTestPair with both sides holding the same pair key.
func newKeyedPair(t testing.TB, mode seal.Mode, hc, gc Config) *testPair {
	t.Helper()
	return newTestPair(t, keyed(hc, mode), keyed(gc, mode))
}

// pairOf joins two bridges that were built elsewhere (random seeds).
func pairOf(t testing.TB, h, g *Bridge) *testPair {
	return &testPair{t: t, h: h, g: g, buf: make([]byte, 65535), accept: [2]ClassMask{AcceptAll, AcceptAll}}
}

// capture records copies of the frames one side sends, all of them
// delivered unless drop says otherwise.
func (p *testPair) capture(from *Bridge, drop func(encap.Header) bool) *[][]byte {
	var got [][]byte
	p.drop = func(b *Bridge, f []byte) bool {
		if b != from {
			return false
		}
		got = append(got, append([]byte(nil), f...))
		return drop != nil && drop(encap.Header(f))
	}
	return &got
}

var modes = []seal.Mode{seal.ModeGCM, seal.ModeGMAC}

// A keyed pair carries writes and reads like an unkeyed one; every frame on
// the wire is sealed, and in GCM mode no payload appears in clear.
func TestKeyedPairCarriesTraffic(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		p := newKeyedPair(t, mode, Config{}, Config{})
		wire := p.capture(p.h, nil)
		p.up()
		for i := 0; i < 40; i++ {
			p.send(p.h, mwr(0x1000+uint64(i)*0x100, 128))
		}
		p.send(p.h, mrd(hostRC, 4, 0x9000, 64))
		p.run()
		if len(p.gq) != 41 {
			t.Fatalf("%v: delivered %d of 41", mode, len(p.gq))
		}
		for i, d := range p.gq[:40] {
			if got := d.v().Address(); got != 0x1000+uint64(i)*0x100 {
				t.Fatalf("%v: TLP %d at %#x", mode, i, got)
			}
		}
		r := p.gq[40].v()
		p.send(p.g, cpld(gpuFn, r.RequesterID(), r.Tag(), 64, 0, make([]byte, 64)))
		p.run()
		if len(p.hq) != 1 || p.hq[0].v().Tag() != 4 {
			t.Fatalf("%v: host side got %d TLPs, want the completion of tag 4", mode, len(p.hq))
		}
		payload := mwr(0x1000, 128).Data
		inClear := 0
		for _, f := range *wire {
			if encap.Header(f).Flags()&seal.FlagSealed == 0 {
				t.Fatalf("%v: unsealed frame on the wire: % x", mode, f[:encap.HeaderLen])
			}
			if bytes.Contains(f, payload[:32]) {
				inClear++
			}
		}
		if mode == seal.ModeGCM && inClear > 0 {
			t.Fatalf("%v: %d frames carry write data in clear", mode, inClear)
		}
		if mode == seal.ModeGMAC && inClear == 0 {
			t.Fatalf("%v: write data not found in clear (integrity-only mode)", mode)
		}
		c := p.g.Counters()
		if c.FramesOpened == 0 || c.FramesOpened != c.FramesReceived || c.FramesDropped != 0 {
			t.Fatalf("%v: opened %d, received %d, dropped %d", mode, c.FramesOpened, c.FramesReceived, c.FramesDropped)
		}
		if hc := p.h.Counters(); hc.FramesSealed != hc.FramesSent {
			t.Fatalf("%v: sealed %d of %d frames sent", mode, hc.FramesSealed, hc.FramesSent)
		}
	}
}

func TestKeyedConfig(t *testing.T) {
	t.Parallel()
	bad := []Config{
		{Role: RoleHost, RequireKeys: true},
		{Role: RoleHost, Key: make([]byte, 16)},
		{Role: RoleHost, Key: pairKey(1), SealMode: 3},
		{Role: RoleHost, Key: pairKey(1), MTU: 600}, // 574 fits unkeyed, not with the seal's 28
	}
	for _, c := range bad {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: got %v, want ErrConfig", c, err)
		}
	}
	if _, err := New(Config{Role: RoleHost, MTU: 600}); err != nil {
		t.Fatalf("unkeyed MTU 600: %v", err)
	}
	key := pairKey(9)
	b, err := New(Config{Role: RoleHost, Key: key, RequireKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	if b.Config().Key != nil || !b.Keyed() || b.Config().SealMode != seal.ModeGCM {
		t.Fatalf("Config() key %x, keyed %v, mode %v: want no key handed out, keyed, GCM by default", b.Config().Key, b.Keyed(), b.Config().SealMode)
	}
	clear(key) // the caller's copy may go: the bridge holds its own
	u, err := New(Config{Role: RoleHost})
	if err != nil {
		t.Fatal(err)
	}
	if u.Rekey() != ErrUnkeyed || !errors.Is(u.InstallKey(2, pairKey(2)), ErrUnkeyed) || u.ActivateKey() != ErrUnkeyed {
		t.Fatal("key methods of an unkeyed bridge must return ErrUnkeyed")
	}
	if err := b.InstallKey(0, pairKey(2)); !errors.Is(err, seal.ErrKey) {
		t.Fatalf("InstallKey of a generation not newer: %v, want seal.ErrKey", err)
	}
}

// Sides with different keys never come up; every frame is refused as
// forged.
func TestKeyMismatchNeverUp(t *testing.T) {
	t.Parallel()
	hc, gc := keyed(Config{}, seal.ModeGCM), keyed(Config{}, seal.ModeGCM)
	gc.Key = pairKey(2)
	p := newTestPair(t, hc, gc)
	p.advance(5*time.Millisecond, 100*time.Microsecond)
	if p.h.State() == StateUp || p.g.State() == StateUp {
		t.Fatal("pair with different keys came up")
	}
	c := p.g.Counters()
	if c.DroppedForged == 0 || c.DroppedForged != c.FramesDropped || c.FramesReceived != 0 {
		t.Fatalf("GPU side: forged %d, dropped %d, received %d", c.DroppedForged, c.FramesDropped, c.FramesReceived)
	}
}

// A keyed bridge answers unsealed frames with nothing: an unkeyed peer
// never brings it up.
func TestKeyedRefusesUnkeyedPeer(t *testing.T) {
	t.Parallel()
	p := newTestPair(t, keyed(Config{}, seal.ModeGCM), Config{})
	p.advance(5*time.Millisecond, 100*time.Microsecond)
	if p.h.State() == StateUp {
		t.Fatal("keyed side came up with an unkeyed peer")
	}
	if c := p.h.Counters(); c.DroppedUnsealed == 0 || c.FramesReceived != 0 {
		t.Fatalf("keyed side: unsealed drops %d, frames received %d", c.DroppedUnsealed, c.FramesReceived)
	}
	if c := p.g.Counters(); c.FramesDropped == 0 || c.FramesReceived != 0 {
		t.Fatalf("unkeyed side took %d sealed frames (dropped %d)", c.FramesReceived, c.FramesDropped)
	}
}

// TestRestartWithClockSetBackRepeatsNoHandshakeNonce starts a keyed host
// side twice with the same static pair key, the wall clock set back to
// the first start's for the second (a restart after the clock was stepped
// back), so both number their HELLOs alike. Under GCM a nonce repeated
// under the (static) handshake key repeats the keystream: encrypted body
// XOR plain body (the plain frame the bridge sealed is its scratch). No
// keystream of the second start may equal one of the first's.
func TestRestartWithClockSetBackRepeatsNoHandshakeNonce(t *testing.T) {
	t.Parallel()
	wall := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	for start := range 2 {
		b, err := New(keyed(Config{Role: RoleHost, PairID: 0x123456}, seal.ModeGCM)) // Seed 0: crypto/rand, as daemons
		if err != nil {
			t.Fatal(err)
		}
		b.SetWallClock(wall)
		buf := make([]byte, b.Config().MTU)
		hellos := 0
		for now := time.Duration(0); hellos < 20; now += b.Config().HelloInterval {
			n := b.NextFrame(now, buf)
			if n == 0 {
				continue
			}
			if buf[encap.HeaderLen+1]&0x80 == 0 {
				t.Fatalf("start %d: frame at %v is not under the handshake key", start, now)
			}
			hellos++
			plainBody := b.keys.plain[encap.HeaderLen : encap.HeaderLen+encap.Header(b.keys.plain).BodyLen()]
			ct := buf[n-seal.TagLen-len(plainBody) : n-seal.TagLen]
			ks := make([]byte, len(ct))
			for i := range ks {
				ks[i] = ct[i] ^ plainBody[i]
			}
			k := string(ks)
			if start == 1 && seen[k] {
				t.Fatalf("HELLO %d of the restarted bridge (handshake packet number %x) repeats a keystream of the first start: a nonce repeated under the handshake key", hellos, buf[44:52])
			}
			seen[k] = true
		}
	}
}

// KEY-5: a keyed bridge's RESET goes out under the handshake key (its
// session keys are gone by the time it is sent), so it reaches the peer and
// takes that session down at once, as a RESET.
func TestKeyedResetReachesPeer(t *testing.T) {
	for _, mode := range modes {
		p := newKeyedPair(t, mode, Config{}, Config{})
		p.up()
		p.h.Reset(p.now)
		p.run()
		reason := ""
		for _, e := range p.gev {
			if e.Kind == EventLinkDown {
				reason = e.Reason
			}
		}
		if !strings.Contains(reason, "RESET") || p.h.Counters().SealFailures != 0 {
			t.Fatalf("%v: GPU side link-down reason %q, host seal failures %d; want a RESET and none", mode, reason, p.h.Counters().SealFailures)
		}
	}
}
