package xdptest

import (
	"fmt"
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/dxpu/dxpu/fabric/table"
)

// Topology is the end-to-end test network:
//
//	netns Host            netns Switch                 netns GPU
//	HostIf  <--veth-->  SwitchHost  [switch]  SwitchGPU  <--veth-->  GPUIf
//
// The host bridge runs on HostIf, the GPU bridge on GPUIf; the switch (XDP
// or a userspace driver) forwards between SwitchHost and SwitchGPU. All
// links are up with MTU 1500 (native XDP on veth needs <= 3506) and fixed
// MACs, so captures are reproducible.
type Topology struct {
	Host, Switch, GPU     NS
	HostIf, GPUIf         Iface // bridge ends
	SwitchHost, SwitchGPU Iface // switch ports
}

// Fixed addresses of the topology.
var (
	HostMAC       = net.HardwareAddr{0x02, 0xd0, 0, 0, 0, 0x01}
	GPUMAC        = net.HardwareAddr{0x02, 0xd0, 0, 0, 0, 0x02}
	SwitchHostMAC = net.HardwareAddr{0x02, 0x5e, 0, 0, 0, 0x01}
	SwitchGPUMAC  = net.HardwareAddr{0x02, 0x5e, 0, 0, 0, 0x02}
)

// NewTopology builds the three namespaces and their veths; everything is
// removed when the test ends.
func NewTopology(tb testing.TB) *Topology {
	tb.Helper()
	t := &Topology{
		Host:   NewNS(tb, "host"),
		Switch: NewNS(tb, "switch"),
		GPU:    NewNS(tb, "gpu"),
	}
	t.SwitchHost = t.veth(tb, "swhost", SwitchHostMAC, t.Host, "dxhost", HostMAC, &t.HostIf)
	t.SwitchGPU = t.veth(tb, "swgpu", SwitchGPUMAC, t.GPU, "dxgpu", GPUMAC, &t.GPUIf)
	return t
}

// veth creates name (in the switch namespace) with its peer (in peerNS)
// and returns the switch end; the peer end goes to *peer.
func (t *Topology) veth(tb testing.TB, name string, mac net.HardwareAddr, peerNS NS, peerName string, peerMAC net.HardwareAddr, peer *Iface) Iface {
	tb.Helper()
	var sw Iface
	err := t.Switch.Do(func() error {
		la := netlink.NewLinkAttrs()
		la.Name, la.HardwareAddr, la.MTU = name, mac, 1500
		v := &netlink.Veth{LinkAttrs: la, PeerName: peerName, PeerHardwareAddr: peerMAC, PeerNamespace: netlink.NsFd(peerNS.Handle)}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("adding veth %s/%s: %w", name, peerName, err)
		}
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
		sw = Iface{Name: name, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr}
		return nil
	})
	if err == nil {
		err = peerNS.Do(func() error {
			l, err := netlink.LinkByName(peerName)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			*peer = Iface{Name: peerName, Index: l.Attrs().Index, MAC: l.Attrs().HardwareAddr}
			return nil
		})
	}
	if err != nil {
		tb.Fatalf("xdptest: %v", err)
	}
	return sw
}

// Table returns a one-pair table connecting the host bridge to the GPU
// bridge through the switch ports.
func (t *Topology) Table(pairID uint32) *table.Table {
	return &table.Table{Version: 1, Pairs: []table.Pair{{
		ID:   pairID,
		Host: table.Endpoint{Port: t.SwitchHost.Name, MAC: t.HostIf.MAC},
		GPU:  table.Endpoint{Port: t.SwitchGPU.Name, MAC: t.GPUIf.MAC},
	}}}
}
