// Package switchtest holds the fixtures the switch's tests, replay and
// benchmarks share: a table with ports and a corpus of frames that covers
// every branch of the forwarding decision.
package switchtest

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Port names of the fixture. P1 and P2 carry most pairs, P3 one more.
const (
	P1 = "sw1"
	P2 = "sw2"
	P3 = "sw3"
)

// PortNames lists the fixture's ports in order.
var PortNames = []string{P1, P2, P3}

// MAC returns 02:00:00:00:a:b.
func MAC(a, b byte) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, a, b} }

func mac6(m net.HardwareAddr) [6]byte { return [6]byte(m) }

// PortMAC and PortIP are the switch's own addresses on port i (1-based).
func PortMAC(i int) net.HardwareAddr { return net.HardwareAddr{2, 0x5e, 0, 0, 0, byte(i)} }
func PortIP(i int) netip.Addr        { return netip.AddrFrom4([4]byte{10, 0, byte(i), 1}) }

// Ports returns the fixture's ports with the given ifindexes (by name);
// P3 has no IPv4 address.
func Ports(index map[string]uint32) map[string]switching.Port {
	ports := map[string]switching.Port{}
	for i, name := range PortNames {
		p := switching.Port{Name: name, Index: index[name], MAC: PortMAC(i + 1)}
		if name != P3 {
			p.IP = PortIP(i + 1)
		}
		ports[name] = p
	}
	return ports
}

// Pair IDs of the fixture.
const (
	PairPlain   = 0x000001 // eth, no VLAN, no IPs
	PairVLAN    = 0x000002 // VLAN 100 on egress, IPs and UDP ports set
	PairFar     = 0x123456 // host on P3, VLAN 7
	PairLossy   = 0x000004 // DropPPM 1e6: every frame dropped
	PairUnknown = 0x0000ff // not in the table
)

// Table returns the fixture's table.
func Table() *table.Table {
	return &table.Table{Version: 1, Pairs: []table.Pair{
		{ID: PairPlain,
			Host: table.Endpoint{Port: P1, MAC: MAC(1, 1)},
			GPU:  table.Endpoint{Port: P2, MAC: MAC(2, 1)}},
		{ID: PairVLAN, VLAN: 100,
			Host: table.Endpoint{Port: P1, MAC: MAC(1, 2), IP: netip.MustParseAddr("10.0.1.2"), UDPPort: 9000},
			GPU:  table.Endpoint{Port: P2, MAC: MAC(2, 2), IP: netip.MustParseAddr("10.0.2.2")}},
		{ID: PairFar, VLAN: 7,
			Host: table.Endpoint{Port: P3, MAC: MAC(3, 3), IP: netip.MustParseAddr("10.0.3.3")},
			GPU:  table.Endpoint{Port: P2, MAC: MAC(2, 3), IP: netip.MustParseAddr("10.0.2.3"), UDPPort: 9001}},
		{ID: PairLossy, DropPPM: 1_000_000,
			Host: table.Endpoint{Port: P1, MAC: MAC(1, 4)},
			GPU:  table.Endpoint{Port: P2, MAC: MAC(2, 4)}},
	}}
}

// Case is one frame of the corpus and the port it arrives on.
type Case struct {
	Name  string
	Port  string
	Frame []byte
	// Want is the verdict the forwarding decision must reach.
	Want switching.Verdict
	// Reason is the reason it must give.
	Reason switching.Reason
}

// tlp is a 3-DW memory read header followed by nothing: enough for frames.
var tlp = []byte{0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x0f, 0xfe, 0xe0, 0x00, 0x00}

// Frame builds a dxpu frame of pair id from src to dst. With l3 it is UDP
// (with a valid UDP checksum when udpChecksum). vlan < 0: untagged.
func Frame(src, dst net.HardwareAddr, vlan int, l3 *encap.L3, typ encap.MsgType, id uint32, udpChecksum bool) []byte {
	l2 := &encap.L2{Src: mac6(src), Dst: mac6(dst)}
	if vlan >= 0 {
		l2.Tagged, l2.VLAN, l2.PCP = true, uint16(vlan), 5
	}
	f := &encap.Fields{Type: typ, PairID: id, Seq: 7, Ack: 3, Flags: encap.FlagAck}
	var b []byte
	var err error
	switch typ {
	case encap.MsgTLP:
		if l3 != nil {
			b, err = encap.AppendDxpuUDP(nil, l2, l3, f, [][]byte{tlp, tlp})
		} else {
			b, err = encap.AppendDxpuEth(nil, l2, f, [][]byte{tlp, tlp})
		}
	default:
		b, err = encap.AppendDxpuMsg(nil, l2, l3, f, []byte{1, 2, 3, 4})
	}
	if err != nil {
		panic(fmt.Sprintf("switchtest: building a fixture frame: %v", err)) // fixture bug, not input
	}
	if l3 != nil && udpChecksum {
		SetUDPChecksum(b)
	}
	return b
}

// SetUDPChecksum computes the UDP checksum of a dxpu-udp frame in place.
// It panics on another frame (a fixture bug, not input).
func SetUDPChecksum(b []byte) {
	l, err := encap.Walk(b, nil)
	if err != nil || l.Encap != encap.EncapDxpuUDP {
		panic(fmt.Sprintf("switchtest: SetUDPChecksum on a frame that is not dxpu-udp (%v, %v)", l.Encap, err))
	}
	ip, udp := encap.IPv4(b[l.IPv4:]), b[l.UDP:l.UDPEnd]
	binary.BigEndian.PutUint16(udp[encap.UDPChecksumOffset:], 0)
	var sum uint32
	for _, a := range [][]byte{ip.Src(), ip.Dst()} {
		sum += uint32(binary.BigEndian.Uint16(a)) + uint32(binary.BigEndian.Uint16(a[2:]))
	}
	sum += encap.IPProtoUDP + uint32(len(udp))
	c := switching.Checksum(udp, sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[encap.UDPChecksumOffset:], c)
}

func l3(src, dst netip.Addr) *encap.L3 {
	return &encap.L3{Src: src, Dst: dst, SrcPort: 40000, ID: 0x1234}
}

// Corpus returns frames that exercise every branch of the decision, with
// the verdict each must get. Deterministic.
func Corpus() []Case {
	var cs []Case
	add := func(name, port string, want switching.Verdict, r switching.Reason, b []byte) {
		cs = append(cs, Case{Name: name, Port: port, Frame: b, Want: want, Reason: r})
	}
	fwd, drop, slow, pass := switching.VerdictForward, switching.VerdictDrop, switching.VerdictSlowPath, switching.VerdictPass
	t := Table()
	for _, p := range t.Pairs {
		if p.DropPPM != 0 {
			continue
		}
		for dir, ends := range [][2]table.Endpoint{{p.Host, p.GPU}, {p.GPU, p.Host}} {
			from := ends[0]
			reason := switching.ReasonToGPU
			if dir == 1 {
				reason = switching.ReasonToHost
			}
			swMAC := PortMAC(portIndex(from.Port))
			for _, vlan := range []int{-1, 0, 100, 4094} {
				name := fmt.Sprintf("pair%x/dir%d/eth/vlan%d", p.ID, dir, vlan)
				add(name, from.Port, fwd, reason, Frame(from.MAC, swMAC, vlan, nil, encap.MsgTLP, p.ID, false))
				srcIP := from.IP
				if !srcIP.IsValid() {
					srcIP = netip.MustParseAddr("192.0.2.1")
				}
				for _, ck := range []bool{false, true} {
					name := fmt.Sprintf("pair%x/dir%d/udp/vlan%d/csum%v", p.ID, dir, vlan, ck)
					add(name, from.Port, fwd, reason, Frame(from.MAC, swMAC, vlan, l3(srcIP, PortIP(portIndex(from.Port))), encap.MsgTLP, p.ID, ck))
				}
			}
			add(fmt.Sprintf("pair%x/dir%d/ack", p.ID, dir), from.Port, fwd, reason, Frame(from.MAC, swMAC, -1, nil, encap.MsgAck, p.ID, false))
			// Spoofing: right MAC, wrong port; right port, wrong MAC.
			other := P3
			if from.Port == P3 {
				other = P1
			}
			add(fmt.Sprintf("pair%x/dir%d/spoof-port", p.ID, dir), other, drop, switching.ReasonSpoofed, Frame(from.MAC, swMAC, -1, nil, encap.MsgTLP, p.ID, false))
			add(fmt.Sprintf("pair%x/dir%d/spoof-mac", p.ID, dir), from.Port, drop, switching.ReasonSpoofed, Frame(MAC(9, 9), swMAC, -1, nil, encap.MsgTLP, p.ID, false))
			if from.IP.IsValid() {
				add(fmt.Sprintf("pair%x/dir%d/spoof-ip", p.ID, dir), from.Port, drop, switching.ReasonSpoofed,
					Frame(from.MAC, swMAC, -1, l3(netip.MustParseAddr("10.9.9.9"), PortIP(1)), encap.MsgTLP, p.ID, true))
			}
		}
	}
	cs = append(cs, ZeroFoldCase())
	host := t.Pairs[0].Host
	// Another pair's ID from the wrong port: pair 1's host claiming pair 0x123456.
	add("spoof/other-pair-id", P1, drop, switching.ReasonSpoofed, Frame(host.MAC, PortMAC(1), -1, nil, encap.MsgTLP, PairFar, false))
	add("lossy", P1, drop, switching.ReasonFault, Frame(MAC(1, 4), PortMAC(1), -1, nil, encap.MsgTLP, PairLossy, false))
	add("control", P1, slow, switching.ReasonControl, Frame(host.MAC, PortMAC(1), -1, nil, encap.MsgControl, PairPlain, false))
	add("control/udp/vlan", P1, slow, switching.ReasonControl, Frame(host.MAC, PortMAC(1), 3, l3(PortIP(9), PortIP(1)), encap.MsgControl, 0, false))
	add("unknown-pair", P1, slow, switching.ReasonUnknownPair, Frame(host.MAC, PortMAC(1), -1, nil, encap.MsgTLP, PairUnknown, false))
	add("unknown-pair/udp", P2, slow, switching.ReasonUnknownPair, Frame(host.MAC, PortMAC(1), -1, l3(PortIP(9), PortIP(2)), encap.MsgTLP, PairUnknown, true))

	good := Frame(host.MAC, PortMAC(1), -1, nil, encap.MsgTLP, PairPlain, false)
	short := append([]byte(nil), good[:14+39]...)
	add("malformed/short-header", P1, drop, switching.ReasonMalformed, short)
	v2 := append([]byte(nil), good...)
	v2[14] = 0x21
	add("malformed/version2", P1, drop, switching.ReasonMalformed, v2)

	arp := make([]byte, 60)
	copy(arp, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 1, 1, 0x08, 0x06})
	add("not-dxpu/arp", P1, pass, switching.ReasonNotDXPU, arp)
	add("not-dxpu/runt", P1, pass, switching.ReasonNotDXPU, []byte{1, 2, 3})
	add("not-dxpu/vlan-runt", P1, pass, switching.ReasonNotDXPU, append(append([]byte(nil), good[:12]...), 0x81, 0x00, 0))
	udpOther := Frame(host.MAC, PortMAC(1), -1, &encap.L3{Src: PortIP(9), Dst: PortIP(1), DstPort: 9999}, encap.MsgTLP, PairPlain, false)
	add("not-dxpu/udp-other-port", P1, pass, switching.ReasonNotDXPU, udpOther)
	frag := Frame(host.MAC, PortMAC(1), -1, l3(PortIP(9), PortIP(1)), encap.MsgTLP, PairPlain, false)
	frag[20] |= 0x20 // MF
	add("not-dxpu/ip-fragment", P1, pass, switching.ReasonNotDXPU, frag)
	nettlp, err := encap.AppendNetTLP(nil, &encap.L2{Src: mac6(host.MAC), Dst: mac6(PortMAC(1))},
		&encap.L3{Src: PortIP(9), Dst: PortIP(1)}, 1, 2, tlp)
	if err != nil {
		panic(err)
	}
	add("not-dxpu/nettlp", P1, pass, switching.ReasonNotDXPU, nettlp)
	// Two tags (encap.ParseFrame reads them): the switch, like its XDP
	// program, reads one 802.1Q tag and leaves QinQ to the kernel.
	for _, outer := range []uint16{encap.EtherTypeQinQ, encap.EtherTypeVLAN} {
		l2 := &encap.L2{Src: mac6(host.MAC), Dst: mac6(PortMAC(1)), Tagged: true, VLAN: 100, OuterTPID: outer, OuterVLAN: 200}
		f := &encap.Fields{PairID: PairPlain, Seq: 7}
		qinq, err := encap.AppendDxpuEth(nil, l2, f, [][]byte{tlp})
		if err != nil {
			panic(err)
		}
		add(fmt.Sprintf("not-dxpu/qinq-%04x", outer), P1, pass, switching.ReasonNotDXPU, qinq)
	}
	return cs
}

// ZeroFoldCase is a UDP frame of PairVLAN from its host side, with a
// valid UDP checksum, whose checksum after the switch's rewrite (addresses
// and ports of the GPU side's direction) computes to 0x0000: RFC 768 has a
// computed 0 sent as 0xffff, since 0 in the field means "no checksum".
// One payload word (the last TLP's address, which the switch never reads)
// is chosen for that, from the rewritten addresses and ports as the table
// gives them, not from the switch's code.
func ZeroFoldCase() Case {
	p := Table().Pairs[1] // PairVLAN: both addresses and the port rewritten
	from, to := p.Host, p.GPU
	b := Frame(from.MAC, PortMAC(portIndex(from.Port)), -1, l3(from.IP, PortIP(portIndex(from.Port))), encap.MsgTLP, p.ID, true)
	l, err := encap.Walk(b, nil)
	if err != nil {
		panic(fmt.Sprintf("switchtest: zero-fold frame: %v", err))
	}
	udp := b[l.UDP:l.UDPEnd]
	dport := to.UDPPort
	if dport == 0 {
		dport = switching.DefaultUDPPort
	}
	// The one's complement sum the rewritten frame's checksum covers,
	// with the checksum field 0: pseudo-header (egress port's address,
	// the GPU side's), then the UDP header with the new ports and the
	// payload.
	var sum uint32
	for _, a := range []netip.Addr{PortIP(portIndex(to.Port)), to.IP} {
		a4 := a.As4()
		sum += uint32(binary.BigEndian.Uint16(a4[:])) + uint32(binary.BigEndian.Uint16(a4[2:]))
	}
	sum += encap.IPProtoUDP + uint32(len(udp)) + uint32(switching.DefaultUDPPort) + uint32(dport) + uint32(len(udp))
	for i := 8; i+1 < len(udp); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(udp[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	// Adding ^sum to one word makes the sum 0xffff (negative zero): the
	// checksum, its complement, is 0.
	last := len(udp) - 2
	w := uint32(binary.BigEndian.Uint16(udp[last:])) + uint32(^uint16(sum))
	binary.BigEndian.PutUint16(udp[last:], uint16(w&0xffff+w>>16))
	SetUDPChecksum(b)
	return Case{Name: fmt.Sprintf("pair%x/dir0/udp/csum-rewrites-to-0", p.ID), Port: from.Port, Frame: b,
		Want: switching.VerdictForward, Reason: switching.ReasonToGPU}
}

func portIndex(name string) int {
	for i, n := range PortNames {
		if n == name {
			return i + 1
		}
	}
	return 0
}

// Mutations returns n frames derived from the corpus by flipping random
// bytes and truncating, seeded for reproducibility: for the XDP-versus-Go
// comparison beyond the designed cases.
func Mutations(seed uint64, n int) []Case {
	base := Corpus()
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	out := make([]Case, 0, n)
	for i := 0; i < n; i++ {
		c := base[r.IntN(len(base))]
		b := append([]byte(nil), c.Frame...)
		switch r.IntN(4) {
		case 0: // flip a byte in the first 80 (headers)
			if len(b) > 0 {
				b[r.IntN(min(len(b), 80))] ^= byte(1 + r.IntN(255))
			}
		case 1: // truncate
			b = b[:r.IntN(len(b)+1)]
		case 2: // change the pair ID to another known one
			if len(b) > 60 {
				ids := []uint32{PairPlain, PairVLAN, PairFar, PairLossy, PairUnknown}
				id := ids[r.IntN(len(ids))]
				for off := 14; off+5 <= len(b) && off < 60; off++ {
					if b[off]>>4 == 1 && (off == 14 || off == 18 || off == 42 || off == 46) {
						b[off+2], b[off+3], b[off+4] = byte(id>>16), byte(id>>8), byte(id)
						break
					}
				}
			}
		case 3: // arrive on another port
			c.Port = PortNames[r.IntN(len(PortNames))]
		}
		out = append(out, Case{Name: fmt.Sprintf("mut%d/%s", i, c.Name), Port: c.Port, Frame: b, Want: 255})
	}
	return out
}
