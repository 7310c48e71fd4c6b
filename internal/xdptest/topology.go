package xdptest

import (
	"net"
	"testing"

	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/netns"
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

// veth creates name (in the switch namespace) with its peer (in peerNS),
// MTU 1500, and returns the switch end; the peer end goes to *peer.
func (t *Topology) veth(tb testing.TB, name string, mac net.HardwareAddr, peerNS NS, peerName string, peerMAC net.HardwareAddr, peer *Iface) Iface {
	tb.Helper()
	sw, p, err := t.Switch.AddVeth(netns.VethEnd{Name: name, MAC: mac}, peerNS.NS, netns.VethEnd{Name: peerName, MAC: peerMAC}, 1500)
	if err != nil {
		tb.Fatalf("xdptest: %v", err)
	}
	*peer = p
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
