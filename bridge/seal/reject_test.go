package seal_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestEveryBitIsProtected flips each bit of a sealed frame in turn: the
// frame is refused, the channel's state does not move, and the original
// still opens afterwards.
func TestEveryBitIsProtected(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		host, gpu := pair(t, m, func(c *seal.Config) { c.RekeyAfter, c.PreviousGrace = 4, 2 })
		// Move both sides a few epochs on so that next/previous keys exist.
		for i := range 9 {
			f, err := host.Seal(nil, plainFrame(encap.MsgTLP, uint32(i), []byte("warm-up body")))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gpu.Open(f); err != nil {
				t.Fatalf("warm-up %d: %v", i, err)
			}
			r, err := gpu.Seal(nil, plainFrame(encap.MsgAck, 0, nil))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := host.Open(r); err != nil {
				t.Fatalf("warm-up ack %d: %v", i, err)
			}
		}
		plain := plainFrame(encap.MsgTLP, 99, []byte("sixteen byte TLP and then some"))
		sealed, err := host.Seal(nil, plain)
		if err != nil {
			t.Fatal(err)
		}
		before, beforeCtr := gpu.State(), gpu.Counters()
		for bit := 0; bit < 8*len(sealed); bit++ {
			f := bytes.Clone(sealed)
			f[bit/8] ^= 1 << (bit % 8)
			if body, err := gpu.Open(f); err == nil {
				t.Fatalf("%v: frame with bit %d (byte %d) flipped opened: %x", m, bit, bit/8, body)
			}
			if st := gpu.State(); st != before {
				t.Fatalf("%v: refusing bit %d moved the state:\n%+v\n%+v", m, bit, before, st)
			}
		}
		c := gpu.Counters()
		if c.Opened != beforeCtr.Opened {
			t.Fatalf("%v: %d frames opened during the flips", m, c.Opened-beforeCtr.Opened)
		}
		if c.AuthFailed == 0 || c.UnknownEpoch == 0 || c.Malformed == 0 || c.NotSealed == 0 {
			t.Errorf("%v: the flips did not reach every check: %+v", m, c)
		}
		got, err := gpu.OpenFrame(sealed)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%v: the original no longer opens after the forgeries: %v", m, err)
		}
	}
}

// TestForgedAndReplayed covers the measured attacks: a frame built with
// only the pair ID (plain, or with the SEALED flag and a made-up tag), a
// replay, a frame from an earlier session, one from the other direction.
func TestForgedAndReplayed(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	write := plainFrame(encap.MsgTLP, 1, []byte{0x40, 0, 0, 1, 1, 0, 0, 0xff, 0xf0, 0, 0x10, 0, 0xde, 0xad, 0xbe, 0xef})

	if _, err := gpu.Open(bytes.Clone(write)); !errors.Is(err, seal.ErrNotSealed) {
		t.Errorf("unkeyed frame: %v, want ErrNotSealed", err)
	}
	forged := append(bytes.Clone(write[:encap.HeaderLen]), make([]byte, seal.SecHeaderLen)...)
	forged = append(forged, write[encap.HeaderLen:]...)
	forged = append(forged, make([]byte, seal.TagLen)...)
	forged[0] |= seal.FlagSealed
	encap.Header(forged).SetBodyLen(len(forged) - encap.HeaderLen)
	forged[encap.HeaderLen+1] = byte(seal.ModeGCM)
	forged[encap.HeaderLen+3] = 1 // generation 1, epoch 0, packet number 0: all guessable
	if _, err := gpu.Open(forged); !errors.Is(err, seal.ErrAuth) {
		t.Errorf("forged tag: %v, want ErrAuth", err)
	}

	sealed, err := host.Seal(nil, write)
	if err != nil {
		t.Fatal(err)
	}
	captured := bytes.Clone(sealed)
	if _, err := gpu.Open(sealed); err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(bytes.Clone(captured)); !errors.Is(err, seal.ErrReplayed) {
		t.Errorf("replay: %v, want ErrReplayed", err)
	}
	// The host side's own frame reflected back at it: other direction, other key.
	if _, err := host.Open(bytes.Clone(captured)); !errors.Is(err, seal.ErrAuth) {
		t.Errorf("reflected frame: %v, want ErrAuth", err)
	}
	// The GPU side restarts: new nonce, new session keys, empty windows.
	if err := gpu.StartSession([]byte{1, 2, 3, 4, 5, 6, 7, 8}, hostNonce); err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(bytes.Clone(captured)); !errors.Is(err, seal.ErrAuth) {
		t.Errorf("frame of an earlier session: %v, want ErrAuth", err)
	}
	// The host side restarts instead: the same, whichever nonce changed.
	if err := gpu.StartSession(gpuNonce, []byte{9, 9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(bytes.Clone(captured)); !errors.Is(err, seal.ErrAuth) {
		t.Errorf("frame from before the host side restarted: %v, want ErrAuth", err)
	}
	gpu.EndSession()
	if _, err := gpu.Open(bytes.Clone(captured)); !errors.Is(err, seal.ErrNoSession) {
		t.Errorf("session frame with no session: %v, want ErrNoSession", err)
	}
	// Another pair's channel with the same key material refuses it too.
	other, err := seal.New(seal.Config{PairID: testPair + 1, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.StartSession(gpuNonce, hostNonce); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(bytes.Clone(captured)); !errors.Is(err, seal.ErrAuth) {
		t.Errorf("frame of another pair: %v, want ErrAuth", err)
	}
}

// TestBadInput: malformed frames and calls get errors naming the field
// and offset, matching the sentinels, and never panic.
func TestBadInput(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	good, err := host.Seal(nil, plainFrame(encap.MsgTLP, 1, make([]byte, 20)))
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	gmac, _ := pair(t, seal.ModeGMAC, nil)
	gmacFrame, err := gmac.Seal(nil, plainFrame(encap.MsgTLP, 1, make([]byte, 20)))
	if err != nil {
		t.Fatal(err)
	}
	opens := []struct {
		name  string
		frame []byte
		want  error
		field string
	}{
		{"empty", nil, seal.ErrShort, "dxpu.header at offset 0"},
		{"39 bytes", good[:39], seal.ErrShort, "dxpu.header at offset 0"},
		{"version 2", mod(func(f []byte) []byte { f[0] = 0x20 | f[0]&0xf; return f }), seal.ErrVersion, "dxpu.version at offset 0"},
		{"flag clear", mod(func(f []byte) []byte { f[0] &^= seal.FlagSealed; return f }), seal.ErrNotSealed, "dxpu.flags at offset 0"},
		{"body under overhead", mod(func(f []byte) []byte { encap.Header(f).SetBodyLen(27); return f }), seal.ErrShort, "dxpu.body_length at offset 6"},
		{"body beyond frame", good[:len(good)-1], seal.ErrBodyLength, "dxpu.body_length at offset 6"},
		{"mode", gmacFrame, seal.ErrMode, "seal.kind at offset 41"},
		{"reserved kind bits", mod(func(f []byte) []byte { f[41] |= 0x10; return f }), seal.ErrReserved, "seal.kind at offset 41"},
		{"unknown epoch", mod(func(f []byte) []byte { f[40] = 7; return f }), seal.ErrUnknownEpoch, "seal.epoch/generation at offset 40"},
		{"unknown generation", mod(func(f []byte) []byte { f[43] = 9; return f }), seal.ErrUnknownEpoch, "seal.epoch/generation at offset 40"},
		{"handshake epoch", mod(func(f []byte) []byte { f[41] |= 0x80; return f }), nil, ""},
		{"tag", mod(func(f []byte) []byte { f[len(f)-1] ^= 1; return f }), seal.ErrAuth, "seal.tag"},
	}
	for _, c := range opens {
		_, err := gpu.Open(c.frame)
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: opened", c.name)
			}
			continue
		}
		var fe *seal.FrameError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want %v naming %q", c.name, err, c.want, c.field)
		}
	}
	// Trailing padding after the body is ignored.
	padded := append(bytes.Clone(good), 0, 0, 0, 0)
	if _, err := gpu.Open(padded); err != nil {
		t.Errorf("padded frame: %v", err)
	}

	seals := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"short", make([]byte, 12), seal.ErrShort},
		{"version", func() []byte { f := plainFrame(encap.MsgAck, 0, nil); f[0] = 0x27; return f }(), seal.ErrVersion},
		{"sealed twice", good, seal.ErrAlreadySealed},
		{"body length", plainFrame(encap.MsgTLP, 0, make([]byte, 4))[:42], seal.ErrBodyLength},
		{"too long", plainFrame(encap.MsgTLP, 0, make([]byte, seal.MaxBody+1)), seal.ErrTooLong},
	}
	for _, c := range seals {
		if _, err := host.Seal(nil, c.frame); !errors.Is(err, c.want) {
			t.Errorf("Seal %s: %v, want %v", c.name, err, c.want)
		}
	}

	if _, err := seal.New(seal.Config{PairID: 1, Role: encap.RoleHost, Mode: seal.ModeGCM}, 1, make([]byte, 16)); !errors.Is(err, seal.ErrKey) {
		t.Errorf("16-byte key: %v, want ErrKey", err)
	}
	for _, cfg := range []seal.Config{
		{PairID: 1 << 24, Role: encap.RoleHost, Mode: seal.ModeGCM},
		{PairID: 1, Role: 3, Mode: seal.ModeGCM},
		{PairID: 1, Role: encap.RoleHost, Mode: 3},
		{PairID: 1, Role: encap.RoleHost, Mode: seal.ModeGCM, RekeyAfter: 10, PreviousGrace: 11},
		{PairID: 1, Role: encap.RoleHost, Mode: seal.ModeGCM, PreviousGraceTime: -time.Second},
	} {
		if _, err := seal.New(cfg, 1, testKey(0)); !errors.Is(err, seal.ErrConfig) {
			t.Errorf("config %+v: %v, want ErrConfig", cfg, err)
		}
	}
	if err := host.StartSession([]byte{1, 2, 3}, gpuNonce); !errors.Is(err, seal.ErrConfig) {
		t.Errorf("3-byte nonce: %v, want ErrConfig", err)
	}
	if err := host.InstallKey(1, testKey(1)); !errors.Is(err, seal.ErrKey) {
		t.Errorf("reinstalling generation 1: %v, want ErrKey", err)
	}
	if err := host.InstallKey(257, testKey(1)); !errors.Is(err, seal.ErrKey) {
		t.Errorf("generation 257 while 1 is held: %v, want ErrKey", err)
	}
}
