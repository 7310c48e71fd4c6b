package encap_test

import (
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

func benchParse(b *testing.B, frame []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		f, err := encap.ParseFrame(frame, nil)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < f.NumTLPs(); i++ {
			f.TLP(i)
		}
	}
}

func BenchmarkParseFrame(b *testing.B) {
	l3 := &encap.L3{Src: ipA, Dst: ipB}
	eth1, _ := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd})
	tagged := &encap.L2{Tagged: true, VLAN: 7}
	udp8 := make([][]byte, 8)
	for i := range udp8 {
		udp8[i] = make([]byte, 16+128) // MWr with 128 bytes
	}
	udp, _ := encap.AppendDxpuUDP(nil, tagged, l3, exampleFields(), udp8)
	nt, _ := encap.AppendNetTLP(nil, tagged, l3, 1, 2, exampleMRd)
	b.Run("dxpu-eth/1TLP", func(b *testing.B) { benchParse(b, eth1) })
	b.Run("dxpu-udp-vlan/8TLP", func(b *testing.B) { benchParse(b, udp) })
	b.Run("nettlp-vlan", func(b *testing.B) { benchParse(b, nt) })
}

func BenchmarkBuild(b *testing.B) {
	l2, l3, fl := exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, exampleFields()
	one := [][]byte{exampleMRd}
	buf := make([]byte, 0, 2048)
	b.Run("AppendDxpuEth/1TLP", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = encap.AppendDxpuEth(buf[:0], l2, fl, one)
		}
	})
	b.Run("AppendDxpuUDP/1TLP", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = encap.AppendDxpuUDP(buf[:0], l2, l3, fl, one)
		}
	})
	b.Run("AppendNetTLP", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = encap.AppendNetTLP(buf[:0], l2, l3, 1, 2, exampleMRd)
		}
	})
	b.Run("Packer/1500MTU-MWr128", func(b *testing.B) {
		b.ReportAllocs()
		p := &encap.Packer{L2: *l2}
		tlp := make([]byte, 16+128)
		for b.Loop() {
			for p.Add(tlp) {
			}
			if _, err := p.Frame(fl); err != nil {
				b.Fatal(err)
			}
			p.Reset()
		}
	})
}
