package encap_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

// exampleMRd is the MRd of the package documentation: 3DW, Length 1,
// requester 01:00.0, tag 5, First BE 0xf, address 0xf0001000.
var exampleMRd = []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xf0, 0x00, 0x10, 0x00}

func exampleL2() *encap.L2 {
	return &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}}
}

func exampleFields() *encap.Fields {
	f := &encap.Fields{
		Type: encap.MsgTLP, Flags: encap.FlagAck | encap.FlagCredit, PairID: 42, Seq: 7, Ack: 3,
		Infinite: 1<<encap.CreditCplH | 1<<encap.CreditCplD,
	}
	f.Limits[encap.CreditPH] = 32
	f.Limits[encap.CreditNPH] = 16
	f.Limits[encap.CreditPD] = 256
	f.Limits[encap.CreditNPD] = 16
	return f
}

// The worked examples of doc.go, byte for byte.
const (
	docDxpuEth = `
02 00 00 00 00 02 02 00 00 00 00 01 88 b5
13 01 00 00 2a 01 00 0e 00 00 00 07 00 00 00 03
00 00 00 00 00 20 00 10 00 00 30 00 00 00 01 00
00 00 00 10 00 00 00 00 00 0c
00 00 00 01 01 00 05 0f f0 00 10 00`
	docNetTLP = `
02 00 00 00 00 02 02 00 00 00 00 01 08 00
45 00 00 2e 00 00 40 00 40 11 a5 6a c0 a8 0a 01 c0 a8 0a 03
30 05 30 05 00 1a 00 00
01 b3 e1 32 da 1b
00 00 00 01 01 00 05 0f f0 00 10 00`
)

// docQinQ is the QinQ example of doc.go: its headers, then the dxpu header
// and body of docDxpuEth (from byte 14 on).
const docQinQ = `
02 00 00 00 00 02 02 00 00 00 00 01
88 a8 60 c8
81 00 00 64
08 00
45 00 00 52 00 00 40 00 40 11 a5 46 c0 a8 0a 01 c0 a8 0a 03
22 97 22 97 00 3e 00 00`

func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDocExamples(t *testing.T) {
	got, err := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd})
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, docDxpuEth); !bytes.Equal(got, want) {
		t.Errorf("dxpu-eth example:\n got %x\nwant %x", got, want)
	}
	f, err := encap.ParseFrame(got, nil)
	if err != nil || f.Encap() != encap.EncapDxpuEth || f.NumTLPs() != 1 || f.Header().PairID() != 42 {
		t.Fatalf("parse dxpu-eth example: %v %v", f.Encap(), err)
	}
	if tlp, tr := f.TLP(0); tr || !bytes.Equal(tlp, exampleMRd) {
		t.Errorf("dxpu-eth example TLP %x truncated=%v", tlp, tr)
	}

	l3 := &encap.L3{Src: netip.MustParseAddr("192.168.10.1"), Dst: netip.MustParseAddr("192.168.10.3")}
	got, err = encap.AppendNetTLP(nil, exampleL2(), l3, 0x01b3, 0xe132da1b, exampleMRd)
	if err != nil {
		t.Fatal(err)
	}
	if want := unhex(t, docNetTLP); !bytes.Equal(got, want) {
		t.Errorf("NetTLP example:\n got %x\nwant %x", got, want)
	}
	f, err = encap.ParseFrame(got, nil)
	if err != nil || f.Encap() != encap.EncapNetTLP || f.NetTLPSeq() != 0x01b3 || f.NetTLPTimestamp() != 0xe132da1b || f.DstPort() != 0x3005 {
		t.Fatalf("parse NetTLP example: %v %v", f.Encap(), err)
	}

	qinq := &encap.L2{Dst: exampleL2().Dst, Src: exampleL2().Src, Tagged: true, VLAN: 100,
		OuterTPID: encap.EtherTypeQinQ, OuterVLAN: 200, OuterPCP: 3}
	got, err = encap.AppendDxpuUDP(nil, qinq, l3, exampleFields(), [][]byte{exampleMRd})
	if err != nil {
		t.Fatal(err)
	}
	want := append(unhex(t, docQinQ), unhex(t, docDxpuEth)[encap.EthHeaderLen:]...)
	if !bytes.Equal(got, want) {
		t.Errorf("QinQ example:\n got %x\nwant %x", got, want)
	}
	l, err := encap.Walk(want, nil)
	wantL := encap.Layers{Encap: encap.EncapDxpuUDP, Tags: 2, EtherType: 0x0800, Net: 22, IPv4: 22, UDP: 42, Payload: 50, UDPEnd: 104}
	if err != nil || l != wantL {
		t.Errorf("Walk of the QinQ example: %+v %v, want %+v", l, err, wantL)
	}
	f, err = encap.ParseFrame(want, nil)
	if err != nil || f.Encap() != encap.EncapDxpuUDP || f.NumVLANs() != 2 || f.Header().PairID() != 42 {
		t.Fatalf("parse QinQ example: %v, %d tags, %v", f.Encap(), f.NumVLANs(), err)
	}
	if tpid, tci := f.VLANTag(0); tpid != 0x88a8 || tci != 0x60c8 {
		t.Errorf("QinQ example outer tag %#x %#x", tpid, tci)
	}
	if tpid, tci := f.VLANTag(1); tpid != 0x8100 || tci != 0x0064 {
		t.Errorf("QinQ example inner tag %#x %#x", tpid, tci)
	}
	if vid, ok := f.VLAN(); !ok || vid != 200 {
		t.Errorf("QinQ example VLAN() = %d %v, want the outer 200", vid, ok)
	}
	if tlp, tr := f.TLP(0); tr || !bytes.Equal(tlp, exampleMRd) {
		t.Errorf("QinQ example TLP %x truncated=%v", tlp, tr)
	}
}

func ExampleParseFrame() {
	frame, _ := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd})
	f, err := encap.ParseFrame(frame, nil)
	if err != nil {
		panic(err)
	}
	h := f.Header()
	fmt.Printf("%v pair %d seq %d ack %d, %d TLP(s)\n", f.Encap(), h.PairID(), h.Seq(), h.Ack(), f.NumTLPs())
	for i := 0; i < f.NumTLPs(); i++ {
		b, truncated := f.TLP(i)
		fmt.Printf("TLP %d: %x truncated=%v\n", i, b, truncated)
	}
	// Output:
	// dxpu-eth pair 42 seq 7 ack 3, 1 TLP(s)
	// TLP 0: 000000010100050ff0001000 truncated=false
}

func ExamplePacker() {
	p := encap.Packer{L2: *exampleL2(), MTU: 250}
	mwr := make([]byte, 16+64) // a 4DW MWr header and 64 bytes of data
	sent := 0
	for i := 0; i < 5; i++ {
		if !p.Add(mwr) {
			frame, _ := p.Frame(&encap.Fields{PairID: 42, Seq: uint32(sent)})
			f, _ := encap.ParseFrame(frame, nil)
			fmt.Printf("frame of %d bytes with %d TLPs\n", len(frame), f.NumTLPs())
			sent += p.Len()
			p.Reset()
			p.Add(mwr)
		}
	}
	frame, _ := p.Frame(&encap.Fields{PairID: 42, Seq: uint32(sent)})
	fmt.Printf("frame of %d bytes with %d TLPs\n", len(frame), p.Len())
	// Output:
	// frame of 218 bytes with 2 TLPs
	// frame of 218 bytes with 2 TLPs
	// frame of 136 bytes with 1 TLPs
}
