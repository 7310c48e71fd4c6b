package encap_test

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp/encap"
)

// TestViewsAgreeWithGopacket reads random frames through the views at the
// offsets Walk reports and through gopacket's own decoders (an independent
// implementation of Ethernet, 802.1Q/802.1ad, IPv4 and UDP): every field
// must agree.
func TestViewsAgreeWithGopacket(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 300; iter++ {
		l2 := &encap.L2{}
		for i := range l2.Dst {
			l2.Dst[i], l2.Src[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		if r.IntN(3) > 0 {
			l2.Tagged, l2.VLAN, l2.PCP = true, uint16(r.IntN(4096)), uint8(r.IntN(8))
			if r.IntN(2) == 0 {
				l2.OuterTPID = []uint16{encap.EtherTypeQinQ, encap.EtherTypeVLAN}[r.IntN(2)]
				l2.OuterVLAN, l2.OuterPCP = uint16(r.IntN(4096)), uint8(r.IntN(8))
			}
		}
		l3 := &encap.L3{
			Src: netip.AddrFrom4([4]byte{10, byte(r.Uint32()), byte(r.Uint32()), 1}), Dst: netip.AddrFrom4([4]byte{10, 9, byte(r.Uint32()), 2}),
			SrcPort: uint16(r.Uint32()), TTL: uint8(1 + r.IntN(255)), TOS: uint8(r.Uint32()), ID: uint16(r.Uint32()),
		}
		frame, err := encap.AppendDxpuUDP(nil, l2, l3, exampleFields(), [][]byte{exampleMRd, randTLP(r, 64)})
		if err != nil {
			t.Fatal(err)
		}
		l, err := encap.Walk(frame, nil)
		if err != nil || l.Encap != encap.EncapDxpuUDP {
			t.Fatalf("iter %d: Walk %+v %v", iter, l, err)
		}
		pkt := gopacket.NewPacket(frame, layers.LinkTypeEthernet, gopacket.NoCopy)
		ge, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		gip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		gudp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ge == nil || gip == nil || gudp == nil {
			t.Fatalf("iter %d: gopacket decoded %v", iter, pkt.Layers())
		}
		eth := encap.Ethernet(frame)
		if !bytes.Equal(eth.Dst(), ge.DstMAC) || !bytes.Equal(eth.Src(), ge.SrcMAC) || eth.Type() != uint16(ge.EthernetType) {
			t.Errorf("iter %d: Ethernet %x %x %#04x, gopacket %v %v %v", iter, eth.Dst(), eth.Src(), eth.Type(), ge.DstMAC, ge.SrcMAC, ge.EthernetType)
		}
		var tags []*layers.Dot1Q
		for _, gl := range pkt.Layers() {
			if d, ok := gl.(*layers.Dot1Q); ok {
				tags = append(tags, d)
			}
		}
		if len(tags) != l.Tags {
			t.Fatalf("iter %d: %d tags, gopacket %d", iter, l.Tags, len(tags))
		}
		for i, d := range tags {
			v := encap.VLAN(frame[encap.EthTypeOffset+encap.VLANTagLen*i:])
			next := v.Next() // the EtherType or the next TPID
			if v.VID() != d.VLANIdentifier || v.PCP() != d.Priority || v.DEI() != d.DropEligible || next != uint16(d.Type) {
				t.Errorf("iter %d tag %d: VID %d PCP %d DEI %v, gopacket %+v", iter, i, v.VID(), v.PCP(), v.DEI(), d)
			}
		}
		ip := encap.IPv4(frame[l.IPv4:])
		if ip.Version() != gip.Version || ip.HeaderLen() != int(gip.IHL)*4 || ip.TOS() != gip.TOS || ip.TotalLen() != int(gip.Length) ||
			ip.ID() != gip.Id || ip.FlagsFrag()>>13 != uint16(gip.Flags) || ip.FragmentOffset() != gip.FragOffset || ip.TTL() != gip.TTL ||
			ip.Protocol() != uint8(gip.Protocol) || ip.Checksum() != gip.Checksum ||
			!bytes.Equal(ip.Src(), gip.SrcIP.To4()) || !bytes.Equal(ip.Dst(), gip.DstIP.To4()) || ip.SrcAddr() != l3.Src || ip.DstAddr() != l3.Dst {
			t.Errorf("iter %d: IPv4 view % x disagrees with gopacket %+v", iter, ip[:encap.IPv4HeaderLen], gip)
		}
		u := encap.UDP(frame[l.UDP:])
		if u.SrcPort() != uint16(gudp.SrcPort) || u.DstPort() != uint16(gudp.DstPort) || u.Length() != int(gudp.Length) || u.Checksum() != gudp.Checksum {
			t.Errorf("iter %d: UDP view % x disagrees with gopacket %+v", iter, u[:encap.UDPHeaderLen], gudp)
		}
		if !bytes.Equal(gudp.Payload, frame[l.Payload:l.UDPEnd]) {
			t.Errorf("iter %d: UDP payload at %d..%d differs from gopacket's", iter, l.Payload, l.UDPEnd)
		}
	}
}
