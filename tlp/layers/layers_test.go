package layers_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/internal/shareddata"
	"github.com/dxpu/dxpu/tlp/encap"
	dxl "github.com/dxpu/dxpu/tlp/layers"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

var (
	mrd  = []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xf0, 0x00, 0x10, 0x00}
	mwr  = append([]byte{0x40, 0x00, 0x00, 0x02, 0x01, 0x00, 0x06, 0xff, 0xf0, 0x00, 0x20, 0x00}, 1, 2, 3, 4, 5, 6, 7, 8)
	ipA  = netip.MustParseAddr("10.0.0.1")
	ipB  = netip.MustParseAddr("10.0.0.2")
	macA = [6]byte{2, 0, 0, 0, 0, 1}
	macB = [6]byte{2, 0, 0, 0, 0, 2}
)

func fields() *encap.Fields {
	f := &encap.Fields{Type: encap.MsgTLP, Flags: encap.FlagAck, PairID: 0xabcdef, Seq: 10, Ack: 4, Infinite: 0x30}
	f.Limits[encap.CreditPH] = 8
	f.Limits[encap.CreditPD] = 1000
	return f
}

func layerTypes(p gopacket.Packet) []gopacket.LayerType {
	var out []gopacket.LayerType
	for _, l := range p.Layers() {
		out = append(out, l.LayerType())
	}
	return out
}

func sameTypes(a []gopacket.LayerType, b ...gopacket.LayerType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNewPacket decodes frames built by encap with gopacket.NewPacket.
func TestNewPacket(t *testing.T) {
	l2 := &encap.L2{Dst: macB, Src: macA, Tagged: true, VLAN: 100}
	eth, _ := encap.AppendDxpuEth(nil, l2, fields(), [][]byte{mrd, mwr})
	p := gopacket.NewPacket(eth, layers.LinkTypeEthernet, gopacket.Default)
	if el := p.ErrorLayer(); el != nil {
		t.Fatal(el.Error())
	}
	if got := layerTypes(p); !sameTypes(got, layers.LayerTypeEthernet, layers.LayerTypeDot1Q, dxl.LayerTypeDxpu, dxl.LayerTypeTLP, dxl.LayerTypeTLP) {
		t.Fatalf("layers %v", got)
	}
	d := p.Layer(dxl.LayerTypeDxpu).(*dxl.Dxpu)
	if d.Fields != *fields() || d.Count != 2 || d.Version != 1 || d.Truncated {
		t.Errorf("dxpu layer %+v", d)
	}
	for i, want := range [][]byte{mrd, mwr} {
		if b, tr := d.TLP(i); tr || !bytes.Equal(b, want) {
			t.Errorf("Dxpu.TLP(%d) = %x", i, b)
		}
		if got := p.Layers()[3+i].(*dxl.TLP); !bytes.Equal(got.View, want) || got.Truncated {
			t.Errorf("TLP layer %d = %x", i, got.View)
		}
	}

	udp, _ := encap.AppendDxpuUDP(nil, &encap.L2{Dst: macB, Src: macA}, &encap.L3{Src: ipA, Dst: ipB}, fields(), [][]byte{mwr})
	p = gopacket.NewPacket(udp, layers.LinkTypeEthernet, gopacket.Default)
	if got := layerTypes(p); !sameTypes(got, layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, dxl.LayerTypeDxpu, dxl.LayerTypeTLP) {
		t.Fatalf("udp layers %v", got)
	}

	nt, _ := encap.AppendNetTLP(nil, &encap.L2{Dst: macB, Src: macA}, &encap.L3{Src: ipA, Dst: ipB}, 7, 99, mrd)
	p = gopacket.NewPacket(nt, layers.LinkTypeEthernet, gopacket.Default)
	if got := layerTypes(p); !sameTypes(got, layers.LayerTypeEthernet, layers.LayerTypeIPv4, layers.LayerTypeUDP, dxl.LayerTypeNetTLP, dxl.LayerTypeTLP) {
		t.Fatalf("nettlp layers %v", got)
	}
	n := p.Layer(dxl.LayerTypeNetTLP).(*dxl.NetTLP)
	if n.Seq != 7 || n.Timestamp != 99 || !bytes.Equal(p.Layer(dxl.LayerTypeTLP).(*dxl.TLP).View, mrd) {
		t.Errorf("nettlp %+v", n)
	}

	ctl, _ := encap.AppendDxpuMsg(nil, &encap.L2{}, nil, &encap.Fields{Type: encap.MsgControl}, []byte{9, 9, 9})
	p = gopacket.NewPacket(ctl, layers.LinkTypeEthernet, gopacket.Default)
	if got := layerTypes(p); !sameTypes(got, layers.LayerTypeEthernet, dxl.LayerTypeDxpu, gopacket.LayerTypePayload) {
		t.Fatalf("control layers %v", got)
	}
	if !bytes.Equal(p.Layer(dxl.LayerTypeDxpu).LayerPayload(), []byte{9, 9, 9}) {
		t.Error("control body")
	}
}

// TestSerialize builds frames with gopacket.SerializeLayers and checks
// them against encap's builders and parser.
func TestSerialize(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{DstMAC: net.HardwareAddr(macB[:]), SrcMAC: net.HardwareAddr(macA[:]), EthernetType: dxl.EtherTypeDxpu}
	d := &dxl.Dxpu{Fields: *fields()}
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, d, &dxl.TLP{View: mrd}, &dxl.TLP{View: mwr})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := encap.AppendDxpuEth(nil, &encap.L2{Dst: macB, Src: macA}, fields(), [][]byte{mrd, mwr})
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("serialized\n %x\nencap builds\n %x", buf.Bytes(), want)
	}

	// Short control frame: Ethernet pads to 60, encap ignores the padding.
	buf.Clear()
	eth.EthernetType = dxl.EtherTypeDxpu
	err = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, &dxl.Dxpu{Fields: encap.Fields{Type: encap.MsgAck, Ack: 5}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := encap.ParseFrame(buf.Bytes(), nil)
	if err != nil || len(buf.Bytes()) != 60 || f.Header().Type() != encap.MsgAck || f.Header().Ack() != 5 {
		t.Errorf("ack frame %x: %v", buf.Bytes(), err)
	}

	// NetTLP over IPv4/UDP with checksums.
	buf.Clear()
	eth.EthernetType = layers.EthernetTypeIPv4
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: ipA.AsSlice(), DstIP: ipB.AsSlice()}
	udp := &layers.UDP{SrcPort: 0x3005, DstPort: 0x3005}
	udp.SetNetworkLayerForChecksum(ip)
	err = gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, &dxl.NetTLP{Seq: 3, Timestamp: 4}, &dxl.TLP{View: mrd})
	if err != nil {
		t.Fatal(err)
	}
	f, err = encap.ParseFrame(buf.Bytes(), nil)
	if err != nil || f.Encap() != encap.EncapNetTLP || f.NetTLPSeq() != 3 || f.NetTLPTimestamp() != 4 {
		t.Fatalf("nettlp frame: %v %v", f.Encap(), err)
	}
	if b, _ := f.TLP(0); !bytes.Equal(b, mrd) {
		t.Errorf("nettlp TLP %x", b)
	}
}

func newParser() (*gopacket.DecodingLayerParser, *dxl.Dxpu, *dxl.NetTLP, *dxl.TLP, *[]gopacket.LayerType) {
	var (
		eth  layers.Ethernet
		vlan layers.Dot1Q
		ip   layers.IPv4
		udp  layers.UDP
		d    dxl.Dxpu
		n    dxl.NetTLP
		tl   dxl.TLP
	)
	p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &vlan, &ip, &udp, &d, &n, &tl)
	p.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 16)
	return p, &d, &n, &tl, &decoded
}

// TestDecodingLayerParser decodes without allocating.
func TestDecodingLayerParser(t *testing.T) {
	frame, _ := encap.AppendDxpuUDP(nil, &encap.L2{Tagged: true, VLAN: 9}, &encap.L3{Src: ipA, Dst: ipB}, fields(), [][]byte{mrd, mwr, mrd})
	p, d, _, tl, decoded := newParser()
	allocs := testing.AllocsPerRun(100, func() {
		if err := p.DecodeLayers(frame, decoded); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per decode", allocs)
	}
	if !sameTypes(*decoded, layers.LayerTypeEthernet, layers.LayerTypeDot1Q, layers.LayerTypeIPv4, layers.LayerTypeUDP, dxl.LayerTypeDxpu, dxl.LayerTypeTLP, dxl.LayerTypeTLP, dxl.LayerTypeTLP) {
		t.Fatalf("decoded %v", *decoded)
	}
	if d.Count != 3 || d.PairID != 0xabcdef || !bytes.Equal(tl.View, mrd) {
		t.Errorf("dxpu %+v, last TLP %x", d.Fields, tl.View)
	}
	for i, want := range [][]byte{mrd, mwr, mrd} {
		if b, tr := d.TLP(i); tr || !bytes.Equal(b, want) {
			t.Errorf("TLP %d = %x", i, b)
		}
	}
}

// TestSharedCaptures decodes the NetTLP captures with gopacket and
// compares the TLP layer with encap.ParseFrame.
func TestSharedCaptures(t *testing.T) {
	n := 0
	for _, path := range shareddata.Files(t, shareddata.Dir(t, "testdata", "nettlp"), ".pcap") {
		r, err := pcapio.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; ; i++ {
			data, _, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			f, err := encap.ParseFrame(data, nil)
			if err != nil {
				t.Fatalf("%s %d: %v", path, i, err)
			}
			want, wantTr := f.TLP(0)
			p := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.NoCopy)
			nl, ok := p.Layer(dxl.LayerTypeNetTLP).(*dxl.NetTLP)
			tl, ok2 := p.Layer(dxl.LayerTypeTLP).(*dxl.TLP)
			if !ok || !ok2 {
				t.Fatalf("%s %d: layers %v", path, i, layerTypes(p))
			}
			if nl.Seq != f.NetTLPSeq() || nl.Timestamp != f.NetTLPTimestamp() || !bytes.Equal(tl.View, want) || tl.Truncated != wantTr {
				t.Fatalf("%s %d: gopacket TLP %x (truncated %v), encap %x (%v)", path, i, tl.View, tl.Truncated, want, wantTr)
			}
			n++
		}
		r.Close()
	}
	if n == 0 {
		t.Error("the shared captures hold no frames")
	}
	t.Logf("%d frames agree", n)
}

// TestCorpusAgrees decodes every frame of the synthetic corpus
// (testdata/pcap) with gopacket.NewPacket and with encap.ParseFrame: the
// same header fields and the same TLPs, also through the TLP layers.
func TestCorpusAgrees(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "pcap", "*.pcap*"))
	if len(paths) == 0 {
		t.Fatal("the committed corpus testdata/pcap is missing")
	}
	frames := 0
	for _, path := range paths {
		r, err := pcapio.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; ; i++ {
			data, _, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			frames++
			f, err := encap.ParseFrame(data, nil)
			if err != nil {
				t.Fatalf("%s %d: %v", path, i, err)
			}
			p := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.NoCopy)
			var got [][]byte
			for _, l := range p.Layers() {
				if tl, ok := l.(*dxl.TLP); ok {
					got = append(got, tl.View)
				}
			}
			if len(got) != f.NumTLPs() {
				t.Fatalf("%s %d: %d TLP layers, encap finds %d (%v)", path, i, len(got), f.NumTLPs(), layerTypes(p))
			}
			for j := range got {
				if b, _ := f.TLP(j); !bytes.Equal(b, got[j]) {
					t.Fatalf("%s %d: TLP %d differs", path, i, j)
				}
			}
			if d, ok := p.Layer(dxl.LayerTypeDxpu).(*dxl.Dxpu); ok {
				if d.Fields != f.Header().Fields() || d.Count != f.NumTLPs() {
					t.Fatalf("%s %d: Dxpu layer %+v, header %+v", path, i, d.Fields, f.Header().Fields())
				}
			} else if f.Encap() != encap.EncapNetTLP {
				t.Fatalf("%s %d: %v frame without a Dxpu layer", path, i, f.Encap())
			}
		}
		r.Close()
	}
	t.Logf("%d frames agree", frames)
}
