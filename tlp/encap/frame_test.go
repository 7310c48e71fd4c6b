package encap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/dxpu/dxpu/tlp/encap"
)

var (
	ipA = netip.MustParseAddr("10.0.0.1")
	ipB = netip.MustParseAddr("10.0.0.2")
)

// randTLP returns a TLP-shaped byte string of 12..max bytes (multiple of 4).
func randTLP(r *rand.Rand, max int) []byte {
	n := 12 + 4*r.IntN((max-12)/4+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestRoundTrip builds every dxpu variant (Ethernet/UDP, with and without a
// tag, 1..many TLPs, frames under the minimum) and NetTLP frames, parses
// them back and checks every field and TLP.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 500; iter++ {
		l2 := &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, byte(iter)}, Src: [6]byte{2, 0, 0, 0, 1, byte(iter)}}
		if r.IntN(2) == 0 {
			l2.Tagged, l2.VLAN, l2.PCP = true, uint16(r.IntN(4095)), uint8(r.IntN(8))
		}
		var l3 *encap.L3
		if r.IntN(2) == 0 {
			l3 = &encap.L3{Src: ipA, Dst: ipB, SrcPort: uint16(r.IntN(65536)), ID: uint16(iter)}
		}
		fields := &encap.Fields{
			Flags: uint8(r.IntN(8)), PairID: r.Uint32() & 0xffffff,
			Seq: r.Uint32(), Ack: r.Uint32(), Sack: r.Uint32(), Infinite: uint8(r.IntN(64)),
		}
		for i := range fields.Limits {
			fields.Limits[i] = r.Uint32()
			if i == int(encap.CreditPH) || i == int(encap.CreditNPH) || i == int(encap.CreditCplH) {
				fields.Limits[i] &= 0xffff
			}
		}
		tlps := make([][]byte, r.IntN(8))
		for i := range tlps {
			tlps[i] = randTLP(r, 256)
		}
		prefix := []byte("prefix")
		var frame []byte
		var err error
		if l3 == nil {
			frame, err = encap.AppendDxpuEth(prefix, l2, fields, tlps)
		} else {
			frame, err = encap.AppendDxpuUDP(prefix, l2, l3, fields, tlps)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(frame[:6], prefix) {
			t.Fatal("builder overwrote dst")
		}
		frame = frame[6:]
		if len(frame) < encap.MinFrameLen {
			t.Fatalf("frame of %d bytes not padded", len(frame))
		}
		f, err := encap.ParseFrame(frame, nil)
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		wantEncap := encap.EncapDxpuEth
		if l3 != nil {
			wantEncap = encap.EncapDxpuUDP
		}
		if f.Encap() != wantEncap || f.NumTLPs() != len(tlps) || f.Truncated() {
			t.Fatalf("iter %d: %v with %d TLPs (truncated %v), want %v with %d", iter, f.Encap(), f.NumTLPs(), f.Truncated(), wantEncap, len(tlps))
		}
		if got := f.Header().Fields(); got != *withType(fields) {
			t.Errorf("iter %d: fields %+v, want %+v", iter, got, fields)
		}
		if vid, ok := f.VLAN(); ok != l2.Tagged || vid != l2.VLAN&0xfff {
			t.Errorf("iter %d: VLAN %d %v, want %d %v", iter, vid, ok, l2.VLAN, l2.Tagged)
		}
		if !bytes.Equal(f.DstMAC(), l2.Dst[:]) || !bytes.Equal(f.SrcMAC(), l2.Src[:]) {
			t.Errorf("iter %d: MACs", iter)
		}
		if l3 != nil && (f.SrcIP() != ipA || f.DstIP() != ipB || f.SrcPort() != l3.SrcPort || f.DstPort() != encap.DefaultUDPPort) {
			t.Errorf("iter %d: IP/UDP %v:%d -> %v:%d", iter, f.SrcIP(), f.SrcPort(), f.DstIP(), f.DstPort())
		}
		// Random access, then sequential: both must agree.
		for _, i := range append(r.Perm(len(tlps)), seq(len(tlps))...) {
			b, tr := f.TLP(i)
			if tr || !bytes.Equal(b, tlps[i]) {
				t.Fatalf("iter %d TLP %d: %x (truncated %v), want %x", iter, i, b, tr, tlps[i])
			}
		}
		// NetTLP of each TLP.
		for i, tl := range tlps {
			l3n := &encap.L3{Src: ipA, Dst: ipB}
			nf, err := encap.AppendNetTLP(nil, l2, l3n, uint16(i), uint32(iter), tl)
			if err != nil {
				t.Fatal(err)
			}
			p, err := encap.ParseFrame(nf, nil)
			if err != nil {
				t.Fatalf("NetTLP: %v", err)
			}
			b, tr := p.TLP(0)
			port := encap.NetTLPPort(tl)
			if p.Encap() != encap.EncapNetTLP || p.NumTLPs() != 1 || tr || !bytes.Equal(b, tl) ||
				p.NetTLPSeq() != uint16(i) || p.NetTLPTimestamp() != uint32(iter) || p.SrcPort() != port || p.DstPort() != port {
				t.Fatalf("NetTLP round trip: %v %d %x seq %d ts %d ports %#x %#x", p.Encap(), p.NumTLPs(), b, p.NetTLPSeq(), p.NetTLPTimestamp(), p.SrcPort(), p.DstPort())
			}
		}
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func withType(f *encap.Fields) *encap.Fields {
	g := *f
	if g.Type == 0 {
		g.Type = encap.MsgTLP
	}
	return &g
}

// TestNonTLPMessages builds ACK/NAK/CREDIT/CONTROL frames.
func TestNonTLPMessages(t *testing.T) {
	for _, mt := range []encap.MsgType{encap.MsgAck, encap.MsgNak, encap.MsgCredit, encap.MsgControl} {
		body := []byte(nil)
		if mt == encap.MsgControl {
			body = []byte{1, 2, 3, 4, 5}
		}
		fr, err := encap.AppendDxpuMsg(nil, exampleL2(), nil, &encap.Fields{Type: mt, PairID: 7, Ack: 99}, body)
		if err != nil {
			t.Fatal(err)
		}
		f, err := encap.ParseFrame(fr, nil)
		if err != nil {
			t.Fatalf("%v: %v", mt, err)
		}
		if f.NumTLPs() != 0 || f.Header().Type() != mt || f.Header().Ack() != 99 || !bytes.Equal(f.Body(), body) {
			t.Errorf("%v: type %v, %d TLPs, body %x", mt, f.Header().Type(), f.NumTLPs(), f.Body())
		}
	}
	if _, err := encap.AppendDxpuMsg(nil, exampleL2(), nil, &encap.Fields{Type: 9}, nil); !errors.Is(err, encap.ErrMsgType) {
		t.Errorf("type 9: %v", err)
	}
	if _, err := encap.AppendDxpuEth(nil, exampleL2(), &encap.Fields{Type: encap.MsgAck}, [][]byte{exampleMRd}); !errors.Is(err, encap.ErrTLPCount) {
		t.Errorf("ACK with TLPs: %v", err)
	}
}

// TestNotOurs: frames without TLPs parse as EncapNone without error.
func TestNotOurs(t *testing.T) {
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	f, err := encap.ParseFrame(arp, nil)
	if err != nil || f.Encap() != encap.EncapNone || f.NumTLPs() != 0 {
		t.Errorf("ARP: %v %v", f.Encap(), err)
	}
	// UDP to another port
	fr, _ := encap.AppendDxpuUDP(nil, exampleL2(), &encap.L3{Src: ipA, Dst: ipB, DstPort: 53}, exampleFields(), [][]byte{exampleMRd})
	f, err = encap.ParseFrame(fr, nil)
	if err != nil || f.Encap() != encap.EncapNone || !f.HasIPv4() {
		t.Errorf("UDP/53: %v %v", f.Encap(), err)
	}
	// dxpu on a configured port
	f, err = encap.ParseFrame(fr, &encap.Config{UDPPort: 53})
	if err != nil || f.Encap() != encap.EncapDxpuUDP {
		t.Errorf("UDP/53 with UDPPort 53: %v %v", f.Encap(), err)
	}
	// NetTLP disabled
	nf, _ := encap.AppendNetTLP(nil, exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, 0, 0, exampleMRd)
	if f, err := encap.ParseFrame(nf, &encap.Config{NoNetTLP: true}); err != nil || f.Encap() != encap.EncapNone {
		t.Errorf("NoNetTLP: %v %v", f.Encap(), err)
	}
}

// TestTruncated cuts a three-TLP frame at every length and checks which
// TLPs are reported whole and which truncated.
func TestTruncated(t *testing.T) {
	tlps := [][]byte{bytes.Repeat([]byte{1}, 16), bytes.Repeat([]byte{2}, 12), bytes.Repeat([]byte{3}, 64)}
	full, err := encap.AppendDxpuUDP(nil, &encap.L2{Tagged: true, VLAN: 5}, &encap.L3{Src: ipA, Dst: ipB}, exampleFields(), tlps)
	if err != nil {
		t.Fatal(err)
	}
	hdr := 14 + 4 + 20 + 8
	for cut := hdr + encap.HeaderLen; cut <= len(full); cut++ {
		f, err := encap.ParseFrame(full[:cut], nil)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if f.Truncated() != (cut < len(full)) {
			t.Errorf("cut %d: Truncated %v", cut, f.Truncated())
		}
		start := hdr + encap.HeaderLen + 6
		for i, want := range tlps {
			b, tr := f.TLP(i)
			end := start + len(want)
			if tr != (end > cut) {
				t.Errorf("cut %d TLP %d: truncated %v", cut, i, tr)
			}
			if n := max(0, min(cut, end)-start); !bytes.Equal(b, want[:min(n, len(want))]) {
				t.Errorf("cut %d TLP %d: %x", cut, i, b)
			}
			start = end
		}
		if cut < len(full) {
			if _, err := encap.ParseFrame(full[:cut], &encap.Config{RejectTruncated: true}); !errors.Is(err, encap.ErrTruncated) {
				t.Errorf("cut %d with RejectTruncated: %v", cut, err)
			}
		}
	}
}

// TestErrors corrupts a good frame field by field; each error must wrap the
// right sentinel and name the field's offset.
func TestErrors(t *testing.T) {
	good, _ := encap.AppendDxpuUDP(nil, exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, exampleFields(), [][]byte{exampleMRd, exampleMRd})
	goodEth, _ := encap.AppendDxpuEth(nil, exampleL2(), exampleFields(), [][]byte{exampleMRd, exampleMRd})
	nettlp, _ := encap.AppendNetTLP(nil, exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, 0, 0, exampleMRd)
	const ip, udp, dx = 14, 34, 42
	fixIP := func(b []byte) []byte { // recompute the IPv4 checksum after a change
		b[ip+10], b[ip+11] = 0, 0
		var s uint32
		for i := ip; i < ip+20; i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		for s>>16 != 0 {
			s = s&0xffff + s>>16
		}
		binary.BigEndian.PutUint16(b[ip+10:], ^uint16(s))
		return b
	}
	set := func(src []byte, off int, v ...byte) []byte {
		b := append([]byte(nil), src...)
		copy(b[off:], v)
		return b
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
		off   int
	}{
		{"short eth", good[:13], encap.ErrShort, 0},
		{"three tags", set(goodEth, 12, 0x81, 0, 0, 1, 0x81, 0, 0, 2, 0x81, 0, 0, 3), encap.ErrVLAN, 20},
		{"ip version", fixIP(set(good, ip, 0x65)), encap.ErrIPv4Header, ip},
		{"ip ihl", fixIP(set(good, ip, 0x44)), encap.ErrIPv4Header, ip},
		{"ip total", fixIP(set(good, ip+2, 0, 10)), encap.ErrIPv4Header, ip + 2},
		{"ip checksum", set(good, ip+10, 0xde, 0xad), encap.ErrIPv4Checksum, ip + 10},
		{"fragment", fixIP(set(good, ip+6, 0x20, 0)), encap.ErrFragment, ip + 6},
		{"udp length small", set(good, udp+4, 0, 4), encap.ErrUDPLength, udp + 4},
		{"udp length big", set(good, udp+4, 0x0f, 0), encap.ErrUDPLength, udp + 4},
		{"version", set(good, dx, 0x23), encap.ErrVersion, dx},
		{"type", set(good, dx+1, 9), encap.ErrMsgType, dx + 1},
		{"body vs udp", set(good, dx+6, 0, 20), encap.ErrBodyLength, dx + 6},
		{"eth count too big", set(goodEth, 14+5, 200), encap.ErrTLPCount, 14 + 5},
		{"ack with tlps", set(goodEth, 14+1, 2), encap.ErrTLPCount, 14 + 5},
		{"tlp len odd", set(goodEth, 14+40, 0, 13), encap.ErrTLPLength, 14 + 40},
		{"tlp len small", set(goodEth, 14+40, 0, 8), encap.ErrTLPLength, 14 + 40},
		{"tlp lens beyond body", set(goodEth, 14+42, 0, 16), encap.ErrTLPLength, 14 + 42},
		{"tlp lens short of body", set(goodEth, 14+6, 0, 32), encap.ErrTLPLength, 14 + 6},
		{"count 1 of 2", set(goodEth, 14+5, 1), encap.ErrTLPLength, 14 + 6},
		{"nettlp header only", fixIP(set(set(nettlp, ip+2, 0, 34), udp+4, 0, 14)), encap.ErrNetTLP, udp + 4},
		{"nettlp short", fixIP(set(set(nettlp, ip+2, 0, 32), udp+4, 0, 12)), encap.ErrNetTLP, udp + 4},
	}
	for _, c := range cases {
		_, err := encap.ParseFrame(c.frame, nil)
		var fe *encap.FrameError
		if !errors.Is(err, c.want) || !errors.As(err, &fe) || fe.Offset != c.off {
			t.Errorf("%s: got %v, want %v at offset %d", c.name, err, c.want, c.off)
			continue
		}
		t.Logf("%s: %v", c.name, err)
	}
	if _, err := encap.ParseFrame(set(good, ip+10, 0xde, 0xad), &encap.Config{SkipIPv4Checksum: true}); err != nil {
		t.Errorf("SkipIPv4Checksum: %v", err)
	}
}

// TestBuilderErrors: impossible frames are refused, dst is left unchanged.
func TestBuilderErrors(t *testing.T) {
	dst := []byte{9}
	many := make([][]byte, 256)
	for i := range many {
		many[i] = exampleMRd
	}
	if out, err := encap.AppendDxpuEth(dst, exampleL2(), exampleFields(), many); !errors.Is(err, encap.ErrTooLarge) || len(out) != 1 {
		t.Errorf("256 TLPs: %v", err)
	}
	if out, err := encap.AppendDxpuEth(dst, exampleL2(), exampleFields(), [][]byte{make([]byte, 10)}); !errors.Is(err, encap.ErrTLPLength) || len(out) != 1 {
		t.Errorf("10-byte TLP: %v", err)
	}
	big := [][]byte{make([]byte, 40000), make([]byte, 40000)}
	if out, err := encap.AppendDxpuEth(dst, exampleL2(), exampleFields(), big); !errors.Is(err, encap.ErrTooLarge) || len(out) != 1 {
		t.Errorf("80000-byte body: %v", err)
	}
	if out, err := encap.AppendDxpuUDP(dst, exampleL2(), &encap.L3{}, exampleFields(), nil); !errors.Is(err, encap.ErrIPv4Header) || len(out) != 1 {
		t.Errorf("no IPv4 addresses: %v", err)
	}
	if out, err := encap.AppendNetTLP(dst, exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, 0, 0, nil); !errors.Is(err, encap.ErrNetTLP) || len(out) != 1 {
		t.Errorf("empty NetTLP: %v", err)
	}
}

// TestPacker fills frames at several MTUs: every frame fits the MTU, holds
// the TLPs in order, and a TLP is refused only when it would not fit.
func TestPacker(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, udp := range []bool{false, true} {
		for _, mtu := range []int{200, 1500, 9000} {
			p := &encap.Packer{L2: encap.L2{Tagged: true, VLAN: 3}, MTU: mtu}
			if udp {
				p.L3 = &encap.L3{Src: ipA, Dst: ipB}
			}
			var all, got [][]byte
			for i := 0; i < 300; i++ {
				all = append(all, randTLP(r, min(p.MaxTLPLen(), 528)))
			}
			flush := func() {
				fr, err := p.Frame(&encap.Fields{PairID: 1})
				if err != nil {
					t.Fatal(err)
				}
				if l := len(fr) - 14 - 4; l > mtu && len(fr) > encap.MinFrameLen {
					t.Fatalf("mtu %d: frame payload %d", mtu, l)
				}
				f, err := encap.ParseFrame(fr, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < f.NumTLPs(); i++ {
					b, _ := f.TLP(i)
					got = append(got, append([]byte(nil), b...))
				}
				p.Reset()
			}
			for _, tl := range all {
				if !p.Add(tl) {
					if p.Len() == 0 {
						t.Fatalf("mtu %d: empty packer refused %d bytes (max %d)", mtu, len(tl), p.MaxTLPLen())
					}
					flush()
					if !p.Add(tl) {
						t.Fatalf("mtu %d: %d bytes refused after flush", mtu, len(tl))
					}
				}
			}
			flush()
			if len(got) != len(all) {
				t.Fatalf("mtu %d: %d TLPs out, %d in", mtu, len(got), len(all))
			}
			for i := range all {
				if !bytes.Equal(got[i], all[i]) {
					t.Fatalf("mtu %d: TLP %d differs", mtu, i)
				}
			}
		}
	}
}

// TestNoAllocs: parsing and building allocate nothing.
func TestNoAllocs(t *testing.T) {
	tlps := [][]byte{exampleMRd, exampleMRd, exampleMRd}
	l2, l3, fl := exampleL2(), &encap.L3{Src: ipA, Dst: ipB}, exampleFields()
	frame, _ := encap.AppendDxpuUDP(nil, l2, l3, fl, tlps)
	buf := make([]byte, 0, 2048)
	p := &encap.Packer{L2: *l2, L3: l3}
	p.Add(exampleMRd)
	p.Frame(fl)
	n := testing.AllocsPerRun(100, func() {
		f, err := encap.ParseFrame(frame, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < f.NumTLPs(); i++ {
			f.TLP(i)
		}
		_ = f.SrcIP()
		buf, _ = encap.AppendDxpuUDP(buf[:0], l2, l3, fl, tlps)
		buf, _ = encap.AppendDxpuEth(buf[:0], l2, fl, tlps)
		buf, _ = encap.AppendNetTLP(buf[:0], l2, l3, 1, 2, exampleMRd)
		p.Reset()
		p.Add(exampleMRd)
		p.Add(exampleMRd)
		p.Frame(fl)
	})
	if n != 0 {
		t.Errorf("%v allocations per parse+build, want 0", n)
	}
}
