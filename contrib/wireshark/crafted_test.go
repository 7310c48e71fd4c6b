package wireshark

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// crafted is one frame built for TestCraftedFrames.
type crafted struct {
	name  string
	frame []byte
	cut   int   // store only this many bytes (a snap length), 0: all
	want  error // the sentinel encap or tlp reports, nil for a good frame
	// experts is how many error expert infos the frame must show
	// (one per frame, control message or TLP at fault).
	experts int
}

// Offsets of the dxpu header in frames built here.
const (
	ethHdr = encap.EthHeaderLen
	udpHdr = encap.EthHeaderLen + encap.IPv4HeaderLen + encap.UDPHeaderLen
)

var (
	l2     = &encap.L2{Dst: [6]byte{2, 0, 0, 0, 0, 2}, Src: [6]byte{2, 0, 0, 0, 0, 1}}
	l2vlan = &encap.L2{Dst: l2.Dst, Src: l2.Src, Tagged: true, VLAN: 100, PCP: 5}
	l3     = &encap.L3{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), SrcPort: 40000}
)

func mustTLP(t *testing.T, p tlp.Packet) []byte {
	t.Helper()
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatalf("building %v: %v", p.Kind, err)
	}
	return b
}

// with returns a copy of b with f applied.
func with(b []byte, f func(b []byte)) []byte {
	c := append([]byte(nil), b...)
	f(c)
	return c
}

// craftedFrames builds good frames the committed captures lack (control
// messages, stacked VLAN tags, a CREDIT with a body) and one frame for
// each rule the dissector checks.
func craftedFrames(t *testing.T) []crafted {
	must := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mrd := mustTLP(t, tlp.Packet{Kind: tlp.MRd, Length: 1, RequesterID: 0x0100, Tag: 0x305, FirstBE: 0xf, Address: 0xf0001000})
	cpld := mustTLP(t, tlp.Packet{Kind: tlp.CplD, CompleterID: 0x0300, ByteCount: 64, RequesterID: 0x0100, Tag: 0x205,
		LowerAddress: 0x40, Data: make([]byte, 64), TD: true})
	mwr := mustTLP(t, tlp.Packet{Kind: tlp.MWr, TC: 3, Attr: tlp.AttrRO | tlp.AttrNS, RequesterID: 0x0208, Tag: 7,
		FirstBE: 0xf, LastBE: 0xf, Address: 0x1_2345_6780, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	fields := &encap.Fields{PairID: 42, Seq: 0xfffffffe, Ack: 3, Flags: encap.FlagAck | encap.FlagCredit,
		Limits: [encap.NumCreditTypes]uint32{32, 256, 16, 16, 0, 0}, Infinite: 0x30}
	msg := func(typ encap.MsgType, udp bool, body []byte) []byte {
		f := *fields
		f.Type = typ
		var a *encap.L3
		if udp {
			a = l3
		}
		return must(encap.AppendDxpuMsg(nil, l2, a, &f, body))
	}
	eth := func(tlps ...[]byte) []byte { return must(encap.AppendDxpuEth(nil, l2, fields, tlps)) }
	udp := func(tlps ...[]byte) []byte { return must(encap.AppendDxpuUDP(nil, l2, l3, fields, tlps)) }

	hello := encap.Control{Type: encap.CtlHello, Role: encap.RoleHost, TagBits: 10, Session: 0x0a0b0c0d,
		Window: 256, MaxTLP: 4116, ISN: 0x11223344, Credits: [encap.NumCreditTypes]uint32{64, 1024, 32, 64, 0, 0},
		Infinite: 0x30}
	helloAck := hello
	helloAck.Type, helloAck.Role, helloAck.TagBits, helloAck.PeerSession = encap.CtlHelloAck, encap.RoleGPU, 8, 0x0a0b0c0d
	keepalive := encap.Control{Type: encap.CtlKeepalive, Role: encap.RoleGPU, Probe: 3, Session: 1, PeerSession: 2}
	keepaliveAck := keepalive
	keepaliveAck.Type = encap.CtlKeepaliveAck
	reset := encap.Control{Type: encap.CtlReset, Role: encap.RoleHost, Reason: encap.ResetUnknownSession, Session: 9}

	var cs []crafted
	for _, c := range []encap.Control{hello, helloAck, keepalive, keepaliveAck, reset} {
		cs = append(cs,
			crafted{name: c.Type.String() + " over Ethernet", frame: msg(encap.MsgControl, false, c.AppendTo(nil))},
			crafted{name: c.Type.String() + " over UDP", frame: msg(encap.MsgControl, true, c.AppendTo(nil))})
	}
	plain := eth(mrd, cpld)
	qinq := append(append(append([]byte(nil), plain[:12]...), 0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64), plain[12:]...)
	mrdAt := ethHdr + encap.HeaderLen + 2 // the first TLP of a one-TLP frame
	netTLP := must(encap.AppendNetTLP(nil, l2vlan, &encap.L3{Src: l3.Src, Dst: l3.Dst}, 7, 0xe132da1b, mwr))
	nettlpUDPLen := ethHdr + encap.VLANTagLen + encap.IPv4HeaderLen + 4

	cs = append(cs,
		crafted{name: "TLPs over Ethernet with VLAN", frame: must(encap.AppendDxpuEth(nil, l2vlan, fields, [][]byte{mwr, mrd, cpld}))},
		crafted{name: "TLPs over UDP", frame: udp(cpld, mwr)},
		crafted{name: "TLPs behind 802.1ad and 802.1Q tags", frame: qinq},
		crafted{name: "CREDIT with a body", frame: msg(encap.MsgCredit, false, []byte{0xde, 0xad, 0xbe, 0xef})},
		crafted{name: "NAK over UDP", frame: msg(encap.MsgNak, true, nil)},
		crafted{name: "NetTLP with VLAN", frame: netTLP},
		crafted{name: "UDP to another port", frame: must(encap.AppendDxpuUDP(nil, l2,
			&encap.L3{Src: l3.Src, Dst: l3.Dst, SrcPort: 1234, DstPort: 9999}, fields, [][]byte{mrd}))},
		crafted{name: "UDP from the dxpu port to another", frame: must(encap.AppendDxpuUDP(nil, l2,
			&encap.L3{Src: l3.Src, Dst: l3.Dst, SrcPort: encap.DefaultUDPPort, DstPort: 9999}, fields, [][]byte{mrd}))},
		crafted{name: "UDP to another port, not dxpu (version 2)", frame: with(must(encap.AppendDxpuUDP(nil, l2,
			&encap.L3{Src: l3.Src, Dst: l3.Dst, SrcPort: 1234, DstPort: 9999}, fields, [][]byte{mrd})), func(b []byte) { b[udpHdr] = 0x23 })},
		crafted{name: "UDP to another port, body length not the payload's", frame: with(must(encap.AppendDxpuUDP(nil, l2,
			&encap.L3{Src: l3.Src, Dst: l3.Dst, SrcPort: 1234, DstPort: 9999}, fields, [][]byte{mrd})), func(b []byte) { b[udpHdr+7]++ })},
		crafted{name: "TLP cut by the snap length", frame: plain, cut: ethHdr + encap.HeaderLen + 4 + 12 + 20},
		crafted{name: "length table cut by the snap length", frame: eth(mrd, mrd, cpld), cut: ethHdr + encap.HeaderLen + 3,
			want: tlp.ErrTruncated, experts: 3},

		crafted{name: "header cut", frame: eth(mrd)[:ethHdr+20], want: encap.ErrShort, experts: 1},
		crafted{name: "snap length at the EtherType", frame: eth(mrd), cut: ethHdr, want: encap.ErrShort, experts: 1},
		crafted{name: "version 2", frame: with(eth(mrd), func(b []byte) { b[ethHdr] = 0x23 }), want: encap.ErrVersion, experts: 1},
		crafted{name: "message type 9", frame: with(eth(mrd), func(b []byte) { b[ethHdr+1] = 9 }), want: encap.ErrMsgType, experts: 1},
		crafted{name: "ACK with a TLP count", frame: with(msg(encap.MsgAck, false, nil), func(b []byte) { b[ethHdr+5] = 1 }),
			want: encap.ErrTLPCount, experts: 1},
		crafted{name: "count beyond the body", frame: with(eth(mrd), func(b []byte) { b[ethHdr+5] = 200 }),
			want: encap.ErrTLPCount, experts: 1},
		crafted{name: "TLP length 13", frame: with(eth(mrd), func(b []byte) { b[ethHdr+encap.HeaderLen+1] = 13 }),
			want: encap.ErrTLPLength, experts: 1},
		crafted{name: "TLPs beyond the body", frame: with(eth(mrd, mrd), func(b []byte) { b[ethHdr+encap.HeaderLen+3] = 16 }),
			want: encap.ErrTLPLength, experts: 1},
		crafted{name: "body length disagrees with UDP", frame: with(udp(mrd), func(b []byte) { b[udpHdr+7] += 4 }),
			want: encap.ErrBodyLength, experts: 1},
		crafted{name: "UDP payload too short for the header", frame: with(udp(mrd), func(b []byte) {
			binary.BigEndian.PutUint16(b[udpHdr-4:], encap.UDPHeaderLen+20)
		}), want: encap.ErrUDPLength, experts: 1},
		crafted{name: "NetTLP datagram without a TLP", frame: with(netTLP, func(b []byte) {
			binary.BigEndian.PutUint16(b[nettlpUDPLen:], encap.UDPHeaderLen+encap.NetTLPHeaderLen)
		}), want: encap.ErrNetTLP, experts: 1},
		crafted{name: "control type 7", frame: with(msg(encap.MsgControl, false, keepalive.AppendTo(nil)),
			func(b []byte) { b[ethHdr+encap.HeaderLen] = 7 }), want: encap.ErrControl, experts: 1},
		crafted{name: "HELLO with 9 tag bits", frame: with(msg(encap.MsgControl, true, hello.AppendTo(nil)),
			func(b []byte) { b[udpHdr+encap.HeaderLen+3] = 9 }), want: encap.ErrControl, experts: 1},
		crafted{name: "HELLO of 12 bytes", frame: msg(encap.MsgControl, false, hello.AppendTo(nil)[:encap.ControlLen]),
			want: encap.ErrControl, experts: 1},
		crafted{name: "KEEPALIVE with session 0", frame: with(msg(encap.MsgControl, false, keepalive.AppendTo(nil)),
			func(b []byte) { clear(b[ethHdr+encap.HeaderLen+4 : ethHdr+encap.HeaderLen+8]) }), want: encap.ErrControl, experts: 1},
		crafted{name: "reserved Fmt/Type", frame: with(eth(mrd), func(b []byte) { b[mrdAt] = 0x03 }),
			want: tlp.ErrReservedFmtType, experts: 1},
		crafted{name: "TLP prefix", frame: with(eth(mrd), func(b []byte) { b[mrdAt] = 0x90 }), want: tlp.ErrPrefix, experts: 1},
		crafted{name: "MWr without its data", frame: with(eth(mrd), func(b []byte) { b[mrdAt] = 0x40 }),
			want: tlp.ErrLengthMismatch, experts: 1},
		// A rule on field values: the dissector shows the fields, no error.
		crafted{name: "MRd with a Last BE on one DW", frame: with(eth(mrd), func(b []byte) { b[mrdAt+7] = 0xff }),
			want: tlp.ErrByteEnables},
	)
	return cs
}

// verdict is the first error encap or tlp reports on frame, as `dxpu tlp
// decode --pcap` reads it (cut TLPs leniently).
func verdict(frame []byte) error {
	f, err := encap.ParseFrame(frame, nil)
	if err != nil {
		return err
	}
	if h := f.Header(); h != nil && h.Type() == encap.MsgControl {
		if _, err := encap.ParseControl(f.Body()); err != nil {
			return err
		}
	}
	for i := range f.NumTLPs() {
		b, cut := f.TLP(i)
		if cut {
			_, _, err = tlp.ParseTruncated(b)
		} else {
			_, err = tlp.Parse(b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestCraftedFrames dissects the crafted frames: control messages field by
// field, and each broken rule as the expert info that names it, with no
// Lua error anywhere.
func TestCraftedFrames(t *testing.T) {
	t.Parallel()
	cs := craftedFrames(t)
	wantExperts := 0
	for _, c := range cs {
		store := c.frame
		if c.cut > 0 {
			store = c.frame[:c.cut]
		}
		if err := verdict(store); !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
			t.Fatalf("%s: encap/tlp report %v, the case is built for %v", c.name, err, c.want)
		}
		wantExperts += c.experts
	}
	tshark := tsharkPath(t)
	path := filepath.Join(t.TempDir(), "crafted.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{Nanos: true})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, c := range cs {
		store := c.frame
		if c.cut > 0 {
			store = c.frame[:c.cut]
		}
		ci := gopacket.CaptureInfo{Timestamp: at.Add(time.Duration(i) * time.Microsecond), Length: len(c.frame)}
		if err := w.WritePacket(ci, store); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// DXPU_CRAFTED_DUMP=FILE keeps a copy of the capture to open in Wireshark.
	if d := os.Getenv("DXPU_CRAFTED_DUMP"); d != "" {
		b, err := os.ReadFile(path)
		if err == nil {
			err = os.WriteFile(d, b, 0o644)
		}
		if err != nil {
			t.Fatalf("DXPU_CRAFTED_DUMP: %v", err)
		}
	}
	n := checkCapture(t, tshark, path)
	t.Logf("compared %+v", n)
	if n.errors != wantExperts || n.controls != 10 || n.truncated != 2 {
		t.Errorf("compared %d errors, %d control messages, %d truncated frames; want %d, 10, 2",
			n.errors, n.controls, n.truncated, wantExperts)
	}
}
