package layers_test

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp/encap"
	dxl "github.com/dxpu/dxpu/tlp/layers"
)

// BenchmarkDecodeCompare decodes one tagged dxpu-udp frame with three TLPs
// three ways: encap.ParseFrame (the hot path), a gopacket
// DecodingLayerParser with this package's layers, and gopacket.NewPacket
// (the baseline most Go packet tools use). All walk every TLP.
func BenchmarkDecodeCompare(b *testing.B) {
	frame, _ := encap.AppendDxpuUDP(nil, &encap.L2{Tagged: true, VLAN: 9}, &encap.L3{Src: ipA, Dst: ipB}, fields(), [][]byte{mrd, mwr, mrd})
	b.Run("encap.ParseFrame", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			f, _ := encap.ParseFrame(frame, nil)
			for i := 0; i < f.NumTLPs(); i++ {
				f.TLP(i)
			}
		}
	})
	b.Run("DecodingLayerParser", func(b *testing.B) {
		p, d, _, _, decoded := newParser()
		b.ReportAllocs()
		for b.Loop() {
			p.DecodeLayers(frame, decoded)
			for i := 0; i < d.Count; i++ {
				d.TLP(i)
			}
		}
	})
	b.Run("gopacket.NewPacket", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p := gopacket.NewPacket(frame, layers.LinkTypeEthernet, gopacket.NoCopy)
			p.Layers()
		}
	})
}

// BenchmarkBuildCompare builds the same untagged dxpu-eth frame with two
// TLPs with encap.AppendDxpuEth and with gopacket.SerializeLayers.
func BenchmarkBuildCompare(b *testing.B) {
	buf := make([]byte, 0, 256)
	l2 := &encap.L2{Dst: macB, Src: macA}
	tlps := [][]byte{mrd, mwr}
	fl := fields()
	b.Run("encap.AppendDxpuEth", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = encap.AppendDxpuEth(buf[:0], l2, fl, tlps)
		}
	})
	b.Run("gopacket.SerializeLayers", func(b *testing.B) {
		sb := gopacket.NewSerializeBuffer()
		eth := &layers.Ethernet{DstMAC: net.HardwareAddr(macB[:]), SrcMAC: net.HardwareAddr(macA[:]), EthernetType: dxl.EtherTypeDxpu}
		d := &dxl.Dxpu{Fields: *fl}
		t1, t2 := &dxl.TLP{View: mrd}, &dxl.TLP{View: mwr}
		opts := gopacket.SerializeOptions{FixLengths: true}
		b.ReportAllocs()
		for b.Loop() {
			gopacket.SerializeLayers(sb, opts, eth, d, t1, t2)
		}
	})
}
