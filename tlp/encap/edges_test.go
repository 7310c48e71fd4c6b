package encap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Edge cases the other tests leave open: each test here pins a boundary
// that a one-character change of the code would move without another test
// noticing.

// TestHeaderCreditLimitsAndInfiniteBits: SetCreditLimit writes each
// credit type's limit (header limits keep 16 bits) and sets or clears
// exactly that type's infinite bit; Infinite reads that bit back.
func TestHeaderCreditLimitsAndInfiniteBits(t *testing.T) {
	t.Parallel()
	isHeader := map[encap.CreditType]bool{encap.CreditPH: true, encap.CreditNPH: true, encap.CreditCplH: true}
	for ty := encap.CreditPH; ty < encap.NumCreditTypes; ty++ {
		h := make(encap.Header, encap.HeaderLen)
		h.SetCreditLimit(ty, 0x12345678, true)
		want := uint32(0x12345678)
		if isHeader[ty] {
			want = 0x5678
		}
		if got := h.CreditLimit(ty); got != want {
			t.Errorf("type %d: limit %#x, want %#x", ty, got, want)
		}
		if got := h.InfiniteMask(); got != 1<<ty {
			t.Errorf("type %d: infinite mask %#x, want %#x", ty, got, 1<<ty)
		}
		for u := encap.CreditPH; u < encap.NumCreditTypes; u++ {
			if h.Infinite(u) != (u == ty) {
				t.Errorf("type %d set: Infinite(%d) = %v", ty, u, h.Infinite(u))
			}
			if u != ty && h.CreditLimit(u) != 0 {
				t.Errorf("type %d set: type %d limit %#x", ty, u, h.CreditLimit(u))
			}
		}
		h.SetCreditLimit(ty, 7, false)
		if h.InfiniteMask() != 0 || h.Infinite(ty) || h.CreditLimit(ty) != 7 {
			t.Errorf("type %d cleared: mask %#x, limit %d", ty, h.InfiniteMask(), h.CreditLimit(ty))
		}
		for u := encap.CreditPH; u < encap.NumCreditTypes; u++ {
			h.SetCreditLimit(u, 1, true)
		}
		h.SetCreditLimit(ty, 1, false)
		if got, want := h.InfiniteMask(), uint8(0x3f&^(1<<ty)); got != want {
			t.Errorf("all infinite, then type %d cleared: mask %#x, want %#x", ty, got, want)
		}
	}
	h := make(encap.Header, encap.HeaderLen)
	h.SetCreditLimit(encap.NumCreditTypes, 5, true)
	if !bytes.Equal(h, make([]byte, encap.HeaderLen)) {
		t.Errorf("unknown credit type wrote %x", []byte(h))
	}
}

// TestSetVersionFlagsMasksFlags: flags are the low nibble; bits above it
// never reach the version, written directly or by a builder.
func TestSetVersionFlagsMasksFlags(t *testing.T) {
	t.Parallel()
	h := make(encap.Header, encap.HeaderLen)
	h.SetVersionFlags(encap.Version, 0xff)
	if h.Version() != encap.Version || h.Flags() != 0xf {
		t.Errorf("version %d flags %#x, want %d and 0xf", h.Version(), h.Flags(), encap.Version)
	}
	f := exampleFields()
	f.Flags = 0xf0 | encap.FlagAck
	frame, err := encap.AppendDxpuEth(nil, exampleL2(), f, [][]byte{exampleMRd})
	if err != nil {
		t.Fatal(err)
	}
	fr, err := encap.ParseFrame(frame, nil)
	if err != nil {
		t.Fatalf("frame built with flags %#x: %v", f.Flags, err)
	}
	if got := fr.Header().Flags(); got != encap.FlagAck {
		t.Errorf("flags %#x, want %#x", got, encap.FlagAck)
	}
}

// TestParseHeaderCountAndType: a length table that does not fit the body,
// and message types outside 1..5, are refused with their own error even
// when the bytes stop at the header.
func TestParseHeaderCountAndType(t *testing.T) {
	t.Parallel()
	hdr := func(typ encap.MsgType, count, bodyLen int, body ...byte) []byte {
		b := make([]byte, encap.HeaderLen, encap.HeaderLen+len(body))
		h := encap.Header(b)
		h.SetVersionFlags(encap.Version, 0)
		h.SetType(typ)
		h.SetCount(count)
		h.SetBodyLen(bodyLen)
		return append(b, body...)
	}
	tlp := append([]byte{0, 12}, exampleMRd...)
	cases := []struct {
		name string
		b    []byte
		want error
		off  int
	}{
		{"count 1, no body", hdr(encap.MsgTLP, 1, 0), encap.ErrTLPCount, encap.HeaderCountOffset},
		{"count 1, body 1", hdr(encap.MsgTLP, 1, 1, 0), encap.ErrTLPCount, encap.HeaderCountOffset},
		{"count 2, body 3", hdr(encap.MsgTLP, 2, 3, 0, 12, 0), encap.ErrTLPCount, encap.HeaderCountOffset},
		{"count 255, body 508", hdr(encap.MsgTLP, 255, 508), encap.ErrTLPCount, encap.HeaderCountOffset},
		{"type 0", hdr(0, 0, 0), encap.ErrMsgType, encap.HeaderTypeOffset},
		{"type 6", hdr(6, 0, 0), encap.ErrMsgType, encap.HeaderTypeOffset},
		{"type 255", hdr(255, 0, 0), encap.ErrMsgType, encap.HeaderTypeOffset},
		{"one TLP", hdr(encap.MsgTLP, 1, len(tlp), tlp...), nil, 0},
		{"no TLP", hdr(encap.MsgTLP, 0, 0), nil, 0},
		{"ack", hdr(encap.MsgAck, 0, 0), nil, 0},
		{"control", hdr(encap.MsgControl, 0, 12, make([]byte, 12)...), nil, 0},
	}
	for _, c := range cases {
		_, _, err := encap.ParseHeader(c.b)
		var fe *encap.FrameError
		switch {
		case c.want == nil && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != nil && (!errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Offset != c.off):
			t.Errorf("%s: %v, want %v at offset %d", c.name, err, c.want, c.off)
		}
	}
}

// TestBuilderBodyLimit: a body of MaxBodyLen bytes is built, one more byte
// is refused (the 16-bit body length would wrap), whether the body is a
// message or a length table and TLPs.
func TestBuilderBodyLimit(t *testing.T) {
	t.Parallel()
	ctl := &encap.Fields{Type: encap.MsgControl}
	frame, err := encap.AppendDxpuMsg(nil, exampleL2(), nil, ctl, make([]byte, encap.MaxBodyLen))
	if err != nil {
		t.Fatalf("body of %d bytes: %v", encap.MaxBodyLen, err)
	}
	if fr, err := encap.ParseFrame(frame, nil); err != nil || len(fr.Body()) != encap.MaxBodyLen {
		t.Fatalf("body of %d bytes parses as %d bytes: %v", encap.MaxBodyLen, len(fr.Body()), err)
	}
	dst := []byte{9}
	for _, n := range []int{encap.MaxBodyLen + 1, encap.MaxBodyLen + 3, encap.MaxBodyLen + 4} {
		if out, err := encap.AppendDxpuMsg(dst, exampleL2(), nil, ctl, make([]byte, n)); !errors.Is(err, encap.ErrTooLarge) || len(out) != 1 {
			t.Errorf("body of %d bytes: %v", n, err)
		}
	}
	// One TLP of 65532 bytes: 2 + 65532 = 65534 fits; two TLPs of 65532
	// bytes together with their two entries make 65536.
	if _, err := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{make([]byte, 65532)}); err != nil {
		t.Errorf("body of 65534 bytes: %v", err)
	}
	two := [][]byte{make([]byte, 32768), make([]byte, 32764)}
	if out, err := encap.AppendDxpuEth(dst, exampleL2(), exampleFields(), two); !errors.Is(err, encap.ErrTooLarge) || len(out) != 1 {
		t.Errorf("body of 65536 bytes: %v", err)
	}
}

// TestNetTLPPortEveryKind: the port carries Tag[7:0] from DW1 byte 2 of a
// request and from DW2 byte 2 of every completion kind, locked ones too.
func TestNetTLPPortEveryKind(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		b0   byte
		want uint16
	}{
		{0x00, 0x3011}, {0x20, 0x3011}, {0x40, 0x3011}, {0x01, 0x3011}, {0x04, 0x3011}, {0x44, 0x3011},
		{0x02, 0x3011}, {0x4c, 0x3011}, {0x34, 0x3011},
		{0x0a, 0x3042}, {0x4a, 0x3042}, {0x0b, 0x3042}, {0x4b, 0x3042},
	} {
		b := make([]byte, 16)
		b[0], b[6], b[10] = c.b0, 0x11, 0x42
		if got := encap.NetTLPPort(b); got != c.want {
			t.Errorf("byte 0 %#02x: port %#x, want %#x", c.b0, got, c.want)
		}
	}
	if got := encap.NetTLPPort(make([]byte, 11)); got != encap.NetTLPPortBase {
		t.Errorf("short TLP: port %#x", got)
	}
}

// TestUDPLengthOneBeyondIPv4: a UDP length one byte longer than the IPv4
// datagram leaves is refused for dxpu and NetTLP, even when Ethernet
// padding would supply the byte; the exact length is accepted.
func TestUDPLengthOneBeyondIPv4(t *testing.T) {
	t.Parallel()
	const ip, udp = 14, 34
	dx, err := encap.AppendDxpuUDP(nil, exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, exampleFields(), [][]byte{exampleMRd})
	if err != nil {
		t.Fatal(err)
	}
	nt, err := encap.AppendNetTLP(nil, exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, 1, 2, exampleMRd)
	if err != nil {
		t.Fatal(err)
	}
	for name, good := range map[string][]byte{"dxpu": dx, "nettlp": nt} {
		if _, err := encap.ParseFrame(good, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		total := int(binary.BigEndian.Uint16(good[ip+2:]))
		for _, pad := range []int{0, 8} {
			b := append(bytes.Clone(good), make([]byte, pad)...)
			binary.BigEndian.PutUint16(b[udp+4:], uint16(total-20+1))
			_, err := encap.ParseFrame(b, nil)
			var fe *encap.FrameError
			if !errors.Is(err, encap.ErrUDPLength) || !errors.As(err, &fe) || fe.Offset != udp+4 {
				t.Errorf("%s, %d bytes of padding: %v, want ErrUDPLength at offset %d", name, pad, err, udp+4)
			}
		}
	}
}

// TestControlBoundaries: the smallest max TLP (16, a 4-DW header) and the
// control types 1..5 are accepted, 15 and the types around them are not;
// the encoder keeps only the six defined infinite bits.
func TestControlBoundaries(t *testing.T) {
	t.Parallel()
	base := encap.Control{Type: encap.CtlHello, Role: encap.RoleGPU, TagBits: 10, Session: 5, Window: 1, MaxTLP: 16}
	if _, err := encap.ParseControl(base.AppendTo(nil)); err != nil {
		t.Fatalf("max TLP 16: %v", err)
	}
	for _, m := range []uint16{0, 12, 15} {
		c := base
		c.MaxTLP = m
		if _, err := encap.ParseControl(c.AppendTo(nil)); !errors.Is(err, encap.ErrControl) || !strings.Contains(errText(err), "bytes 14-15") {
			t.Errorf("max TLP %d: %v", m, err)
		}
	}
	good := base.AppendTo(nil)
	for _, ty := range []byte{0, 6, 7, 255} {
		b := bytes.Clone(good)
		b[0] = ty
		if _, err := encap.ParseControl(b); !errors.Is(err, encap.ErrControl) || !strings.Contains(errText(err), "byte 0") {
			t.Errorf("control type %d: %v", ty, err)
		}
	}
	c := base
	c.Infinite = 0xff
	b := c.AppendTo(nil)
	if b[26] != 0x3f {
		t.Errorf("infinite mask 0xff encodes as %#x, want 0x3f", b[26])
	}
	back, err := encap.ParseControl(b)
	if err != nil || back.Infinite != 0x3f {
		t.Errorf("re-parse: infinite %#x, %v", back.Infinite, err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
