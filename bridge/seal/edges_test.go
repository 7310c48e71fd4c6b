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

// Edge cases the other tests leave open: each test here pins a boundary
// that a one-character change of the code would move without another test
// noticing.

// TestPreviousKeyDeadlineFromTheSwitch: the previous key's grace time runs
// from the first frame under the new key, on the channel's own clock,
// which a Tick with an earlier time does not set back; later Ticks do not
// move the deadline.
func TestPreviousKeyDeadlineFromTheSwitch(t *testing.T) {
	t.Parallel()
	const grace = 10 * time.Millisecond
	host, gpu := pair(t, seal.ModeGCM, func(c *seal.Config) { c.PreviousGraceTime = grace })
	gpu.Tick(50 * time.Millisecond)
	gpu.Tick(time.Millisecond) // earlier: the channel's time stays 50ms
	host.Rekey()
	f, err := host.Seal(nil, plainFrame(encap.MsgAck, 1, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gpu.Open(f); err != nil { // the switch, at 50ms
		t.Fatal(err)
	}
	want := 50*time.Millisecond + grace
	if d, ok := gpu.Deadline(); !ok || d != want {
		t.Fatalf("deadline %v %v, want %v", d, ok, want)
	}
	gpu.Tick(55 * time.Millisecond)
	if d, ok := gpu.Deadline(); !ok || d != want {
		t.Fatalf("deadline after a later Tick %v %v, want %v", d, ok, want)
	}
	gpu.Tick(want - 1)
	if !gpu.State().RxPrevious {
		t.Fatal("previous key retired before its deadline")
	}
	gpu.Tick(want)
	if gpu.State().RxPrevious {
		t.Fatal("previous key still open at its deadline")
	}
}

// TestKeyLogKeepsEverySession: ReadKeyLog drops a secret logged twice
// (both sides of a pair, one file) but keeps every session of a pair and
// generation: they differ in nonces and secret, not in pair or generation.
func TestKeyLogKeepsEverySession(t *testing.T) {
	t.Parallel()
	sess := func(role encap.Role, nonce, prk byte) seal.Secret {
		return seal.Secret{PairID: 9, Generation: 3, Role: role, Mode: seal.ModeGCM,
			HostNonce: bytes.Repeat([]byte{nonce}, 4), GPUNonce: bytes.Repeat([]byte{nonce + 1}, 8),
			PRK: bytes.Repeat([]byte{prk}, seal.KeyLen)}
	}
	hs := seal.Secret{Handshake: true, PairID: 9, Generation: 3, Role: encap.RoleHost, Mode: seal.ModeGCM,
		PRK: bytes.Repeat([]byte{0xee}, seal.KeyLen)}
	hsOther := hs
	hsOther.Role = encap.RoleGPU
	var log []byte
	for _, s := range []seal.Secret{hs, sess(encap.RoleHost, 1, 0xa1), sess(encap.RoleGPU, 1, 0xa1), hsOther,
		sess(encap.RoleHost, 5, 0xa2), sess(encap.RoleHost, 7, 0xa3)} {
		log = s.AppendLine(log)
	}
	got, err := seal.ReadKeyLog(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0xee, 0xa1, 0xa2, 0xa3}
	if len(got) != len(want) {
		t.Fatalf("%d secrets, want %d:\n%s", len(got), len(want), log)
	}
	for i, s := range got {
		if s.PRK[0] != want[i] {
			t.Errorf("secret %d is %x..., want %x...", i, s.PRK[0], want[i])
		}
	}
}

// TestKeyLogNonceLength: session nonces in a key log line are 4 to 32
// bytes, as StartSession takes them.
func TestKeyLogNonceLength(t *testing.T) {
	t.Parallel()
	line := func(host, gpu int) string {
		return "DXPU_SESSION_SECRET pair=1 gen=1 role=host mode=aes-256-gcm host_nonce=" +
			strings.Repeat("ab", host) + " gpu_nonce=" + strings.Repeat("cd", gpu) + " secret=" + strings.Repeat("01", seal.KeyLen)
	}
	for _, c := range []struct {
		host, gpu int
		ok        bool
	}{
		{4, 4, true}, {32, 32, true}, {4, 32, true},
		{3, 4, false}, {4, 3, false}, {33, 4, false}, {4, 33, false}, {0, 4, false},
	} {
		s, err := seal.ParseKeyLogLine(line(c.host, c.gpu))
		switch {
		case c.ok && (err != nil || len(s.HostNonce) != c.host || len(s.GPUNonce) != c.gpu):
			t.Errorf("nonces of %d and %d bytes: %v", c.host, c.gpu, err)
		case !c.ok && !errors.Is(err, seal.ErrKeyLog):
			t.Errorf("nonces of %d and %d bytes: %v, want ErrKeyLog", c.host, c.gpu, err)
		}
	}
}

// TestSealHandshakeBodyLimit: a handshake frame's body and its larger
// overhead must fit the 16-bit body length: the largest one seals and
// opens, anything longer is refused.
func TestSealHandshakeBodyLimit(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	hello := func(n int) []byte {
		body := make([]byte, n)
		body[0], body[1], body[2] = byte(encap.CtlHello), 1, byte(encap.RoleGPU)
		return plainFrame(encap.MsgControl, 0, body)
	}
	max := 0xffff - seal.HandshakeOverhead
	f, err := gpu.SealHandshake(nil, hello(max), 1)
	if err != nil {
		t.Fatalf("body of %d bytes: %v", max, err)
	}
	if n := encap.Header(f).BodyLen(); n != 0xffff {
		t.Fatalf("sealed body length %d, want 65535", n)
	}
	if body, err := host.Open(f); err != nil || len(body) != max {
		t.Fatalf("open: %d bytes, %v", len(body), err)
	}
	for _, n := range []int{max + 1, max + seal.BootIDLen, seal.MaxBody} {
		if _, err := gpu.SealHandshake(nil, hello(n), 2); !errors.Is(err, seal.ErrTooLong) {
			t.Errorf("body of %d bytes: %v, want ErrTooLong", n, err)
		}
	}
}

// TestHandshakePacketNumbersEnd: the handshake packet number 2^64-1 is
// never used (the next would wrap to 0 and repeat nonces): a clock at it
// is refused, and after 2^64-2 every later frame is.
func TestHandshakePacketNumbersEnd(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGMAC, nil)
	hello := helloFrame(encap.CtlHello)
	if _, err := gpu.SealHandshake(nil, hello, ^uint64(0)); !errors.Is(err, seal.ErrKeyExhausted) {
		t.Fatalf("clock 2^64-1: %v, want ErrKeyExhausted", err)
	}
	f, err := gpu.SealHandshake(nil, hello, ^uint64(0)-1)
	if err != nil {
		t.Fatalf("clock 2^64-2: %v", err)
	}
	if _, err := host.Open(f); err != nil {
		t.Fatal(err)
	}
	for _, clock := range []uint64{0, 1, ^uint64(0)} {
		if _, err := gpu.SealHandshake(nil, hello, clock); !errors.Is(err, seal.ErrKeyExhausted) {
			t.Fatalf("clock %d after 2^64-2: %v, want ErrKeyExhausted", clock, err)
		}
	}
	if c := gpu.Counters(); c.Exhausted != 4 || c.SealedHandshake != 1 {
		t.Fatalf("exhausted %d, sealed %d; want 4 and 1", c.Exhausted, c.SealedHandshake)
	}
}

// TestHandshakeEpochAndEchoMustBeZero: a handshake frame's epoch and echo
// bytes are reserved: set, the frame is refused as ErrReserved before its
// tag is checked.
func TestHandshakeEpochAndEchoMustBeZero(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		host, gpu := pair(t, m, nil)
		f, err := gpu.SealHandshake(nil, helloFrame(encap.CtlHello), 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, off := range []int{encap.HeaderLen, encap.HeaderLen + 2} {
			bad := bytes.Clone(f)
			bad[off] = 1
			_, err := host.Open(bad)
			if !errors.Is(err, seal.ErrReserved) || !strings.Contains(err.Error(), "seal.epoch/echo at offset 40") {
				t.Errorf("%v: byte %d set: %v, want ErrReserved", m, off, err)
			}
		}
		if c := host.Counters(); c.Malformed != 2 || c.AuthFailed != 0 {
			t.Errorf("%v: malformed %d auth failed %d, want 2 and 0", m, c.Malformed, c.AuthFailed)
		}
		if _, err := host.Open(f); err != nil {
			t.Errorf("%v: the frame itself: %v", m, err)
		}
	}
}

// TestUnsealerRejectsMalformed: offline, a frame with reserved kind bits,
// an unknown mode or a handshake body too short for the boot ID and tag is
// refused for what it is, not as a frame no secret opens.
func TestUnsealerRejectsMalformed(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		var secrets []seal.Secret
		host, _ := pair(t, m, func(c *seal.Config) { c.KeyLog = func(s seal.Secret) { secrets = append(secrets, s) } })
		sess, err := host.Seal(nil, plainFrame(encap.MsgTLP, 1, make([]byte, 20)))
		if err != nil {
			t.Fatal(err)
		}
		hs, err := host.SealHandshake(nil, helloFrame(encap.CtlHello), 5)
		if err != nil {
			t.Fatal(err)
		}
		u := seal.NewUnsealer(secrets)
		for _, f := range [][]byte{sess, hs} {
			if _, _, err := u.Unseal(nil, f); err != nil {
				t.Fatalf("%v: %v", m, err)
			}
		}
		mod := func(f []byte, edit func([]byte)) []byte { f = bytes.Clone(f); edit(f); return f }
		cases := []struct {
			name  string
			frame []byte
			want  error
		}{
			{"session reserved bit 2", mod(sess, func(f []byte) { f[41] |= 0x04 }), seal.ErrReserved},
			{"session reserved bit 6", mod(sess, func(f []byte) { f[41] |= 0x40 }), seal.ErrReserved},
			{"handshake reserved bit 4", mod(hs, func(f []byte) { f[41] |= 0x10 }), seal.ErrReserved},
			{"mode 0", mod(sess, func(f []byte) { f[41] &^= 3 }), seal.ErrMode},
			{"mode 3", mod(hs, func(f []byte) { f[41] |= 3 }), seal.ErrMode},
			{"handshake body of the session overhead", mod(hs, func(f []byte) { encap.Header(f).SetBodyLen(seal.Overhead) }), seal.ErrShort},
			{"handshake body one short", mod(hs, func(f []byte) { encap.Header(f).SetBodyLen(seal.HandshakeOverhead - 1) }), seal.ErrShort},
		}
		for _, c := range cases {
			if _, _, err := u.Unseal(nil, c.frame); !errors.Is(err, c.want) {
				t.Errorf("%v: %s: %v, want %v", m, c.name, err, c.want)
			}
		}
	}
}

// TestUnknownGenerationOfSessionFrame: a session frame under a generation
// this side does not hold is counted as an unknown generation, with its
// generation byte; one of an unknown epoch under a held generation is not.
func TestUnknownGenerationOfSessionFrame(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	good, err := host.Seal(nil, plainFrame(encap.MsgTLP, 1, []byte("data")))
	if err != nil {
		t.Fatal(err)
	}
	f := bytes.Clone(good)
	f[encap.HeaderLen+3] = 9 // the generation byte
	if _, err := gpu.Open(f); !errors.Is(err, seal.ErrUnknownEpoch) {
		t.Fatalf("generation 9: %v, want ErrUnknownEpoch", err)
	}
	if c := gpu.Counters(); c.UnknownEpoch != 1 || c.UnknownGeneration != 1 || c.LastUnknownGeneration != 9 {
		t.Fatalf("generation 9: unknown key %d, unknown generation %d (latest %d); want 1, 1 (9)", c.UnknownEpoch, c.UnknownGeneration, c.LastUnknownGeneration)
	}
	f = bytes.Clone(good)
	f[encap.HeaderLen] = 5 // the epoch byte
	if _, err := gpu.Open(f); !errors.Is(err, seal.ErrUnknownEpoch) {
		t.Fatalf("epoch 5: %v, want ErrUnknownEpoch", err)
	}
	if c := gpu.Counters(); c.UnknownEpoch != 2 || c.UnknownGeneration != 1 || c.LastUnknownGeneration != 9 {
		t.Fatalf("epoch 5: unknown key %d, unknown generation %d (latest %d); want 2, 1 (9)", c.UnknownEpoch, c.UnknownGeneration, c.LastUnknownGeneration)
	}
	if _, err := gpu.Open(good); err != nil {
		t.Fatal(err)
	}
}

// TestOtherGenerationOnlyBeforeTheFirstMove: before the receiver's first
// move in a session it also opens the current epoch under another
// generation it holds (a peer that activated that generation before the
// session started); after it, a generation changes only with the next
// epoch, and the current epoch under another generation is refused.
func TestOtherGenerationOnlyBeforeTheFirstMove(t *testing.T) {
	t.Parallel()
	for _, moved := range []bool{false, true} {
		hc := seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM}
		gc := seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}
		host, err := seal.New(hc, 1, testKey(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := host.InstallKey(2, testKey(0x40)); err != nil {
			t.Fatal(err)
		}
		// Two GPU-side channels of one session: gpu seals under
		// generation 1, gpu2 activated generation 2 before the session.
		gpu, err := seal.New(gc, 1, testKey(0))
		if err != nil {
			t.Fatal(err)
		}
		gpu2, err := seal.New(gc, 1, testKey(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := gpu2.InstallKey(2, testKey(0x40)); err != nil {
			t.Fatal(err)
		}
		gpu2.ActivateKey()
		if err := host.StartSession(hostNonce, gpuNonce); err != nil {
			t.Fatal(err)
		}
		for _, g := range []*seal.Channel{gpu, gpu2} {
			if err := g.StartSession(gpuNonce, hostNonce); err != nil {
				t.Fatal(err)
			}
		}
		if moved {
			gpu.Rekey()
			f, err := gpu.Seal(nil, plainFrame(encap.MsgAck, 1, nil))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := host.Open(f); err != nil {
				t.Fatal(err)
			}
			if st := host.State(); st.RxGeneration != 1 || st.RxEpoch != 1 {
				t.Fatalf("host side receives generation %d epoch %d, want 1 and 1", st.RxGeneration, st.RxEpoch)
			}
			gpu2.Rekey() // generation 2, epoch 1: the host side's current epoch
		}
		f, err := gpu2.Seal(nil, plainFrame(encap.MsgAck, 2, nil))
		if err != nil {
			t.Fatal(err)
		}
		_, err = host.Open(f)
		if !moved && err != nil {
			t.Fatalf("generation 2 epoch 0 before the first move: %v", err)
		}
		if moved && !errors.Is(err, seal.ErrUnknownEpoch) {
			t.Fatalf("generation 2 at the current epoch after the first move: %v, want ErrUnknownEpoch", err)
		}
	}
}
