package tlp

import (
	"math/rand/v2"
	"testing"
)

// benchPackets holds one typical TLP per kind (128-byte payloads where a
// kind carries data of any size).
func benchPackets() []Packet {
	r := rand.New(rand.NewPCG(1, 1))
	var ps []Packet
	for k := MRd; k < kindCount; k++ {
		p := randPacket(r, k)
		p.TD = false
		switch k {
		case MRd, MRdLk:
			p.TH, p.Addr64, p.Address, p.Length, p.FirstBE, p.LastBE = false, false, 0xfedc1000, 32, 0xf, 0xf
		case MWr, CplD, CplDLk, MsgD:
			p.Length, p.Data = 32, make([]byte, 128)
			if k == MWr {
				p.TH, p.Addr64, p.Address, p.FirstBE, p.LastBE = false, false, 0xfedc1000, 0xf, 0xf
			}
			if k.IsCompletion() {
				p.ByteCount, p.LowerAddress = 128, 0
			}
		}
		ps = append(ps, p)
	}
	return ps
}

func BenchmarkParse(b *testing.B) {
	for _, p := range benchPackets() {
		raw, err := p.Encode()
		if err != nil {
			b.Fatalf("%v: %v", p.Kind, err)
		}
		b.Run(p.Kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				if _, err := Parse(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkParseMRd3DW is the acceptance figure: a 3-DW MRd.
func BenchmarkParseMRd3DW(b *testing.B) {
	raw := []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xfe, 0xdc, 0x00, 0x10}
	b.ReportAllocs()
	for b.Loop() {
		v, err := Parse(raw)
		if err != nil || v.Kind() != MRd {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDecodeMRd3DW(b *testing.B) {
	raw := []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xfe, 0xdc, 0x00, 0x10}
	b.ReportAllocs()
	var p Packet
	for b.Loop() {
		v, err := Parse(raw)
		if err != nil {
			b.Fatal(err)
		}
		p.Decode(v)
	}
}

func BenchmarkParseECRC(b *testing.B) {
	p := Packet{Kind: MWr, TD: true, Address: 0x1000, FirstBE: 0xf, LastBE: 0xf, Data: make([]byte, 256)}
	raw, err := p.Encode()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, p := range benchPackets() {
		buf := make([]byte, 0, p.WireLen())
		b.Run(p.Kind.String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(p.WireLen()))
			for b.Loop() {
				var err error
				if buf, err = p.AppendTo(buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCplSplit4K(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		s, _ := NewCplSplitter(0x1010, 1020, 0xf, 0xf, 256, 64)
		for {
			if _, ok := s.Next(); !ok {
				break
			}
		}
	}
}

var sink uint32

// BenchmarkBaselineRead3DW reads the three header DWs of a 3-DW MRd and
// nothing else: the floor Parse's figures compare against in the same run
// (this machine is shared, so absolute figures move with its load).
func BenchmarkBaselineRead3DW(b *testing.B) {
	raw := []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xfe, 0xdc, 0x00, 0x10}
	b.ReportAllocs()
	for b.Loop() {
		v := View(raw)
		sink += v.dw(0) ^ v.dw(1) ^ v.dw(2)
	}
}
