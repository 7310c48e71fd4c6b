package vm

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/xdptest"
)

// switchNet is xdptest's three namespaces with the XDP switch between the
// host and GPU bridges, the pair's frames IPv4/UDP:
//
//	netns host 10.99.0.1/24             netns switch                 netns gpu 10.99.0.2/24
//	host bridge's UDP socket -- dxhost <-veth-> swhost [XDP] swgpu <-veth-> dxgpu -- GPU bridge's UDP socket
//
// QEMU, the host bridge's goroutines and the emulated GPU stay in the root
// namespace; only the two sockets are opened inside theirs (a socket keeps
// the namespace it was made in). Each bridge sends to the far bridge's
// address on UDP port 8855 through a permanent neighbour entry naming its
// switch port's MAC, so no ARP is needed: the switch ports have no
// addresses. The XDP program takes the datagram, checks the pair's port,
// MAC and source address, rewrites the destination port to the far
// bridge's socket, the source port to 8855, and the MACs, and redirects it
// out of the other port; the far bridge thus hears its peer at
// address:8855. CONTROL messages (handshake, keepalives) take xdptest's Go
// slow path. The bridge ends send with TX checksum offload off: the switch
// forwards raw bytes, and a veth's unfinished UDP checksum would arrive
// unfinished and be dropped.
type switchNet struct {
	topo *xdptest.Topology
	sw   *xdptest.XDPSwitch

	mu  sync.Mutex
	tbl table.Table
}

var (
	switchNetHostIP = netip.MustParseAddr("10.99.0.1")
	switchNetGPUIP  = netip.MustParseAddr("10.99.0.2")
)

// newSwitchNet builds the namespaces and starts the switch with an empty
// table; everything goes when the test ends.
func newSwitchNet(t *testing.T) *switchNet {
	t.Helper()
	privtest.BPF(t)
	privtest.NetNS(t)
	n := &switchNet{topo: xdptest.NewTopology(t), tbl: table.Table{Version: 1}}
	for _, end := range []struct {
		ns          xdptest.NS
		ifc         xdptest.Iface
		self, far   netip.Addr
		switchPort  net.HardwareAddr
		description string
	}{
		{n.topo.Host, n.topo.HostIf, switchNetHostIP, switchNetGPUIP, n.topo.SwitchHost.MAC, "host"},
		{n.topo.GPU, n.topo.GPUIf, switchNetGPUIP, switchNetHostIP, n.topo.SwitchGPU.MAC, "GPU"},
	} {
		err := end.ns.Do(func() error { return bridgeEnd(end.ifc, end.self, end.far, end.switchPort) })
		if err == nil {
			err = end.ns.SetTXChecksum(end.ifc.Name, false)
		}
		if err != nil {
			t.Fatalf("configuring the %s bridge's end %s: %v", end.description, end.ifc.Name, err)
		}
	}
	n.sw = xdptest.RunXDPSwitch(t, n.topo, &n.tbl)
	return n
}

// bridgeEnd gives ifc (in the calling thread's namespace) its address and
// a permanent neighbour entry sending far's datagrams to the switch port.
func bridgeEnd(ifc xdptest.Iface, self, far netip.Addr, switchPort net.HardwareAddr) error {
	l, err := netlink.LinkByIndex(ifc.Index)
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: self.AsSlice(), Mask: net.CIDRMask(24, 32)}}
	if err := netlink.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("address %s: %w", self, err)
	}
	neigh := &netlink.Neigh{LinkIndex: ifc.Index, Family: netlink.FAMILY_V4, State: netlink.NUD_PERMANENT,
		IP: far.AsSlice(), HardwareAddr: switchPort}
	if err := netlink.NeighSet(neigh); err != nil {
		return fmt.Errorf("neighbour %s at %s: %w", far, switchPort, err)
	}
	return nil
}

// Path reports "netns-xdp".
func (n *switchNet) Path() string { return "netns-xdp" }

// Open opens the host bridge's socket in the host namespace and the GPU
// bridge's in the GPU namespace (ports chosen by the kernel) and installs
// the pair between them, loss as the switch's drop_ppm.
func (n *switchNet) Open(pair uint32, loss float64) (host, gpuSide driver.Transport, err error) {
	if err := checkLoss(loss); err != nil {
		return nil, nil, err
	}
	var hc, gc *udp.Conn
	if err := n.topo.Host.Do(func() (err error) {
		hc, err = udp.Listen(netip.AddrPortFrom(switchNetHostIP, 0), netip.AddrPortFrom(switchNetGPUIP, switching.DefaultUDPPort))
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("host bridge socket: %w", err)
	}
	if err := n.topo.GPU.Do(func() (err error) {
		gc, err = udp.Listen(netip.AddrPortFrom(switchNetGPUIP, 0), netip.AddrPortFrom(switchNetHostIP, switching.DefaultUDPPort))
		return err
	}); err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("GPU bridge socket: %w", err)
	}
	if err := n.install(pair, hc.LocalAddr().Port(), gc.LocalAddr().Port(), uint32(loss*1e6+0.5)); err != nil {
		hc.Close()
		gc.Close()
		return nil, nil, err
	}
	return hc, gc, nil
}

// install puts pair (replacing an earlier one) into the switch's table.
func (n *switchNet) install(pair uint32, hostPort, gpuPort uint16, dropPPM uint32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.topo.Table(pair).Pairs[0]
	p.Host.IP, p.Host.UDPPort = switchNetHostIP, hostPort
	p.GPU.IP, p.GPU.UDPPort = switchNetGPUIP, gpuPort
	p.DropPPM = dropPPM
	pairs := []table.Pair{p}
	for _, q := range n.tbl.Pairs {
		if q.ID != pair {
			pairs = append(pairs, q)
		}
	}
	return n.reconcile(pairs)
}

// remove takes pair out of the switch's table: its frames are no longer
// forwarded.
func (n *switchNet) remove(pair uint32) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var pairs []table.Pair
	for _, q := range n.tbl.Pairs {
		if q.ID != pair {
			pairs = append(pairs, q)
		}
	}
	return n.reconcile(pairs)
}

func (n *switchNet) reconcile(pairs []table.Pair) error {
	next := table.Table{Version: n.tbl.Version + 1, Pairs: pairs}
	if err := n.sw.Reconcile(&next); err != nil {
		return fmt.Errorf("switch table version %d: %w", next.Version, err)
	}
	n.tbl = next
	return nil
}

// pairCounters returns the XDP program's counters of pair (zero when it is
// not installed).
func (n *switchNet) pairCounters(t *testing.T, pair uint32) switching.Counters {
	t.Helper()
	var c switching.Counters
	if err := n.sw.PairCounters(func(id uint32, pc switching.Counters) {
		if id == pair {
			c = pc
		}
	}); err != nil {
		t.Fatalf("reading the XDP pair counters: %v", err)
	}
	return c
}

// portCounters returns the XDP program's counters of a switch port.
func (n *switchNet) portCounters(t *testing.T, port string) switching.Counters {
	t.Helper()
	var c switching.Counters
	if err := n.sw.PortCounters(func(p string, pc switching.Counters) {
		if p == port {
			c = pc
		}
	}); err != nil {
		t.Fatalf("reading the XDP port counters: %v", err)
	}
	return c
}

// slowControl returns how many CONTROL messages of pair the slow path
// forwarded each way.
func (n *switchNet) slowControl(t *testing.T, pair uint32) (toGPU, toHost uint64) {
	t.Helper()
	if err := n.sw.Slow.PairCounters(func(id uint32, c switching.Counters) {
		if id == pair {
			toGPU, toHost = c.Packets[switching.ReasonToGPU], c.Packets[switching.ReasonToHost]
		}
	}); err != nil {
		t.Fatalf("reading the slow path's pair counters: %v", err)
	}
	return toGPU, toHost
}
