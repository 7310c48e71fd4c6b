package switching_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Tests from hand-made bugs: each fails with a small change to the
// forwarder, its counters or its helpers that the older tests let through.

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

func portCountersByName(f *switching.Forwarder) map[string]switching.Counters {
	m := map[string]switching.Counters{}
	f.PortCounters(func(p string, c switching.Counters) { m[p] = c })
	return m
}

func pairCountersByID(f switching.CounterSource) map[uint32]switching.Counters {
	m := map[uint32]switching.Counters{}
	f.PairCounters(func(id uint32, c switching.Counters) { m[id] = c })
	return m
}

// TestPortCountersByDirection: a forwarded frame counts as received on its
// ingress port (to_gpu/to_host, its size on arrival) and as transmitted on
// its egress port (tx_*, its size as sent, a pushed tag included), whether
// the ports were set before or after the rules.
func TestPortCountersByDirection(t *testing.T) {
	ports := switchtest.Ports(testIndex)
	rules, _, err := switching.Compile(switchtest.Table(), ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, order := range []string{"ports first", "rules first"} {
		f := switching.NewForwarder(0)
		if order == "ports first" {
			f.SetPorts(ports)
			f.Update(rules)
		} else {
			f.Update(rules)
			f.SetPorts(ports)
		}
		p := switchtest.Table().Pairs[1] // VLAN 100 on egress: an untagged frame grows by 4
		toGPU := switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, p.ID, false)
		toHost := append(switchtest.Frame(p.GPU.MAC, switchtest.PortMAC(2), -1, nil, encap.MsgTLP, p.ID, false), 0, 0, 0)
		r1, out1 := forward(f, toGPU, p.Host.Port)
		r2, out2 := forward(f, toHost, p.GPU.Port)
		if r1.Reason != switching.ReasonToGPU || r2.Reason != switching.ReasonToHost || len(out1) != len(toGPU)+4 || len(out2) != len(toHost)+4 {
			t.Fatalf("%s: fixture: %v %v, %d -> %d bytes", order, r1.Reason, r2.Reason, len(toGPU), len(out1))
		}
		got := portCountersByName(f)
		want := map[string]switching.Counters{}
		add := func(port string, r switching.Reason, n int) {
			c := want[port]
			c.Add(r, n)
			want[port] = c
		}
		add(p.Host.Port, switching.ReasonToGPU, len(toGPU))
		add(p.GPU.Port, switching.ReasonTxToGPU, len(out1))
		add(p.GPU.Port, switching.ReasonToHost, len(toHost))
		add(p.Host.Port, switching.ReasonTxToHost, len(out2))
		for _, name := range []string{"", switchtest.P1, switchtest.P2, switchtest.P3} {
			if got[name] != want[name] {
				t.Errorf("%s: port %q counters\n%+v\nwant\n%+v", order, name, got[name], want[name])
			}
		}
	}
}

// TestCountersKeptAcrossUpdates: a new table or new ports keep the
// counters of the pairs and ports that stay; a removed pair's go.
func TestCountersKeptAcrossUpdates(t *testing.T) {
	f, ports := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	frame := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward(f, frame, switchtest.P1)
	rules, _, _ := switching.Compile(switchtest.Table(), ports, 0)
	f.Update(rules)
	f.SetPorts(ports)
	forward(f, frame, switchtest.P1)
	if c := pairCountersByID(f)[switchtest.PairPlain]; c.Packets[switching.ReasonToGPU] != 2 {
		t.Errorf("pair counters after Update: %+v, want 2 frames to_gpu", c.Packets)
	}
	if c := portCountersByName(f)[switchtest.P1]; c.Packets[switching.ReasonToGPU] != 2 {
		t.Errorf("port %s counters after SetPorts: %+v, want 2 frames to_gpu", switchtest.P1, c.Packets)
	}
	tb := switchtest.Table()
	tb.Pairs = tb.Pairs[1:]
	rules, _, _ = switching.Compile(tb, ports, 0)
	f.Update(rules)
	if _, ok := pairCountersByID(f)[switchtest.PairPlain]; ok {
		t.Error("a removed pair's counters are still exported")
	}
}

// TestUnmanagedPortCounted: frames on an interface that is no port of the
// switch count under port "".
func TestUnmanagedPortCounted(t *testing.T) {
	f, _ := newForwarder(t)
	arp := make([]byte, 60)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 1, 1, 0x08, 0x06})
	buf := append(make([]byte, switching.Headroom), arp...)
	if r := f.Forward(buf, switching.Headroom, 99); r.Verdict != switching.VerdictPass {
		t.Fatalf("ARP: %v", r.Verdict)
	}
	if c := portCountersByName(f)[""]; c.Packets[switching.ReasonNotDXPU] != 1 || c.Bytes[switching.ReasonNotDXPU] != 60 {
		t.Fatalf("unmanaged port counters %+v, want 1 not_dxpu frame of 60 bytes", c)
	}
}

// TestForwardDatagramEdges: the UDP-socket switch refuses a payload one
// byte short of a dxpu header, drops what goes to an endpoint without an
// IP (no_room), accepts an endpoint without a UDP port from 8855, and
// counts both directions on its port.
func TestForwardDatagramEdges(t *testing.T) {
	tbl := &table.Table{Version: 1, Pairs: []table.Pair{
		{ID: 5,
			Host: table.Endpoint{Port: "udp", MAC: switchtest.MAC(1, 1), IP: netip.MustParseAddr("10.0.0.1")},
			GPU:  table.Endpoint{Port: "udp", MAC: switchtest.MAC(2, 1), IP: netip.MustParseAddr("10.0.0.2"), UDPPort: 9000}},
		{ID: 6,
			Host: table.Endpoint{Port: "udp", MAC: switchtest.MAC(1, 2), IP: netip.MustParseAddr("10.0.0.3"), UDPPort: 9001},
			GPU:  table.Endpoint{Port: "udp", MAC: switchtest.MAC(2, 2)}},
	}}
	ports := switching.SyntheticPorts([]string{"udp"})
	rules, _, err := switching.Compile(tbl, ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	msg := func(id uint32, n int) []byte {
		b := make([]byte, n)
		encap.Header(b).SetVersionFlags(1, 0)
		encap.Header(b).SetType(encap.MsgTLP)
		encap.Header(b).SetPairID(id)
		return b
	}
	hostAt := netip.MustParseAddrPort("10.0.0.1:8855")
	if _, r := f.ForwardDatagram(msg(5, encap.HeaderLen-1), hostAt, switching.UDPIndex); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonMalformed {
		t.Errorf("%d-byte payload: %v/%v, want drop/malformed", encap.HeaderLen-1, r.Verdict, r.Reason)
	}
	to, r := f.ForwardDatagram(msg(5, 48), hostAt, switching.UDPIndex)
	if r.Verdict != switching.VerdictForward || to != netip.MustParseAddrPort("10.0.0.2:9000") {
		t.Fatalf("host without udp_port, from port 8855: %v/%v to %v, want forward to 10.0.0.2:9000", r.Verdict, r.Reason, to)
	}
	if to, r := f.ForwardDatagram(msg(6, 48), netip.MustParseAddrPort("10.0.0.3:9001"), switching.UDPIndex); r.Verdict != switching.VerdictDrop || r.Reason != switching.ReasonNoRoom {
		t.Errorf("to a GPU without IP: %v/%v to %v, want drop/no_room", r.Verdict, r.Reason, to)
	}
	c := portCountersByName(f)["udp"]
	if c.Packets[switching.ReasonToGPU] != 1 || c.Packets[switching.ReasonTxToGPU] != 1 || c.Bytes[switching.ReasonTxToGPU] != 48 {
		t.Errorf("port udp counters %+v, want one to_gpu and one tx_to_gpu of 48 bytes", c)
	}
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

// TestTableHelpers: PortNames, SyntheticPorts and IngressByMAC.
func TestTableHelpers(t *testing.T) {
	tb := switchtest.Table()
	if got := switching.PortNames(tb); !slices.Equal(got, []string{switchtest.P1, switchtest.P2, switchtest.P3}) {
		t.Errorf("PortNames = %v", got)
	}
	sp := switching.SyntheticPorts([]string{"a", "b"})
	if sp["a"].Index != 1 || sp["b"].Index != 2 || sp["a"].Name != "a" ||
		sp["a"].MAC.String() != "02:5e:00:00:00:01" || sp["b"].MAC.String() != "02:5e:00:00:00:02" {
		t.Errorf("SyntheticPorts = %+v", sp)
	}
	by := switching.IngressByMAC(tb)
	for _, p := range tb.Pairs {
		if by[[6]byte(p.Host.MAC)] != p.Host.Port || by[[6]byte(p.GPU.MAC)] != p.GPU.Port {
			t.Errorf("IngressByMAC: pair %#x host %s -> %q, GPU %s -> %q", p.ID, p.Host.MAC, by[[6]byte(p.Host.MAC)], p.GPU.MAC, by[[6]byte(p.GPU.MAC)])
		}
	}
	if len(by) != 2*len(tb.Pairs) {
		t.Errorf("IngressByMAC has %d MACs, want %d", len(by), 2*len(tb.Pairs))
	}
}

// TestReplayOutcomes: replay names the egress port and gives the XDP
// action of each verdict (slow path and pass: XDP_PASS).
func TestReplayOutcomes(t *testing.T) {
	for v, want := range map[switching.Verdict]uint32{switching.VerdictDrop: switching.XDPDrop, switching.VerdictForward: switching.XDPRedirect,
		switching.VerdictSlowPath: switching.XDPPass, switching.VerdictPass: switching.XDPPass} {
		if got := v.XDPAction(); got != want {
			t.Errorf("%v.XDPAction() = %d, want %d", v, got, want)
		}
	}
	tb := switchtest.Table()
	ports := switching.SyntheticPorts(switching.PortNames(tb))
	rules, _, _ := switching.Compile(tb, ports, 0)
	f := switching.NewForwarder(0)
	f.SetPorts(ports)
	f.Update(rules)
	var frames [][]byte
	var want []string
	for _, p := range tb.Pairs[:3] {
		frames = append(frames, switchtest.Frame(p.Host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, p.ID, false))
		want = append(want, p.GPU.Port)
		frames = append(frames, switchtest.Frame(p.GPU.MAC, switchtest.PortMAC(2), -1, nil, encap.MsgTLP, p.ID, false))
		want = append(want, p.Host.Port)
	}
	out := f.Replay(switching.AssignPorts(tb, frames, "none"), ports)
	for i, o := range out {
		if o.Verdict != switching.VerdictForward || o.Action != switching.XDPRedirect || o.Egress != want[i] {
			t.Errorf("frame %d: %v action %d egress %q, want forward/%d to %q", i, o.Verdict, o.Action, o.Egress, switching.XDPRedirect, want[i])
		}
	}
}

// TestSumSourcesAdds: the sum of two sources adds their counters.
func TestSumSourcesAdds(t *testing.T) {
	a, _ := newForwarder(t)
	b, _ := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	frame := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward(a, frame, switchtest.P1)
	forward(b, frame, switchtest.P1)
	forward(b, frame, switchtest.P1)
	sum := switching.SumSources{a, b}
	if c := pairCountersByID(sum)[switchtest.PairPlain]; c.Packets[switching.ReasonToGPU] != 3 || c.Bytes[switching.ReasonToGPU] != uint64(3*len(frame)) {
		t.Errorf("summed pair counters %+v, want 3 frames", c)
	}
	ports := map[string]switching.Counters{}
	sum.PortCounters(func(p string, c switching.Counters) { ports[p] = c })
	if c := ports[switchtest.P1]; c.Packets[switching.ReasonToGPU] != 3 {
		t.Errorf("summed port counters %+v, want 3 frames", c)
	}
}

// TestCollectorExportsBytes: the byte series carry bytes.
func TestCollectorExportsBytes(t *testing.T) {
	f, _ := newForwarder(t)
	host := switchtest.Table().Pairs[0].Host
	frame := switchtest.Frame(host.MAC, switchtest.PortMAC(1), -1, nil, encap.MsgTLP, switchtest.PairPlain, false)
	forward(f, frame, switchtest.P1)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(switching.NewCollector(f, nil))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			labels := map[string]string{}
			for _, l := range m.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == "to_gpu" && (labels["pair"] == "1" || labels["port"] == switchtest.P1) {
				found[mf.GetName()] = m.Counter.GetValue()
			}
		}
	}
	for name, want := range map[string]float64{"dxpu_switch_pair_packets_total": 1, "dxpu_switch_pair_bytes_total": float64(len(frame)),
		"dxpu_switch_port_packets_total": 1, "dxpu_switch_port_bytes_total": float64(len(frame))} {
		if found[name] != want {
			t.Errorf("%s{to_gpu} = %v, want %v", name, found[name], want)
		}
	}
}

// TestChecksumOddLengthAndCarries: an odd last byte is the high half of a
// word, and carries fold until none is left.
func TestChecksumOddLengthAndCarries(t *testing.T) {
	if got := switching.Checksum([]byte{0x01}, 0); got != 0xfeff {
		t.Errorf("Checksum(01) = %#04x, want 0xfeff", got)
	}
	if got := switching.Checksum([]byte{0x45, 0x00, 0x1c}, 0); got != ^uint16(0x4500+0x1c00) {
		t.Errorf("Checksum(45 00 1c) = %#04x, want %#04x", got, ^uint16(0x4500+0x1c00))
	}
	// 0x1ffff folds to 0x10000, which folds again to 0x0001.
	if got := switching.Checksum(nil, 0x1ffff); got != 0xfffe {
		t.Errorf("Checksum(seed 0x1ffff) = %#04x, want 0xfffe", got)
	}
}

// TestReadFrameRefusesSmallHeadroom: ReadFrame needs room to re-insert a
// stripped tag before the frame; less is an error, not a read.
func TestReadFrameRefusesSmallHeadroom(t *testing.T) {
	privtest.Root(t)
	lo, err := net.InterfaceByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	s, err := switching.OpenPacketSocket(lo.Index)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]byte, 2048)
	for _, h := range []int{0, 3} {
		if _, _, err := s.ReadFrame(buf, h); err == nil || errors.Is(err, switching.ErrTimeout) || !strings.Contains(err.Error(), "headroom") {
			t.Errorf("ReadFrame with %d bytes of headroom: %v, want the headroom error", h, err)
		}
	}
	if _, _, err := s.ReadFrame(buf, len(buf)); err == nil || !strings.Contains(err.Error(), "headroom") {
		t.Errorf("ReadFrame with all the buffer as headroom: %v, want the headroom error", err)
	}
}
