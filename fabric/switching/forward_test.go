package switching_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

var testIndex = map[string]uint32{switchtest.P1: 11, switchtest.P2: 12, switchtest.P3: 13}

func newForwarder(t testing.TB) (*switching.Forwarder, map[string]switching.Port) {
	t.Helper()
	ports := switchtest.Ports(testIndex)
	rules, skipped, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil || len(skipped) != 0 {
		t.Fatalf("Compile: %v %v", err, skipped)
	}
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	return f, ports
}

func findPair(id uint32) table.Pair {
	for _, p := range switchtest.Table().Pairs {
		if p.ID == id {
			return p
		}
	}
	return table.Pair{}
}

// ipOffsets returns the L3 offset, whether the frame is tagged and its VID.
func ethInfo(b []byte) (l3 int, tagged bool, vid uint16) {
	if binary.BigEndian.Uint16(b[12:]) == 0x8100 {
		return 18, true, binary.BigEndian.Uint16(b[14:]) & 0xfff
	}
	return 14, false, 0
}

func TestForwardCorpus(t *testing.T) {
	f, ports := newForwarder(t)
	for _, c := range switchtest.Corpus() {
		buf := make([]byte, switching.Headroom+len(c.Frame))
		copy(buf[switching.Headroom:], c.Frame)
		res := f.Forward(buf, switching.Headroom, testIndex[c.Port])
		if res.Verdict != c.Want || res.Reason != c.Reason {
			t.Errorf("%s: got %v/%v, want %v/%v", c.Name, res.Verdict, res.Reason, c.Want, c.Reason)
			continue
		}
		out := buf[res.Off:]
		if res.Verdict != switching.VerdictForward {
			if !bytes.Equal(out, c.Frame) {
				t.Errorf("%s: frame changed although not forwarded", c.Name)
			}
			continue
		}
		checkRewrite(t, c, out, res, ports)
	}
}

// checkRewrite checks a forwarded frame against the table, independently
// of how Forward computes it.
func checkRewrite(t *testing.T, c switchtest.Case, out []byte, res switching.Result, ports map[string]switching.Port) {
	t.Helper()
	p := findPair(res.PairID)
	from, to := p.Host, p.GPU
	if res.Reason == switching.ReasonToHost {
		from, to = p.GPU, p.Host
	}
	if res.Egress != ports[to.Port].Index {
		t.Errorf("%s: egress %d, want %d (%s)", c.Name, res.Egress, ports[to.Port].Index, to.Port)
	}
	if !bytes.Equal(out[0:6], to.MAC) || !bytes.Equal(out[6:12], ports[to.Port].MAC) {
		t.Errorf("%s: MACs % x -> % x, want % x -> % x", c.Name, out[6:12], out[0:6], ports[to.Port].MAC, to.MAC)
	}
	inL3, inTagged, inVID := ethInfo(c.Frame)
	l3, tagged, vid := ethInfo(out)
	if tagged != (p.VLAN != 0) || vid != p.VLAN {
		t.Errorf("%s: egress tag %v vid %d, want vid %d", c.Name, tagged, vid, p.VLAN)
	}
	if inTagged && tagged && out[14]&0xf0 != c.Frame[14]&0xf0 {
		t.Errorf("%s: PCP/DEI not kept", c.Name)
	}
	_ = inVID
	// Everything after L2 except the IP/UDP fields we rewrite is unchanged.
	if binary.BigEndian.Uint16(out[l3-2:]) != binary.BigEndian.Uint16(c.Frame[inL3-2:]) {
		t.Errorf("%s: EtherType changed", c.Name)
	}
	if binary.BigEndian.Uint16(out[l3-2:]) == 0x88B5 {
		if !bytes.Equal(out[l3:], c.Frame[inL3:]) {
			t.Errorf("%s: dxpu payload changed", c.Name)
		}
		return
	}
	ip, inIP := out[l3:], c.Frame[inL3:]
	if switching.Checksum(ip[:20], 0) != 0 {
		t.Errorf("%s: IPv4 header checksum invalid after rewrite", c.Name)
	}
	wantSrc := netip.AddrFrom4([4]byte(inIP[12:16]))
	if pi := ports[to.Port].IP; pi.IsValid() {
		wantSrc = pi
	}
	wantDst := netip.AddrFrom4([4]byte(inIP[16:20]))
	if to.IP.IsValid() {
		wantDst = to.IP
	}
	if got := netip.AddrFrom4([4]byte(ip[12:16])); got != wantSrc {
		t.Errorf("%s: IP src %v, want %v", c.Name, got, wantSrc)
	}
	if got := netip.AddrFrom4([4]byte(ip[16:20])); got != wantDst {
		t.Errorf("%s: IP dst %v, want %v", c.Name, got, wantDst)
	}
	udp := ip[20:]
	wantPort := to.UDPPort
	if wantPort == 0 {
		wantPort = switching.DefaultUDPPort
	}
	if sp, dp := binary.BigEndian.Uint16(udp[0:]), binary.BigEndian.Uint16(udp[2:]); sp != switching.DefaultUDPPort || dp != wantPort {
		t.Errorf("%s: UDP ports %d -> %d, want %d -> %d", c.Name, sp, dp, switching.DefaultUDPPort, wantPort)
	}
	inCk := binary.BigEndian.Uint16(inIP[26:])
	ck := binary.BigEndian.Uint16(udp[6:])
	if (inCk == 0) != (ck == 0) {
		t.Errorf("%s: UDP checksum presence changed: %#04x -> %#04x", c.Name, inCk, ck)
	}
	if ck != 0 {
		ulen := int(binary.BigEndian.Uint16(udp[4:]))
		var sum uint32
		for i := 12; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		sum += 17 + uint32(ulen)
		if switching.Checksum(udp[:ulen], sum) != 0 {
			t.Errorf("%s: UDP checksum invalid after rewrite", c.Name)
		}
	}
	if !bytes.Equal(udp[8:], inIP[28:]) {
		t.Errorf("%s: UDP payload changed", c.Name)
	}
	_ = from
}

func TestForwardCounters(t *testing.T) {
	f, _ := newForwarder(t)
	cs := switchtest.Corpus()
	want := map[uint32]*switching.Counters{}
	for _, c := range cs {
		buf := append(make([]byte, switching.Headroom), c.Frame...)
		res := f.Forward(buf, switching.Headroom, testIndex[c.Port])
		switch res.Reason {
		case switching.ReasonToGPU, switching.ReasonToHost, switching.ReasonSpoofed, switching.ReasonFault:
			if want[res.PairID] == nil {
				want[res.PairID] = &switching.Counters{}
			}
			want[res.PairID].Add(res.Reason, len(c.Frame))
			if res.Verdict == switching.VerdictForward {
				want[res.PairID].Add(res.Reason+switching.ReasonTxToGPU, len(buf)-res.Off)
			}
		}
	}
	seen := 0
	f.PairCounters(func(id uint32, c switching.Counters) {
		seen++
		w := want[id]
		if w == nil {
			w = &switching.Counters{}
		}
		if c != *w {
			t.Errorf("pair %#x counters %+v, want %+v", id, c, *w)
		}
	})
	if seen != len(switchtest.Table().Pairs) {
		t.Errorf("counters for %d pairs, want %d", seen, len(switchtest.Table().Pairs))
	}
	spoofed := uint64(0)
	f.PortCounters(func(port string, c switching.Counters) { spoofed += c.Packets[switching.ReasonSpoofed] })
	if spoofed == 0 || spoofed != want[switchtest.PairPlain].Packets[switching.ReasonSpoofed]+want[switchtest.PairVLAN].Packets[switching.ReasonSpoofed]+want[switchtest.PairFar].Packets[switching.ReasonSpoofed] {
		t.Errorf("port spoof counters sum %d disagree with pair counters", spoofed)
	}
}

func TestUpdateRemovesPair(t *testing.T) {
	f, ports := newForwarder(t)
	frame := switchtest.Frame(switchtest.MAC(1, 1), switchtest.PortMAC(1), -1, nil, 1, switchtest.PairPlain, false)
	fwd := func() switching.Result {
		buf := append(make([]byte, switching.Headroom), frame...)
		return f.Forward(buf, switching.Headroom, testIndex[switchtest.P1])
	}
	if r := fwd(); r.Verdict != switching.VerdictForward {
		t.Fatalf("before removal: %v", r.Verdict)
	}
	tb := switchtest.Table()
	tb.Pairs = tb.Pairs[1:]
	rules, _, err := switching.Compile(tb, ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Update(rules)
	if r := fwd(); r.Verdict != switching.VerdictSlowPath || r.Reason != switching.ReasonUnknownPair {
		t.Fatalf("after removal: %v/%v, want slow_path/unknown_pair", r.Verdict, r.Reason)
	}
}

func TestCompileErrors(t *testing.T) {
	ports := switchtest.Ports(testIndex)
	delete(ports, switchtest.P3)
	rules, skipped, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || !errors.Is(skipped[0], switching.ErrUnknownPort) || len(rules) != len(switchtest.Table().Pairs)-1 {
		t.Fatalf("skipped %v, %d rules", skipped, len(rules))
	}
	bad := switchtest.Table()
	bad.Pairs[1].ID = bad.Pairs[0].ID
	if _, _, err := switching.Compile(bad, ports, 0); !errors.Is(err, table.ErrInvalid) {
		t.Fatalf("duplicate IDs: err %v", err)
	}
}

func TestDropPPMUsesRand(t *testing.T) {
	f, ports := newForwarder(t)
	tb := switchtest.Table()
	tb.Pairs[0].DropPPM = 500_000
	rules, _, _ := switching.Compile(tb, ports, 0)
	f.Update(rules)
	frame := switchtest.Frame(switchtest.MAC(1, 1), switchtest.PortMAC(1), -1, nil, 1, switchtest.PairPlain, false)
	for _, tc := range []struct {
		r    uint32
		want switching.Verdict
	}{{499_999, switching.VerdictDrop}, {500_000, switching.VerdictForward}, {1_000_000 + 10, switching.VerdictDrop}} {
		f.Rand = func() uint32 { return tc.r }
		buf := append(make([]byte, switching.Headroom), frame...)
		if r := f.Forward(buf, switching.Headroom, testIndex[switchtest.P1]); r.Verdict != tc.want {
			t.Errorf("rand %d: %v, want %v", tc.r, r.Verdict, tc.want)
		}
	}
}

func TestNoHeadroom(t *testing.T) {
	f, _ := newForwarder(t)
	frame := switchtest.Frame(switchtest.MAC(1, 2), switchtest.PortMAC(1), -1, nil, 1, switchtest.PairVLAN, false)
	if r := f.Forward(frame, 0, testIndex[switchtest.P1]); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonNoRoom {
		t.Fatalf("push without headroom: %v/%v", r.Verdict, r.Reason)
	}
	if r := f.Forward(frame, len(frame)+1, 1); r.Verdict != switching.VerdictDrop {
		t.Fatalf("offset past the end: %v", r.Verdict)
	}
}

func TestForwardAllocs(t *testing.T) {
	f, _ := newForwarder(t)
	cs := switchtest.Corpus()
	bufs := make([][]byte, len(cs))
	allocs := testing.AllocsPerRun(20, func() {
		for i, c := range cs {
			bufs[i] = append(bufs[i][:0], make([]byte, switching.Headroom)...)
			bufs[i] = append(bufs[i], c.Frame...)
			f.Forward(bufs[i], switching.Headroom, testIndex[c.Port])
		}
	})
	if allocs != 0 {
		t.Fatalf("Forward allocates: %v per corpus run", allocs)
	}
}

func BenchmarkForward(b *testing.B) {
	f, _ := newForwarder(b)
	for _, name := range []string{"pair1/dir0/eth/vlan-1", "pair2/dir0/udp/vlan100/csumtrue", "not-dxpu/arp"} {
		var frame []byte
		var port string
		for _, c := range switchtest.Corpus() {
			if c.Name == name {
				frame, port = c.Frame, c.Port
			}
		}
		buf := make([]byte, switching.Headroom+len(frame))
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				copy(buf[switching.Headroom:], frame)
				f.Forward(buf, switching.Headroom, testIndex[port])
			}
		})
	}
}

// TestForwardControl: the slow path forwards CONTROL messages exactly like
// data frames of their pair (spoof checks and rewrite included), drops
// unknown pairs, and counts only what Forward did not.
func TestForwardControl(t *testing.T) {
	f, ports := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	ctl := switchtest.Frame(host.MAC, switchtest.PortMAC(1), 5, nil, 5, switchtest.PairPlain, false)
	data := append([]byte(nil), ctl...)
	data[19] = 1 // the same frame as a TLP message (byte 1 of the header)
	in := testIndex[switchtest.P1]

	buf := append(make([]byte, switching.Headroom), ctl...)
	if r := f.Forward(buf, switching.Headroom, in); r.Verdict != switching.VerdictSlowPath || r.Reason != switching.ReasonControl {
		t.Fatalf("Forward: %v/%v, want slow_path/control", r.Verdict, r.Reason)
	}
	r := f.ForwardControl(buf, switching.Headroom, in)
	dbuf := append(make([]byte, switching.Headroom), data...)
	rd := f.Forward(dbuf, switching.Headroom, in)
	got, want := buf[r.Off:], dbuf[rd.Off:]
	if r.Verdict != switching.VerdictForward || r.Egress != rd.Egress || len(got) != len(want) {
		t.Fatalf("ForwardControl: %+v, data frame: %+v", r, rd)
	}
	for i := range got {
		if i != 19-4 && i != 19 && got[i] != want[i] { // only the message type may differ
			t.Fatalf("byte %d: control %#x, data %#x", i, got[i], want[i])
		}
	}
	checkRewrite(t, switchtest.Case{Name: "control", Frame: ctl}, got, r, ports)

	// Spoofed: counted once, as spoofed; unknown pair: not counted again.
	spoof := switchtest.Frame(switchtest.MAC(9, 9), switchtest.PortMAC(1), -1, nil, 5, switchtest.PairPlain, false)
	if r := f.ForwardControl(append(make([]byte, 4), spoof...), 4, in); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonSpoofed {
		t.Fatalf("spoofed control: %v/%v", r.Verdict, r.Reason)
	}
	before := portCounters(f)
	unknown := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, 5, switchtest.PairUnknown, false)
	if r := f.ForwardControl(append(make([]byte, 4), unknown...), 4, in); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonUnknownPair {
		t.Fatalf("unknown pair: %v/%v", r.Verdict, r.Reason)
	}
	if r := f.ForwardControl([]byte{1, 2, 3}, 0, in); r.Verdict != switching.VerdictPass {
		t.Fatalf("runt: %v", r.Verdict)
	}
	if after := portCounters(f); after != before {
		t.Fatalf("slow-path drops of unknown pairs and runts were counted: %+v -> %+v", before, after)
	}
	var c switching.Counters
	f.PairCounters(func(id uint32, cc switching.Counters) {
		if id == switchtest.PairPlain {
			c = cc
		}
	})
	if c.Packets[switching.ReasonSpoofed] != 1 || c.Packets[switching.ReasonToGPU] != 2 || c.Packets[switching.ReasonControl] != 0 {
		t.Fatalf("pair counters %+v", c.Packets)
	}
}

func portCounters(f *switching.Forwarder) switching.Counters {
	var sum switching.Counters
	f.PortCounters(func(_ string, c switching.Counters) { sum.Merge(&c) })
	return sum
}

// TestRewrittenChecksumZeroSentAsFFFF: a UDP checksum that the rewrite
// updates to 0x0000 goes out as 0xffff (RFC 768: 0 means "no checksum",
// and a receiver would then skip the check), and still verifies.
func TestRewrittenChecksumZeroSentAsFFFF(t *testing.T) {
	f, ports := newForwarder(t)
	c := switchtest.ZeroFoldCase()
	in := c.Frame[14+20+6:]
	if ck := binary.BigEndian.Uint16(in); ck == 0 || ck == 0xffff {
		t.Fatalf("fixture: incoming UDP checksum %#04x, want one the update must carry", ck)
	}
	buf := make([]byte, switching.Headroom+len(c.Frame))
	copy(buf[switching.Headroom:], c.Frame)
	res := f.Forward(buf, switching.Headroom, testIndex[c.Port])
	if res.Verdict != c.Want || res.Reason != c.Reason {
		t.Fatalf("got %v/%v, want %v/%v", res.Verdict, res.Reason, c.Want, c.Reason)
	}
	out := buf[res.Off:]
	l3, _, _ := ethInfo(out)
	if ck := binary.BigEndian.Uint16(out[l3+20+6:]); ck != 0xffff {
		t.Fatalf("rewritten UDP checksum %#04x, want 0xffff (a computed 0 is sent as 0xffff)", ck)
	}
	checkRewrite(t, c, out, res, ports)
}

// forward runs frame, arrived on port, through f and returns the result
// and the frame as it leaves.
func forward(f *switching.Forwarder, frame []byte, port string) (switching.Result, []byte) {
	buf := append(make([]byte, switching.Headroom), frame...)
	r := f.Forward(buf, switching.Headroom, testIndex[port])
	return r, buf[r.Off:]
}

// TestForwardFrameEdges: the length and header checks at their bounds.
func TestForwardFrameEdges(t *testing.T) {
	f, _ := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	check := func(name string, r switching.Result, v switching.Verdict, why switching.Reason) {
		t.Helper()
		if r.Verdict != v || r.Reason != why {
			t.Errorf("%s: %v/%v, want %v/%v", name, r.Verdict, r.Reason, v, why)
		}
	}
	// An empty frame (off at the buffer's end) is no dxpu frame.
	buf := make([]byte, switching.Headroom)
	check("empty frame", f.Forward(buf, len(buf), testIndex[switchtest.P1]), switching.VerdictPass, switching.ReasonNotDXPU)

	// An Ethernet header alone with the dxpu EtherType is a malformed dxpu
	// frame, not something for the kernel.
	eth := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)[:encap.EthHeaderLen]
	r, _ := forward(f, eth, switchtest.P1)
	check("14-byte dxpu EtherType frame", r, switching.VerdictDrop, switching.ReasonMalformed)

	// IPv4 with a UDP header cut short after the destination port: no dxpu
	// frame (the UDP header is incomplete).
	vhost := switchtest.Table().Pairs[1].Host
	udp := switchtest.Frame(vhost.MAC, switchtest.PortMAC(1), -1, &encap.L3{Src: vhost.IP, Dst: switchtest.PortIP(1), SrcPort: 40000}, encap.MsgTLP, switchtest.PairVLAN, false)
	for cut := 2; cut < encap.UDPHeaderLen; cut++ {
		short := udp[:encap.EthHeaderLen+encap.IPv4HeaderLen+cut]
		r, out := forward(f, short, switchtest.P1)
		check(fmt.Sprintf("UDP header of %d bytes", cut), r, switching.VerdictPass, switching.ReasonNotDXPU)
		if string(out) != string(short) {
			t.Errorf("cut %d: frame changed", cut)
		}
	}

	// An IHL below 5 words is no IPv4 header the switch reads, whatever
	// follows (here a destination address whose low half reads as the
	// dxpu port where a 16-byte header would put the UDP destination port).
	port := uint16(switching.DefaultUDPPort)
	dst := netip.AddrFrom4([4]byte{10, 0, byte(port >> 8), byte(port)})
	ihl4 := switchtest.Frame(vhost.MAC, switchtest.PortMAC(1), -1, &encap.L3{Src: vhost.IP, Dst: dst, SrcPort: 40000}, encap.MsgTLP, switchtest.PairVLAN, false)
	ihl4[encap.EthHeaderLen] = 0x44
	r, _ = forward(f, ihl4, switchtest.P1)
	check("IHL 4", r, switching.VerdictPass, switching.ReasonNotDXPU)
}

// TestCompileSkippedNamesMissingPort: the skip error names the port that is
// missing, the GPU's here.
func TestCompileSkippedNamesMissingPort(t *testing.T) {
	ports := switchtest.Ports(testIndex)
	delete(ports, switchtest.P2) // every pair's GPU side
	_, skipped, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil || len(skipped) != len(switchtest.Table().Pairs) {
		t.Fatalf("Compile: %v, %d skipped", err, len(skipped))
	}
	for _, e := range skipped {
		if !errors.Is(e, switching.ErrUnknownPort) || !strings.Contains(e.Error(), `"`+switchtest.P2+`"`) {
			t.Errorf("skipped: %v, want it to name port %q", e, switchtest.P2)
		}
	}
}
