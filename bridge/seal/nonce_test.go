package seal_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// refSeal seals plain the way the package doc and docs/protocol.md
// (section 11) specify, with crypto/hkdf, crypto/aes and crypto/cipher
// only: the key from the pair key by the doc's schedule, the nonce as role
// (1 byte), epoch (3 bytes) and packet number (8 bytes, big-endian), the
// additional data the header as sent plus the security header. prkSalt is
// the HKDF salt of the handshake or session PRK. Under the handshake key
// (kind bit 7) the security header ends with the sender's boot ID and the
// nonce is role (1 byte), boot ID (8 bytes), packet number (8 bytes).
func refSeal(t *testing.T, prkSalt []byte, role encap.Role, kind, gen byte, epoch uint32, pn uint64, boot []byte, plain []byte) []byte {
	t.Helper()
	prk, err := hkdf.Extract(sha256.New, testKey(0), prkSalt)
	if err != nil {
		t.Fatal(err)
	}
	info := append([]byte("dxpu-seal-v1 key"), byte(role), byte(seal.ModeGCM))
	info = binary.BigEndian.AppendUint32(info, epoch)
	key, err := hkdf.Expand(sha256.New, prk, string(info), seal.KeyLen)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	hs := kind&0x80 != 0
	nonce := []byte{byte(role), byte(epoch >> 16), byte(epoch >> 8), byte(epoch)}
	gcm, err := cipher.NewGCM(blk)
	if hs {
		nonce = append([]byte{byte(role)}, boot...)
		gcm, err = cipher.NewGCMWithNonceSize(blk, len(nonce)+8)
	}
	if err != nil {
		t.Fatal(err)
	}
	nonce = binary.BigEndian.AppendUint64(nonce, pn)

	body := plain[encap.HeaderLen:]
	ad := bytes.Clone(plain[:encap.HeaderLen])
	ad[0] |= seal.FlagSealed
	over := seal.Overhead
	if hs {
		over += len(boot)
	}
	binary.BigEndian.PutUint16(ad[6:], uint16(len(body)+over))
	ad = append(ad, byte(epoch), kind, 0, gen)
	ad = binary.BigEndian.AppendUint64(ad, pn)
	if hs {
		ad = append(ad, boot...)
	}
	return gcm.Seal(ad, nonce, body, ad)
}

// pairGen is the PRK salt's pair ID (3 bytes) and generation (4 bytes).
func pairGen(gen uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{testPair >> 16 & 0xff, testPair >> 8 & 0xff, testPair & 0xff}, gen)
}

// testBoot is the boot ID of channels built with Rand: bootRand: every
// byte differs, so a nonce with its bytes in the wrong order cannot match.
var testBoot = []byte{0xb0, 0x07, 0x1d, 0x2c, 0x3b, 0x4a, 0x59, 0x68}

func bootRand() *bytes.Reader { return bytes.NewReader(testBoot) }

// TestHandshakeKnownAnswer seals a HELLO at packet number 0x0102030405,
// where every byte of the number differs, so a nonce with the packet
// number in the wrong byte order (or place) cannot match: the worked
// example in the doc is at packet number 0, which any order encodes alike.
// The expected frame is computed independently (refSeal) and pinned in
// hex; the peer opens the independently sealed frame.
func TestHandshakeKnownAnswer(t *testing.T) {
	t.Parallel()
	const pn = 0x0102030405
	cfg := seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM, Rand: bootRand()}
	host, err := seal.New(cfg, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	hello := helloFrame(encap.CtlHello)
	got, err := host.SealHandshake(nil, hello, pn)
	if err != nil {
		t.Fatal(err)
	}
	salt := append([]byte("dxpu-seal-v1 handshake"), pairGen(1)...)
	want := refSeal(t, salt, encap.RoleHost, 0x81, 1, 0, pn, testBoot, hello)
	if !bytes.Equal(got, want) {
		t.Fatalf("HELLO at packet number %#x:\n got % x\nwant % x (spec's nonce layout)", pn, got, want)
	}
	// Ciphertext and tag, pinned: a change of the spec's derivation or of
	// refSeal shows here.
	const pinned = "f296a44b48d5032a8e9650b2" + "692738c38b9046711f09b2d3de114aec"
	if h := hex.EncodeToString(got[encap.HeaderLen+seal.HandshakeSecHeaderLen:]); h != pinned {
		t.Fatalf("HELLO ciphertext+tag %s, want %s", h, pinned)
	}

	gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	if plain, err := gpu.OpenFrame(want); err != nil || !bytes.Equal(plain, hello) {
		t.Fatalf("the reference HELLO does not open: %v", err)
	}
}

// TestSessionKnownAnswer seals the GPU side's session frame at packet
// number 0x0102 (its 259th) and compares it with refSeal's, then has the
// host side open a reference frame at packet number 0x0102030405 (built
// the spec's way): both the sealing and the opening nonce follow the
// spec's byte order, for the GPU side's role byte too.
func TestSessionKnownAnswer(t *testing.T) {
	t.Parallel()
	host, gpu := pair(t, seal.ModeGCM, nil)
	salt := append([]byte("dxpu-seal-v1 session"), pairGen(1)...)
	salt = append(append(salt, byte(len(hostNonce))), hostNonce...)
	salt = append(append(salt, byte(len(gpuNonce))), gpuNonce...)

	plain := plainFrame(encap.MsgTLP, 9, []byte{0, 12, 0, 0, 0, 1, 1, 0, 5, 0x0f, 0xf0, 0, 0x10, 0})
	var got []byte
	for range 0x0103 {
		var err error
		if got, err = gpu.Seal(got[:0], plain); err != nil {
			t.Fatal(err)
		}
	}
	want := refSeal(t, salt, encap.RoleGPU, byte(seal.ModeGCM), 1, 0, 0x0102, nil, plain)
	if !bytes.Equal(got, want) {
		t.Fatalf("GPU side's frame at packet number 0x0102:\n got % x\nwant % x (spec's nonce layout)", got, want)
	}

	far := refSeal(t, salt, encap.RoleGPU, byte(seal.ModeGCM), 1, 0, 0x0102030405, nil, plain)
	if body, err := host.Open(far); err != nil || !bytes.Equal(body, plain[encap.HeaderLen:]) {
		t.Fatalf("a reference frame at packet number 0x0102030405 does not open: %v", err)
	}
}

// TestHandshakeClockSetBackRepeatsNoNonce runs two boots of the host side
// with the same static pair key and generation, the wall clock set back
// 50 ns between them, so the second boot's handshake packet numbers run
// over the first's and past them. A nonce repeated under the (static) handshake key
// shows as a repeated GCM keystream: ciphertext XOR plaintext of a frame
// of one boot equal to that of a frame of the other. None may repeat,
// and the peer (alive through both boots) opens the second boot's frames
// only once its clock is past the first's, as KEY-5's replay rule wants.
func TestHandshakeClockSetBackRepeatsNoNonce(t *testing.T) {
	t.Parallel()
	cfg := seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM}
	gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	const frames, start, back = 100, 1_000_000, 50
	// keystream of a sealed HELLO: its encrypted body XOR the plain body,
	// wherever the layout puts the body (it ends TagLen before the end).
	keystream := func(sealed, plain []byte) string {
		body := plain[encap.HeaderLen:]
		ct := sealed[len(sealed)-seal.TagLen-len(body) : len(sealed)-seal.TagLen]
		ks := make([]byte, len(body))
		for i := range ks {
			ks[i] = ct[i] ^ body[i]
		}
		return hex.EncodeToString(ks)
	}
	seen := map[string]uint64{}
	var opened [2]int
	for boot, clock := range []uint64{start, start - back} {
		host, err := seal.New(cfg, 1, testKey(0)) // a restart: a fresh channel, the same key file
		if err != nil {
			t.Fatal(err)
		}
		for i := range uint64(frames * (boot + 1)) {
			hello := helloFrame(encap.CtlHello)
			binary.BigEndian.PutUint32(hello[encap.HeaderLen+4:], uint32(boot<<16)|uint32(i)) // each frame's own plaintext
			sealed, err := host.SealHandshake(nil, hello, clock+i)
			if err != nil {
				t.Fatal(err)
			}
			ks := keystream(sealed, hello)
			if first, ok := seen[ks]; ok {
				t.Fatalf("boot %d, clock %d repeats the keystream of boot 0, clock %d: a nonce repeated under the handshake key", boot, clock+i, first)
			}
			if boot == 0 {
				seen[ks] = clock + i
			}
			if _, err := gpu.Open(sealed); err == nil {
				opened[boot]++
			} else if !errors.Is(err, seal.ErrReplayed) {
				t.Fatalf("boot %d, clock %d: %v", boot, clock+i, err)
			}
		}
	}
	// The second boot's 200 numbers run from start-50: those up to the
	// first boot's newest (start+99) are refused as replays, the rest open.
	if want := [2]int{frames, back}; opened != want {
		t.Fatalf("the peer opened %v HELLOs of the two boots, want %v", opened, want)
	}
}

// TestHandshakeBootIDIsProtected flips each bit of a sealed HELLO, the
// boot ID's included (it is additional data), in both modes: every flip
// is refused and the original still opens; and a handshake frame too
// short to hold the boot ID and a tag is refused as short.
func TestHandshakeBootIDIsProtected(t *testing.T) {
	t.Parallel()
	for _, m := range []seal.Mode{seal.ModeGCM, seal.ModeGMAC} {
		host, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: m, Rand: bootRand()}, 1, testKey(0))
		if err != nil {
			t.Fatal(err)
		}
		gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: m}, 1, testKey(0))
		if err != nil {
			t.Fatal(err)
		}
		hello := helloFrame(encap.CtlHello)
		sealed, err := host.SealHandshake(nil, hello, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if boot := host.BootID(); !bytes.Equal(sealed[encap.HeaderLen+seal.SecHeaderLen:encap.HeaderLen+seal.HandshakeSecHeaderLen], boot[:]) || !bytes.Equal(boot[:], testBoot) {
			t.Fatalf("%v: bytes 52-59 are % x, want the boot ID % x", m, sealed[52:60], testBoot)
		}
		if len(sealed) != len(hello)+seal.HandshakeOverhead {
			t.Fatalf("%v: sealed HELLO is %d bytes, want %d + %d", m, len(sealed), len(hello), seal.HandshakeOverhead)
		}
		for bit := 0; bit < 8*len(sealed); bit++ {
			f := bytes.Clone(sealed)
			f[bit/8] ^= 1 << (bit % 8)
			if _, err := gpu.Open(f); err == nil {
				t.Fatalf("%v: HELLO with bit %d (byte %d) flipped opened", m, bit, bit/8)
			}
		}
		short := bytes.Clone(sealed[:encap.HeaderLen+seal.HandshakeOverhead-1])
		binary.BigEndian.PutUint16(short[6:], seal.HandshakeOverhead-1)
		if _, err := gpu.Open(short); !errors.Is(err, seal.ErrShort) {
			t.Fatalf("%v: handshake frame of %d body bytes: %v, want ErrShort", m, seal.HandshakeOverhead-1, err)
		}
		if plain, err := gpu.OpenFrame(sealed); err != nil || !bytes.Equal(plain, hello) {
			t.Fatalf("%v: the original no longer opens: %v", m, err)
		}
	}
}

// TestHandshakeOpenAllocatesNothing: the boot ID costs the receiver no key
// derivation: opening a genuine HELLO, and refusing forged ones each
// under a boot ID never seen, allocate nothing (a flood of forged
// handshake frames stays one AES-GCM check each).
func TestHandshakeOpenAllocatesNothing(t *testing.T) {
	host, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleHost, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := seal.New(seal.Config{PairID: testPair, Role: encap.RoleGPU, Mode: seal.ModeGCM}, 1, testKey(0))
	if err != nil {
		t.Fatal(err)
	}
	const runs = 50
	var genuine [runs + 1][]byte
	for i := range genuine {
		if genuine[i], err = host.SealHandshake(nil, helloFrame(encap.CtlHello), uint64(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	forged, err := host.SealHandshake(nil, helloFrame(encap.CtlHello), 1<<40) // above every genuine one: never a replay
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, len(forged))
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		if _, err := gpu.Open(genuine[i]); err != nil {
			t.Fatalf("HELLO %d: %v", i, err)
		}
		i++
		copy(frame, forged)
		binary.BigEndian.PutUint64(frame[encap.HeaderLen+seal.SecHeaderLen:], uint64(i)*0x9e3779b97f4a7c15) // a boot ID never seen
		if _, err := gpu.Open(frame); !errors.Is(err, seal.ErrAuth) {
			t.Fatalf("forged HELLO under boot ID %x: %v, want ErrAuth", frame[52:60], err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per genuine and forged handshake frame, want 0", allocs)
	}
}
