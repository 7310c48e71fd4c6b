package bridge

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp/encap"
)

// ackExample is the acknowledgement frame of the package documentation:
// the GPU side acknowledging three posted writes from the host side, with
// the fourth lost and the fifth held out of order, so it goes out at once
// as a NAK.
const ackExample = `
17 03 12 34 56 00 00 00  11 3c 39 fc a0 7b d7 47
00 00 00 01 00 43 00 40  00 40 00 00 00 00 08 03
00 00 08 00 00 00 08 00`

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
