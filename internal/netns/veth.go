package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// VethEnd is how one end of a veth pair should be made.
type VethEnd struct {
	Name string           // at most 15 bytes
	MAC  net.HardwareAddr // nil: the kernel picks one
	Addr netip.Prefix     // an address with its prefix, e.g. 10.0.0.1/24; zero: none
}

// Iface is an interface as it was made: name, index and MAC in its
// namespace.
type Iface struct {
	Name  string
	Index int
	MAC   net.HardwareAddr
}

// AddVeth creates a veth pair with local in ns and peer in peerNS (nil:
// ns too), both MTU mtu (0: the kernel's default), addressed as given and
// up, and returns both ends. The pair belongs to ns: ns.Close deletes it.
// On error nothing of it is left.
func (ns *NS) AddVeth(local VethEnd, peerNS *NS, peer VethEnd, mtu int) (Iface, Iface, error) {
	if peerNS == nil {
		peerNS = ns
	}
	for _, e := range []VethEnd{local, peer} {
		if e.Name == "" || len(e.Name) > 15 {
			return Iface{}, Iface{}, fmt.Errorf("netns: veth name %q: want 1 to 15 bytes", e.Name)
		}
		if e.MAC != nil && len(e.MAC) != 6 {
			return Iface{}, Iface{}, fmt.Errorf("netns: veth %s: MAC %v is not 6 bytes", e.Name, e.MAC)
		}
	}
	if mtu < 0 {
		return Iface{}, Iface{}, fmt.Errorf("netns: veth %s: MTU %d", local.Name, mtu)
	}
	ns.mu.Lock()
	closed := ns.closed
	ns.mu.Unlock()
	if closed || peerNS.isClosed() {
		return Iface{}, Iface{}, fmt.Errorf("%w: adding veth %s/%s", ErrClosed, local.Name, peer.Name)
	}
	la := netlink.NewLinkAttrs()
	la.Name, la.HardwareAddr, la.MTU = local.Name, local.MAC, mtu
	v := &netlink.Veth{LinkAttrs: la, PeerName: peer.Name, PeerHardwareAddr: peer.MAC}
	if peerNS != ns {
		v.PeerNamespace = netlink.NsFd(peerNS.Handle)
	}
	if err := ns.nl.LinkAdd(v); err != nil {
		return Iface{}, Iface{}, fmt.Errorf("netns: adding veth %s (%s) / %s (%s): %w", local.Name, ns.Name, peer.Name, peerNS.Name, err)
	}
	a, err := ns.configure(local)
	var b Iface
	if err == nil {
		b, err = peerNS.configure(peer)
	}
	if err != nil {
		return Iface{}, Iface{}, errors.Join(err, ns.deleteLink(local.Name))
	}
	ns.mu.Lock()
	ns.links = append(ns.links, local.Name)
	ns.mu.Unlock()
	return a, b, nil
}

func (ns *NS) isClosed() bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.closed
}

// configure addresses a link of ns and sets it up.
func (ns *NS) configure(e VethEnd) (Iface, error) {
	l, err := ns.nl.LinkByName(e.Name)
	if err != nil {
		return Iface{}, fmt.Errorf("netns: %s in %s: %w", e.Name, ns.Name, err)
	}
	if e.Addr.IsValid() {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: e.Addr.Addr().AsSlice(), Mask: net.CIDRMask(e.Addr.Bits(), e.Addr.Addr().BitLen())}}
		if err := ns.nl.AddrAdd(l, a); err != nil {
			return Iface{}, fmt.Errorf("netns: address %v on %s in %s: %w", e.Addr, e.Name, ns.Name, err)
		}
	}
	if err := ns.nl.LinkSetUp(l); err != nil {
		return Iface{}, fmt.Errorf("netns: setting %s up in %s: %w", e.Name, ns.Name, err)
	}
	at := l.Attrs()
	return Iface{Name: at.Name, Index: at.Index, MAC: append(net.HardwareAddr(nil), at.HardwareAddr...)}, nil
}
