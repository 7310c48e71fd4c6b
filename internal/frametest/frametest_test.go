package frametest

import (
	"encoding/binary"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// TestHello: a whole dxpu CONTROL frame of the pair holding the HELLO the
// tests rely on, fresh on each call.
func TestHello(t *testing.T) {
	t.Parallel()
	b := Hello(0x123456)
	h, truncated, err := encap.ParseHeader(b)
	if err != nil || truncated || len(h) != len(b) || len(b) != encap.HeaderLen+encap.HelloLen {
		t.Fatalf("ParseHeader of %d bytes: %d bytes, truncated %v, %v; want the %d bytes whole", len(b), len(h), truncated, err, encap.HeaderLen+encap.HelloLen)
	}
	if h.Type() != encap.MsgControl || h.PairID() != 0x123456 || h.Flags() != 0 || h.Count() != 0 {
		t.Errorf("header: type %v, pair %#x, flags %#x, count %d; want CONTROL of pair 0x123456, no flags, no TLPs", h.Type(), h.PairID(), h.Flags(), h.Count())
	}
	body := h.Body()
	if encap.ControlType(body[0]) != encap.CtlHello || body[1] != encap.ControlVersion || encap.Role(body[2]) != encap.RoleGPU ||
		binary.BigEndian.Uint32(body[4:]) != 9 || binary.BigEndian.Uint32(body[8:]) != 0 || binary.BigEndian.Uint16(body[12:]) != 64 {
		t.Errorf("body % x: want a HELLO from the GPU side, session 9, no peer session, window 64", body)
	}
	b[0] = 0
	if c := Hello(0x123456); c[0] == 0 {
		t.Error("Hello returned a slice an earlier caller changed")
	}
}
