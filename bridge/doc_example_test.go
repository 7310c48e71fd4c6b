package bridge

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/tlp/encap"
)

// ackExample is the acknowledgement frame of the package documentation:
// the GPU side acknowledging three posted writes from the host side, with
// the fourth lost and the fifth held out of order, so it goes out at once
// as a NAK.
const ackExample = `
17 03 12 34 56 00 00 00  11 3c 39 fc a0 7b d7 47
00 00 00 01 04 03 04 00  04 00 00 00 00 00 80 03
00 00 80 00 00 00 80 00`

func TestDocACKExample(t *testing.T) {
	p := newTestPair(t, Config{}, Config{})
	p.up()
	n := 0
	var ack []byte
	p.drop = func(from *Bridge, f []byte) bool {
		h := encap.Header(f)
		if from == p.h && h.Type() == encap.MsgTLP {
			n++
			return n == 4 // the fourth write is lost
		}
		if from == p.g && h.Type() == encap.MsgNak && ack == nil {
			ack = append([]byte(nil), f...)
		}
		return false
	}
	for i := 0; i < 5; i++ {
		p.send(p.h, mwr(0x1000*uint64(i+1), 16))
		p.run()
	}
	p.advance(30*time.Microsecond, 10*time.Microsecond)
	if ack == nil {
		t.Fatal("no NAK captured")
	}
	got := hex.EncodeToString(ack)
	want := strings.NewReplacer(" ", "", "\n", "").Replace(ackExample)
	if got != want {
		t.Fatalf("frame\n got %s\nwant %s", got, want)
	}
}

// keyedHelloExample is the keyed HELLO of the package documentation.
const keyedHelloExample = `
18 05 12 34 56 00 00 5c  a0 7b d7 44 00 00 00 00
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
00 00 00 00 00 00 00 00  00 82 00 00 00 00 00 00
00 00 00 00 59 1f 55 6d  c8 86 20 97 01 01 01 08
c2 34 b7 bc 00 00 00 00  04 00 02 14 a0 7b d7 44
04 00 04 00 04 00 00 00  00 00 80 00 00 00 80 00
00 00 80 00 4c 0f e5 94  a7 a6 0f 85 2a 06 c9 3b
4d ef a2 7b b0 fe 91 ee  5e da 7f e5 03 4f f9 86
bf 6a 84 9f`

// TestDocKeyedHello: the first HELLO of a keyed host side (pair key
// pairKey(1): byte i is 1 xor 7i), byte for byte, and a GPU side holding
// the key opens it.
func TestDocKeyedHello(t *testing.T) {
	t.Parallel()
	h, err := New(keyed(Config{Role: RoleHost, PairID: 0x123456, Seed: 1}, seal.ModeGMAC))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, h.Config().MTU)
	n := h.NextFrame(0, buf)
	want := strings.NewReplacer(" ", "", "\n", "").Replace(keyedHelloExample)
	if got := hex.EncodeToString(buf[:n]); got != want {
		t.Fatalf("frame\n got %s\nwant %s", got, want)
	}
	g, err := New(keyed(Config{Role: RoleGPU, PairID: 0x123456, Seed: 2}, seal.ModeGMAC))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.HandleFrame(0, buf[:n]); err != nil {
		t.Fatalf("GPU side refused the HELLO: %v", err)
	}
	if g.peerSession != 0xc234b7bc || g.keys.peer[0] != 0x4c {
		t.Fatalf("GPU side learned session %#x, key nonce %x", g.peerSession, g.keys.peer)
	}
}
