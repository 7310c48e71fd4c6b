package encap_test

import (
	"errors"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// FuzzWalk checks Walk on any input: errors are *FrameErrors with a
// sentinel and an offset inside the frame; the offsets it reports follow
// from the headers it walked, read back through the views; and ParseFrame,
// which is Walk plus the dxpu and NetTLP rules, reports the same layers.
func FuzzWalk(f *testing.F) {
	fuzzSeeds(f)
	qinq := &encap.L2{Tagged: true, VLAN: 1, OuterTPID: encap.EtherTypeQinQ, OuterVLAN: 2}
	b, _ := encap.AppendDxpuUDP(nil, qinq, &encap.L3{Src: ipA, Dst: ipB}, exampleFields(), [][]byte{exampleMRd})
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := encap.Walk(data, nil)
		fr, perr := encap.ParseFrame(data, nil)
		if err != nil {
			var fe *encap.FrameError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > len(data) || fe.Field == "" || !errors.Is(perr, fe.Err) {
				t.Fatalf("Walk error %v (ParseFrame %v) is not a FrameError with an offset in 0..%d", err, perr, len(data))
			}
			if l.Encap != encap.EncapNone || l.Payload != 0 {
				t.Fatalf("failed walk reports %v at %d", l.Encap, l.Payload)
			}
			return
		}
		if l.Tags > encap.MaxVLANTags || l.Net != encap.EthTypeOffset+encap.VLANTagLen*l.Tags+2 || l.Net > len(data) {
			t.Fatalf("%d tags, network layer at %d of %d", l.Tags, l.Net, len(data))
		}
		for i := 0; i < l.Tags; i++ {
			if tpid := encap.VLAN(data[encap.EthTypeOffset+encap.VLANTagLen*i:]).TPID(); !encap.IsVLANTPID(tpid) {
				t.Fatalf("tag %d has TPID %#04x", i, tpid)
			}
		}
		if et := encap.Ethernet(data[l.Net-encap.EthHeaderLen:]).Type(); et != l.EtherType || encap.IsVLANTPID(et) {
			t.Fatalf("EtherType %#04x, Walk says %#04x", et, l.EtherType)
		}
		if l.IPv4 != 0 {
			ip := encap.IPv4(data[l.IPv4:])
			if l.IPv4 != l.Net || l.EtherType != encap.EtherTypeIPv4 || ip.Version() != 4 || ip.HeaderLen() < 20 || !ip.ChecksumValid() {
				t.Fatalf("IPv4 at %d accepted: version %d, IHL %d", l.IPv4, ip.Version(), ip.HeaderLen())
			}
			if l.UDP != 0 && (l.UDP != l.IPv4+ip.HeaderLen() || ip.Protocol() != encap.IPProtoUDP || ip.MoreFragments() || ip.FragmentOffset() != 0 ||
				l.UDPEnd != l.UDP+encap.UDP(data[l.UDP:]).Length() || l.UDPEnd > l.IPv4+ip.TotalLen()) {
				t.Fatalf("UDP at %d..%d behind IPv4 at %d", l.UDP, l.UDPEnd, l.IPv4)
			}
		}
		switch l.Encap {
		case encap.EncapDxpuEth:
			if l.EtherType != encap.EtherType || l.Payload != l.Net || l.IPv4 != 0 {
				t.Fatalf("dxpu-eth: %+v", l)
			}
		case encap.EncapDxpuUDP, encap.EncapNetTLP:
			if l.UDP == 0 || l.Payload != l.UDP+encap.UDPHeaderLen {
				t.Fatalf("%v: %+v", l.Encap, l)
			}
			if u := encap.UDP(data[l.UDP:]); l.Encap == encap.EncapDxpuUDP && u.DstPort() != encap.DefaultUDPPort {
				t.Fatalf("dxpu-udp to port %d", u.DstPort())
			}
		case encap.EncapNone:
			if l.Payload != 0 || l.UDP != 0 {
				t.Fatalf("no encapsulation but %+v", l)
			}
		}
		if fr.Encap() != l.Encap || fr.NumVLANs() != l.Tags || fr.HasIPv4() != (l.IPv4 != 0) || fr.EtherType() != l.EtherType ||
			perr == nil && fr.HeaderOffset() != l.Payload {
			t.Fatalf("ParseFrame (%v) reports %v, %d tags, header at %d; Walk %+v", perr, fr.Encap(), fr.NumVLANs(), fr.HeaderOffset(), l)
		}
		if l.IPv4 != 0 && (fr.SrcIP() != encap.IPv4(data[l.IPv4:]).SrcAddr() || fr.DstIP() != encap.IPv4(data[l.IPv4:]).DstAddr()) {
			t.Fatalf("addresses differ")
		}
	})
}
