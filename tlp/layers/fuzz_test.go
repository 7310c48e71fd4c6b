package layers_test

import (
	"bytes"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp/encap"
	dxl "github.com/dxpu/dxpu/tlp/layers"
)

// FuzzLayers decodes arbitrary frames with gopacket.NewPacket and a
// DecodingLayerParser. Invariants: no panic; both decoders agree on the
// dxpu and NetTLP layers; TLP layers lie inside the frame; and where
// encap.ParseFrame accepts a dxpu or NetTLP frame that gopacket routes the
// same way, the TLPs are the same bytes.
func FuzzLayers(f *testing.F) {
	l3 := &encap.L3{Src: ipA, Dst: ipB}
	for _, tagged := range []bool{false, true} {
		l2 := &encap.L2{Dst: macB, Src: macA, Tagged: tagged, VLAN: 3}
		b, _ := encap.AppendDxpuEth(nil, l2, fields(), [][]byte{mrd, mwr})
		f.Add(b)
		b, _ = encap.AppendDxpuUDP(nil, l2, l3, fields(), [][]byte{mwr})
		f.Add(b)
		b, _ = encap.AppendNetTLP(nil, l2, l3, 1, 2, mwr)
		f.Add(b)
	}
	qinq := &encap.L2{Dst: macB, Src: macA, Tagged: true, VLAN: 3, OuterTPID: encap.EtherTypeQinQ, OuterVLAN: 4}
	b, _ := encap.AppendDxpuUDP(nil, qinq, l3, fields(), [][]byte{mrd, mwr})
	f.Add(b)
	f.Add(hopByHopNetTLP())
	f.Fuzz(func(t *testing.T, data []byte) {
		pkt := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.NoCopy)
		parser, d, n, _, decoded := newParser()
		perr := parser.DecodeLayers(data, decoded)

		pd, _ := pkt.Layer(dxl.LayerTypeDxpu).(*dxl.Dxpu)
		pn, _ := pkt.Layer(dxl.LayerTypeNetTLP).(*dxl.NetTLP)
		has := func(lt gopacket.LayerType) bool {
			for _, x := range *decoded {
				if x == lt {
					return true
				}
			}
			return false
		}
		// The parser knows only dxpu's path (Ethernet, 802.1Q, IPv4, UDP);
		// NewPacket also follows chains such as IPv4 protocol 0 into IPv6
		// hop-by-hop options, which no dxpu frame uses, so only chains
		// inside the parser's set are compared.
		if parserChain(pkt) && ((pd != nil) != has(dxl.LayerTypeDxpu) || (pn != nil) != has(dxl.LayerTypeNetTLP)) {
			t.Fatalf("NewPacket %v vs parser %v (err %v)", layerTypes(pkt), *decoded, perr)
		}
		if pd != nil && has(dxl.LayerTypeDxpu) && (pd.Fields != d.Fields || pd.Count != d.Count || !bytes.Equal(pd.Payload, d.Payload)) {
			t.Fatal("dxpu layers differ")
		}
		if pn != nil && has(dxl.LayerTypeNetTLP) && (pn.Seq != n.Seq || pn.Timestamp != n.Timestamp) {
			t.Fatal("nettlp layers differ")
		}
		total := 0
		for _, l := range pkt.Layers() {
			if tl, ok := l.(*dxl.TLP); ok {
				total += len(tl.View)
				if len(tl.View) < 12 || total > len(data) {
					t.Fatalf("TLP layer of %d bytes (total %d of %d)", len(tl.View), total, len(data))
				}
			}
		}
		fr, err := encap.ParseFrame(data, &encap.Config{SkipIPv4Checksum: true})
		if err != nil || fr.NumVLANs() > 0 && !plainTags(&fr) {
			return
		}
		switch fr.Encap() {
		case encap.EncapDxpuEth, encap.EncapDxpuUDP:
			if pd == nil {
				if pkt.ErrorLayer() == nil {
					t.Fatalf("encap found %v, gopacket layers %v", fr.Encap(), layerTypes(pkt))
				}
				return
			}
			if pd.Count != fr.NumTLPs() {
				t.Fatalf("count %d vs %d", pd.Count, fr.NumTLPs())
			}
			for i := 0; i < fr.NumTLPs(); i++ {
				a, atr := fr.TLP(i)
				b, btr := pd.TLP(i)
				if !bytes.Equal(a, b) || atr != btr {
					t.Fatalf("TLP %d: encap %x (%v), layer %x (%v)", i, a, atr, b, btr)
				}
			}
		case encap.EncapNetTLP:
			if pn == nil && fr.DstPort() >= encap.NetTLPPortBase && fr.DstPort() <= encap.NetTLPPortMax && pkt.ErrorLayer() == nil {
				t.Fatalf("encap found NetTLP, gopacket layers %v", layerTypes(pkt))
			}
		}
	})
}

// parserChain reports whether every layer NewPacket decoded is one the
// DecodingLayerParser of newParser knows.
func parserChain(p gopacket.Packet) bool {
	for _, l := range p.Layers() {
		switch l.LayerType() {
		case layers.LayerTypeEthernet, layers.LayerTypeDot1Q, layers.LayerTypeIPv4, layers.LayerTypeUDP,
			dxl.LayerTypeDxpu, dxl.LayerTypeNetTLP, dxl.LayerTypeTLP, gopacket.LayerTypePayload, gopacket.LayerTypeDecodeFailure:
		default:
			return false
		}
	}
	return true
}

// hopByHopNetTLP is the shape the fuzzer found: IPv4 protocol 0, two IPv6
// hop-by-hop headers, then UDP to a NetTLP port. gopacket follows the
// chain to NetTLP; dxpu's parser stops at IPv4, as encap.ParseFrame does.
func hopByHopNetTLP() []byte {
	b, _ := encap.AppendNetTLP(nil, &encap.L2{Dst: macB, Src: macA}, &encap.L3{Src: ipA, Dst: ipB}, 1, 2, mwr)
	const ihl = 14 + 20
	hbh := []byte{0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0}
	out := append(append(append([]byte{}, b[:ihl]...), hbh...), b[ihl:]...)
	out[14+9] = 0 // protocol HOPOPT
	total := int(out[14+2])<<8 | int(out[14+3]) + len(hbh)
	out[14+2], out[14+3] = byte(total>>8), byte(total)
	return out
}

// plainTags reports whether all VLAN tags use TPIDs gopacket decodes.
func plainTags(f *encap.Frame) bool {
	for i := 0; i < f.NumVLANs(); i++ {
		if tpid, _ := f.VLANTag(i); tpid != encap.EtherTypeVLAN && tpid != encap.EtherTypeQinQ {
			return false
		}
	}
	return true
}

// TestHopByHopChainIsNotDxpuPath pins the fuzzer's finding: gopacket walks
// IPv4 protocol 0 through hop-by-hop headers to NetTLP, the dxpu parser and
// encap.ParseFrame do not.
func TestHopByHopChainIsNotDxpuPath(t *testing.T) {
	data := hopByHopNetTLP()
	pkt := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.Default)
	if pkt.Layer(layers.LayerTypeIPv6HopByHop) == nil || pkt.Layer(dxl.LayerTypeNetTLP) == nil {
		t.Fatalf("seed does not have the fuzzer's shape: %v", layerTypes(pkt))
	}
	if parserChain(pkt) {
		t.Fatal("hop-by-hop chain counted as the parser's")
	}
	parser, _, _, _, decoded := newParser()
	_ = parser.DecodeLayers(data, decoded)
	for _, lt := range *decoded {
		if lt == dxl.LayerTypeNetTLP {
			t.Fatal("parser decoded NetTLP behind IPv4 protocol 0")
		}
	}
	if fr, err := encap.ParseFrame(data, &encap.Config{SkipIPv4Checksum: true}); err == nil && fr.Encap() == encap.EncapNetTLP {
		t.Fatal("ParseFrame took IPv4 protocol 0 for UDP")
	}
}
