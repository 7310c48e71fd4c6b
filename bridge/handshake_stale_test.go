package bridge

import (
	"errors"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// HSK-6: a bridge that knows its peer's HELLO but is not up comes up on an
// ACK frame only when its Ack is this session's ISN (what a peer that is up
// and has received nothing must send); a late frame of the peer's previous
// session, with any other Ack, is dropped and leaves it handshaking.
func TestStaleFrameDoesNotCompleteHandshake(t *testing.T) {
	b, err := New(Config{Role: RoleGPU, PairID: 42, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n := b.NextFrame(0, buf)
	h, _, err := encap.ParseHeader(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	own, err := encap.ParseControl(h.Body())
	if err != nil || own.Type != encap.CtlHello {
		t.Fatalf("first frame: %v %v, want a HELLO", own.Type, err)
	}
	if h.Seq() != own.ISN {
		t.Errorf("HELLO header Seq %#x, its ISN %#x (FRM-11)", h.Seq(), own.ISN)
	}
	peer := encap.Control{Type: encap.CtlHello, Role: encap.RoleHost, TagBits: 8, Session: 0x1234, Window: 64, MaxTLP: 4116, ISN: 500}
	for t := range peer.Credits {
		peer.Credits[t] = 64
	}
	hello := plainFrame(encap.MsgControl, 42, 500, 0, peer.AppendTo(nil))
	if err := b.HandleFrame(1000, hello); err != nil {
		t.Fatal(err)
	}
	ack := func(a uint32) []byte {
		f := plainFrame(encap.MsgAck, 42, 500, 0, nil)
		fh := encap.Header(f)
		fh.SetVersionFlags(encap.Version, encap.FlagAck|encap.FlagCredit)
		fh.SetAck(a)
		return f
	}
	if err := b.HandleFrame(2000, ack(own.ISN+77)); !errors.Is(err, ErrFrame) {
		t.Fatalf("stale ACK (Ack = ISN+77): %v, want ErrFrame", err)
	}
	if b.State() == StateUp {
		t.Fatal("a stale ACK frame completed the handshake")
	}
	noFlags := plainFrame(encap.MsgAck, 42, 500, 0, nil)
	if err := b.HandleFrame(2500, noFlags); !errors.Is(err, ErrFrame) || b.State() == StateUp {
		t.Fatalf("ACK frame without a valid Ack: %v, state %v", err, b.State())
	}
	if err := b.HandleFrame(3000, ack(own.ISN)); err != nil {
		t.Fatal(err)
	}
	if b.State() != StateUp {
		t.Fatalf("state %v after an ACK with Ack = ISN, want up", b.State())
	}
}
