package e2ebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/app/switchd"
	"github.com/dxpu/dxpu/internal/netns"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

// ErrNamespaces is returned when namespace mode cannot run: not root, or
// the namespaces or the XDP switch could not be set up.
var ErrNamespaces = errors.New("e2ebench: namespace mode")

// The namespace network:
//
//	netns host                 netns sw                               netns gpu
//	eth0 10.78.1.2  <-veth->  s-host 10.78.1.1 [dxpu switch, XDP] s-gpu 10.78.2.1  <-veth->  eth0 10.78.2.2
//	02:78:00:00:00:01         02:78:00:00:01:01      02:78:00:00:01:02                        02:78:00:00:00:02
//
// The switch is `dxpu switch --mode xdp --port s-host --port s-gpu` run in
// netns sw (package switchd, the same code), with its table from a file:
// pair 1 (the bridges, UDP port 4791 at both ends) and pair 2 (the echo,
// port 4792). Each end sends to its switch port's address on port 8855;
// the XDP program there redirects the datagram out of the far port,
// rewritten to come from that port's address (10.78.N.1:8855) and go to
// the far end's address and port. The ends' eth0 run an XDP pass program
// (a veth drops frames redirected into it unless its peer runs XDP) and
// send with TX checksum offload off (the switch forwards the bytes; a
// veth's unfinished checksum would arrive unfinished). netns sw does not
// route: the switch is the only way across.
//
// The echo takes exactly the bridge frames' path: each echo datagram is a
// dxpu frame of pair 2 (a 40-byte dxpu header of type ACK, which the XDP
// program forwards like any frame but CONTROL, then the sequence number,
// 64 bytes in all), from host 10.78.1.2:4792 to the switch, out to gpu
// 10.78.2.2:4792, whose echo server sends it back the same way: the same
// veths, ports, program and kind of rule as pair 1, the same UDP socket
// path in both kernels.
const (
	nsBridgePort = 4791
	nsEchoPort   = 4792
	// nsVethMTU: native XDP on a veth needs an MTU of at most 3506.
	nsVethMTU = 1500
	// nsMaxMTU is the largest bridge MTU (from the dxpu header on) a
	// 1500-byte packet carries: 1500 - 20 (IPv4) - 8 (UDP).
	nsMaxMTU = nsVethMTU - 28
)

var (
	nsHostAddr   = netip.MustParseAddr("10.78.1.2")
	nsSwHostAddr = netip.MustParseAddr("10.78.1.1")
	nsGPUAddr    = netip.MustParseAddr("10.78.2.2")
	nsSwGPUAddr  = netip.MustParseAddr("10.78.2.1")
	nsHostMAC    = net.HardwareAddr{0x02, 0x78, 0, 0, 0, 0x01}
	nsGPUMAC     = net.HardwareAddr{0x02, 0x78, 0, 0, 0, 0x02}
	nsSwHostMAC  = net.HardwareAddr{0x02, 0x78, 0, 0, 0x01, 0x01}
	nsSwGPUMAC   = net.HardwareAddr{0x02, 0x78, 0, 0, 0x01, 0x02}
)

// namespaces is the namespace network, switch running.
type namespaces struct {
	host, sw, gpu *netns.NS
	log           *slog.Logger
	dir           string      // holds the switch's table file
	pass          []link.Link // pass programs on the ends' eth0
	stop          context.CancelFunc
	switchDone    chan error // the switch's Run result
	metrics       string     // the switch's /metrics address, in netns sw
}

// requireRoot returns the error namespace mode gives without root.
func requireRoot(euid int) error {
	if euid != 0 {
		return fmt.Errorf("%w needs root (network namespaces and the XDP switch; euid %d): run with --loopback (Options.Loopback) instead", ErrNamespaces, euid)
	}
	return nil
}

// newNamespaces builds the namespace network for bridges of MTU mtu and
// starts the switch; close undoes everything, and so does a failure part
// way.
func newNamespaces(ctx context.Context, mtu int, log *slog.Logger) (network, error) {
	if err := requireRoot(os.Geteuid()); err != nil {
		return nil, err
	}
	if mtu > nsMaxMTU {
		return nil, fmt.Errorf("%w: bridge MTU %d: the veths carry %d-byte packets, so at most %d", ErrNamespaces, mtu, nsVethMTU, nsMaxMTU)
	}
	n := &namespaces{log: log}
	if err := n.build(ctx); err != nil {
		n.close()
		return nil, fmt.Errorf("%w: %w", ErrNamespaces, err)
	}
	return n, nil
}

func (n *namespaces) build(ctx context.Context) error {
	var err error
	for _, s := range []struct {
		ns   **netns.NS
		name string
	}{{&n.host, "host"}, {&n.sw, "sw"}, {&n.gpu, "gpu"}} {
		if *s.ns, err = netns.New(s.name); err != nil {
			return err
		}
	}
	for _, end := range []struct {
		ns             *netns.NS
		port           string
		portMAC, mac   net.HardwareAddr
		portAddr, addr netip.Addr
	}{
		{n.host, "s-host", nsSwHostMAC, nsHostMAC, nsSwHostAddr, nsHostAddr},
		{n.gpu, "s-gpu", nsSwGPUMAC, nsGPUMAC, nsSwGPUAddr, nsGPUAddr},
	} {
		_, eth0, err := n.sw.AddVeth(netns.VethEnd{Name: end.port, MAC: end.portMAC, Addr: netip.PrefixFrom(end.portAddr, 24)},
			end.ns, netns.VethEnd{Name: "eth0", MAC: end.mac, Addr: netip.PrefixFrom(end.addr, 24)}, nsVethMTU)
		if err != nil {
			return err
		}
		if err := end.ns.SetTXChecksum("eth0", false); err != nil {
			return err
		}
		if err := end.ns.Do(func() error {
			l, _, err := xdp.AttachPass(eth0.Index)
			if err != nil {
				return fmt.Errorf("XDP pass program on eth0 in %s: %w", end.ns.Name, err)
			}
			n.pass = append(n.pass, l)
			return nil
		}); err != nil {
			return err
		}
	}
	if n.dir, err = os.MkdirTemp("", "dxpu-e2e-"); err != nil {
		return err
	}
	tablePath := filepath.Join(n.dir, "table.json")
	b, err := json.Marshal(nsTable())
	if err == nil {
		err = os.WriteFile(tablePath, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("switch table: %w", err)
	}
	return n.startSwitch(ctx, tablePath)
}

// nsTable is the switch's table: the bridge pair and the echo pair, each
// between the host's and the GPU's eth0.
func nsTable() *table.Table {
	pair := func(id uint32, port uint16) table.Pair {
		return table.Pair{ID: id,
			Host: table.Endpoint{Port: "s-host", MAC: nsHostMAC, IP: nsHostAddr, UDPPort: port},
			GPU:  table.Endpoint{Port: "s-gpu", MAC: nsGPUMAC, IP: nsGPUAddr, UDPPort: port}}
	}
	return &table.Table{Version: 1, Pairs: []table.Pair{pair(pairID, nsBridgePort), pair(echoPair, nsEchoPort)}}
}

// startSwitch runs the switch in netns sw until close and waits until its
// table is in force (its metrics say version 1).
func (n *namespaces) startSwitch(ctx context.Context, tablePath string) error {
	sctx, stop := context.WithCancel(context.Background())
	n.stop, n.switchDone = stop, make(chan error, 1)
	ready := make(chan net.Addr, 1)
	o := switchd.Options{Mode: "xdp", Ports: []string{"s-host", "s-gpu"}, TableFile: tablePath,
		Metrics: "127.0.0.1:0", UDPPort: switching.DefaultUDPPort, MaxPairs: xdp.DefaultMaxPairs, SlowPath: "packet",
		Log: n.log, Ready: func(a net.Addr) { ready <- a }}
	go func() {
		// Run's sockets and XDP attachments are made on this thread, in
		// netns sw; its own goroutines only use them.
		n.switchDone <- n.sw.Do(func() error { return switchd.Run(sctx, o) })
	}()
	select {
	case a := <-ready:
		n.metrics = a.String()
	case err := <-n.switchDone:
		n.switchDone <- err // for close
		return fmt.Errorf("XDP switch: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	m, err := n.switchMetrics(ctx)
	if err != nil {
		return err
	}
	if v := m["dxpu_switch_table_version"]; v != 1 {
		return fmt.Errorf("XDP switch: table version %v in force, want 1 (see the switch's log)", v)
	}
	return nil
}

func (n *namespaces) name() string { return "netns" }

// bridges opens the bridge pair's sockets: the host's in netns host, the
// GPU's in netns gpu, each sending to its switch port.
func (n *namespaces) bridges() (driver.Transport, driver.Transport, error) {
	var hc, gc *udp.Conn
	err := n.host.Do(func() (err error) {
		hc, err = udp.Listen(netip.AddrPortFrom(nsHostAddr, nsBridgePort), netip.AddrPortFrom(nsSwHostAddr, switching.DefaultUDPPort))
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("e2ebench: host-side socket: %w", err)
	}
	err = n.gpu.Do(func() (err error) {
		gc, err = udp.Listen(netip.AddrPortFrom(nsGPUAddr, nsBridgePort), netip.AddrPortFrom(nsSwGPUAddr, switching.DefaultUDPPort))
		return err
	})
	if err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("e2ebench: GPU-side socket: %w", err)
	}
	return hc, gc, nil
}

// echo times n echoes of pair-2 dxpu frames from netns host through the
// switch to an echo server in netns gpu and back.
func (n *namespaces) echo(ctx context.Context, count int) ([]time.Duration, error) {
	var sc, cc *net.UDPConn
	err := n.gpu.Do(func() (err error) {
		sc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(nsGPUAddr, nsEchoPort)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("e2ebench: echo server: %w", err)
	}
	defer sc.Close()
	err = n.host.Do(func() (err error) {
		cc, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(nsHostAddr, nsEchoPort)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("e2ebench: echo client: %w", err)
	}
	defer cc.Close()
	go echoServer(sc)
	h := make(encap.Header, encap.HeaderLen)
	h.SetVersionFlags(encap.Version, 0)
	h.SetType(encap.MsgAck)
	h.SetPairID(echoPair)
	return echoRTTs(ctx, cc, netip.AddrPortFrom(nsSwHostAddr, switching.DefaultUDPPort), count, 64, h)
}

// close logs what the switch forwarded, stops it, and removes the
// namespaces, links, programs and files; safe on a half-built network.
func (n *namespaces) close() {
	if n.metrics != "" {
		if c, err := n.pairCounters(context.Background()); err != nil {
			n.log.Warn("e2ebench: switch counters", "err", err)
		} else {
			for _, id := range []uint32{pairID, echoPair} {
				p := c[id]
				n.log.Info("e2ebench: switch forwarded", "pair", id, "to_gpu_frames", p.toGPU.frames, "to_gpu_bytes", p.toGPU.bytes,
					"to_host_frames", p.toHost.frames, "to_host_bytes", p.toHost.bytes)
			}
		}
	}
	if n.stop != nil {
		n.stop()
		if err := <-n.switchDone; err != nil {
			n.log.Warn("e2ebench: XDP switch", "err", err)
		}
	}
	for _, l := range n.pass {
		l.Close()
	}
	// sw owns the veths: closing it first deletes them at once.
	for _, ns := range []*netns.NS{n.sw, n.host, n.gpu} {
		if ns != nil {
			if err := ns.Close(); err != nil {
				n.log.Warn("e2ebench: removing namespaces", "err", err)
			}
		}
	}
	if n.dir != "" {
		os.RemoveAll(n.dir)
	}
}
