package switching

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/tlp/encap"
)

// DefaultUDPPort is the UDP port of dxpu frames.
const DefaultUDPPort = encap.DefaultUDPPort

// Port is one switch port: an interface and the addresses the switch uses
// as source when it transmits on it.
type Port struct {
	Name  string
	Index uint32 // ifindex (any unique non-zero number for the userspace path)
	MAC   net.HardwareAddr
	IP    netip.Addr // IPv4 source for UDP frames; invalid: keep the sender's
}

// Direction is one direction of a pair, compiled: what is accepted and how
// it is rewritten. It mirrors struct direction in xdp/switch.c.
type Direction struct {
	InPort, OutPort uint32  // ifindexes
	SrcMAC          [6]byte // accepted only from this MAC
	DstMAC          [6]byte // new destination MAC (far endpoint)
	PortMAC         [6]byte // new source MAC (egress port)
	DstUDPPort      uint16  // new UDP destination port
	SrcUDPPort      uint16  // UDP socket mode: accepted only from this port (Go path only)
	SrcIP           [4]byte // UDP: accepted only from this address (zero: any)
	NewSrcIP        [4]byte // UDP: new source (zero: keep)
	NewDstIP        [4]byte // UDP: new destination (zero: keep)
}

// Rule is a compiled pair: Dir[0] host -> GPU, Dir[1] GPU -> host.
type Rule struct {
	ID      uint32
	Dir     [2]Direction
	VLAN    uint16
	DropPPM uint32
}

// ErrUnknownPort is returned (wrapped) when a pair names a port the switch
// does not have.
var ErrUnknownPort = errors.New("switch: unknown port")

// ErrNoIP is the reason UDPReachable leaves out a pair: an endpoint
// without an IPv4 address a UDP switch can send to.
var ErrNoIP = errors.New("switch: no IPv4 address")

// UDPReachable returns t without the pairs a UDP switch cannot relay (an
// endpoint whose IP is missing or unspecified: the relay sends to, and
// accepts from, IP:udp_port only, so the pair's traffic was dropped), and
// one ErrNoIP error per pair left out, naming it and its side. A table
// that does not validate is returned whole, for Compile to refuse.
func UDPReachable(t *table.Table) (*table.Table, []error) {
	if t.Validate() != nil {
		return t, nil
	}
	var skipped []error
	out := *t
	out.Pairs = make([]table.Pair, 0, len(t.Pairs))
	for i, p := range t.Pairs {
		side, ip := "host", p.Host.IP
		if ip.IsValid() && !ip.IsUnspecified() {
			side, ip = "gpu", p.GPU.IP
		}
		if !ip.IsValid() || ip.IsUnspecified() {
			what := "none"
			if ip.IsValid() {
				what = ip.String()
			}
			skipped = append(skipped, fmt.Errorf("%w: pairs[%d] (id %d) %s ip %s: a UDP switch relays to and from ip:udp_port; the pair is left out", ErrNoIP, i, p.ID, side, what))
			continue
		}
		out.Pairs = append(out.Pairs, p)
	}
	if len(skipped) == 0 {
		return t, nil
	}
	return &out, skipped
}

// Compile turns a table into rules for the given ports (by name). Pairs
// with an endpoint behind a port that is not in ports are left out, each
// with an error in skipped; an invalid table is an error.
func Compile(t *table.Table, ports map[string]Port, udpPort uint16) (rules []Rule, skipped []error, err error) {
	if err := t.Validate(); err != nil {
		return nil, nil, err
	}
	if udpPort == 0 {
		udpPort = DefaultUDPPort
	}
	rules = make([]Rule, 0, len(t.Pairs))
	for i, p := range t.Pairs {
		hp, ok1 := ports[p.Host.Port]
		gp, ok2 := ports[p.GPU.Port]
		if !ok1 || !ok2 {
			missing := p.Host.Port
			if ok1 {
				missing = p.GPU.Port
			}
			skipped = append(skipped, fmt.Errorf("%w: pairs[%d] (id %d) uses port %q", ErrUnknownPort, i, p.ID, missing))
			continue
		}
		r := Rule{ID: p.ID, VLAN: p.VLAN, DropPPM: p.DropPPM}
		r.Dir[0] = direction(p.Host, p.GPU, hp, gp, udpPort)
		r.Dir[1] = direction(p.GPU, p.Host, gp, hp, udpPort)
		rules = append(rules, r)
	}
	return rules, skipped, nil
}

func direction(from, to table.Endpoint, in, out Port, udpPort uint16) Direction {
	d := Direction{InPort: in.Index, OutPort: out.Index, DstUDPPort: to.UDPPort, SrcUDPPort: from.UDPPort}
	copy(d.SrcMAC[:], from.MAC)
	copy(d.DstMAC[:], to.MAC)
	copy(d.PortMAC[:], out.MAC)
	if d.DstUDPPort == 0 {
		d.DstUDPPort = udpPort
	}
	if d.SrcUDPPort == 0 {
		d.SrcUDPPort = udpPort
	}
	if from.IP.Is4() {
		d.SrcIP = from.IP.As4()
	}
	if out.IP.Is4() {
		d.NewSrcIP = out.IP.As4()
	}
	if to.IP.Is4() {
		d.NewDstIP = to.IP.As4()
	}
	return d
}
