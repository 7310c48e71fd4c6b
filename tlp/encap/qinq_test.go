package encap_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// insertTag returns frame with a 4-byte tag (tpid, tci) inserted before
// its EtherType field: written by hand, so that a builder bug cannot hide a
// parser bug.
func insertTag(frame []byte, tpid, tci uint16) []byte {
	out := append([]byte(nil), frame[:12]...)
	out = append(out, byte(tpid>>8), byte(tpid), byte(tci>>8), byte(tci))
	return append(out, frame[12:]...)
}

// TestQinQ parses frames with two tags, outer 802.1ad (0x88a8), stacked
// 802.1Q (0x8100) and pre-standard (0x9100) over an 802.1Q tag, for each
// encapsulation: both tags are read, outermost first, and the TLPs and
// addresses behind them are found.
func TestQinQ(t *testing.T) {
	t.Parallel()
	l3 := &encap.L3{Src: ipA, Dst: ipB}
	eth, _ := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd})
	udp, _ := encap.AppendDxpuUDP(nil, exampleL2(), l3, exampleFields(), [][]byte{exampleMRd})
	nt, _ := encap.AppendNetTLP(nil, exampleL2(), l3, 9, 10, exampleMRd)
	untagged := map[encap.Encap][]byte{encap.EncapDxpuEth: eth, encap.EncapDxpuUDP: udp, encap.EncapNetTLP: nt}
	const innerTCI, outerTCI = 0xa064, 0x30c8 // PCP 5 VID 100; PCP 1 DEI VID 200
	for _, outer := range []uint16{encap.EtherTypeQinQ, encap.EtherTypeVLAN, encap.EtherTypeQinQv1} {
		for enc, frame := range untagged {
			name := fmt.Sprintf("%#04x/%v", outer, enc)
			qinq := insertTag(insertTag(frame, encap.EtherTypeVLAN, innerTCI), outer, outerTCI)
			f, err := encap.ParseFrame(qinq, nil)
			if err != nil || f.Encap() != enc || f.NumTLPs() != 1 || f.NumVLANs() != 2 {
				t.Errorf("%s: %v with %d TLPs and %d tags (%v), want %v with 1 TLP and 2 tags", name, f.Encap(), f.NumTLPs(), f.NumVLANs(), err, enc)
				continue
			}
			if tpid, tci := f.VLANTag(0); tpid != outer || tci != outerTCI {
				t.Errorf("%s: outer tag %#04x %#04x", name, tpid, tci)
			}
			if tpid, tci := f.VLANTag(1); tpid != encap.EtherTypeVLAN || tci != innerTCI {
				t.Errorf("%s: inner tag %#04x %#04x", name, tpid, tci)
			}
			if vid, ok := f.VLAN(); !ok || vid != 200 {
				t.Errorf("%s: VLAN() %d %v, want the outer VID 200", name, vid, ok)
			}
			if b, tr := f.TLP(0); tr || !bytes.Equal(b, exampleMRd) {
				t.Errorf("%s: TLP %x (truncated %v)", name, b, tr)
			}
			if enc != encap.EncapDxpuEth && (f.SrcIP() != ipA || f.DstIP() != ipB || f.EtherType() != encap.EtherTypeIPv4) {
				t.Errorf("%s: %v -> %v, EtherType %#04x", name, f.SrcIP(), f.DstIP(), f.EtherType())
			}
			// The builders write the same frame.
			l2 := exampleL2()
			l2.Tagged, l2.VLAN, l2.PCP = true, 100, 5
			l2.OuterTPID, l2.OuterVLAN, l2.OuterPCP = outer, 200, 1
			var built []byte
			switch enc {
			case encap.EncapDxpuEth:
				built, err = encap.AppendDxpuEth(nil, l2, exampleFields(), [][]byte{exampleMRd})
			case encap.EncapDxpuUDP:
				built, err = encap.AppendDxpuUDP(nil, l2, l3, exampleFields(), [][]byte{exampleMRd})
			case encap.EncapNetTLP:
				built, err = encap.AppendNetTLP(nil, l2, l3, 9, 10, exampleMRd)
			}
			// The hand-made frame has DEI set in the outer tag; L2 has no DEI.
			qinq[14] &^= 0x10
			if err != nil || !bytes.Equal(built, qinq) {
				t.Errorf("%s: builder wrote\n %x (%v), want\n %x", name, built, err, qinq)
			}
		}
	}
}

// TestVLANErrors: a third tag, a tag cut by the frame's end, and an outer
// tag the builders cannot write are errors naming the offset.
func TestVLANErrors(t *testing.T) {
	t.Parallel()
	eth, _ := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd})
	three := insertTag(insertTag(insertTag(eth, encap.EtherTypeVLAN, 1), encap.EtherTypeVLAN, 2), encap.EtherTypeQinQ, 3)
	cases := []struct {
		name  string
		frame []byte
		want  error
		off   int
	}{
		{"three tags", three, encap.ErrVLAN, 20},
		{"outer tag cut", three[:17], encap.ErrShort, 12},
		{"inner tag cut", three[:21], encap.ErrShort, 16},
	}
	for _, c := range cases {
		_, err := encap.ParseFrame(c.frame, nil)
		var fe *encap.FrameError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Offset != c.off || fe.Field != "vlan" {
			t.Errorf("%s: %v, want %v at offset %d", c.name, err, c.want, c.off)
		}
	}
	for _, l2 := range []*encap.L2{
		{OuterTPID: encap.EtherTypeQinQ},               // no inner tag
		{Tagged: true, OuterTPID: encap.EtherTypeIPv4}, // not a TPID
	} {
		dst := []byte{7}
		if out, err := encap.AppendDxpuEth(dst, l2, exampleFields(), nil); !errors.Is(err, encap.ErrVLAN) || len(out) != 1 {
			t.Errorf("L2 %+v: %v", l2, err)
		}
	}
}
