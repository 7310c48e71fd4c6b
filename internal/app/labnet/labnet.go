// Package labnet builds a three-namespace fabric on one machine: a host
// namespace and a GPU namespace joined only through a third that runs the
// dxpu XDP switch, as `dxpu switch --mode xdp` runs it. Benchmarks and
// demos put the two bridges of a pair in the end namespaces so that their
// frames cross the real switch.
//
//	netns host                 netns sw                               netns gpu
//	eth0 10.78.1.2  <-veth->  s-host 10.78.1.1 [dxpu switch, XDP] s-gpu 10.78.2.1  <-veth->  eth0 10.78.2.2
//	02:78:00:00:00:01         02:78:00:00:01:01      02:78:00:00:01:02                        02:78:00:00:00:02
//
// The switch (package switchd, the same code as the daemon) gets its table
// from a file: every pair of Options.Pairs between the host's and the
// GPU's eth0 at that pair's UDP port. Each end sends to its switch port's
// address on the switch's UDP port (HostSwitch, GPUSwitch); the XDP
// program there redirects the datagram out of the far port, rewritten to
// come from that port's address and go to the far end's address and port.
// The ends' eth0 run an XDP pass program (a veth drops frames redirected
// into it unless its peer runs XDP) and send with TX checksum offload off
// (the switch forwards the bytes; a veth's unfinished checksum would
// arrive unfinished). netns sw does not route: the switch is the only way
// across. Native XDP on a veth needs an MTU of at most 3506, so the veths
// carry 1500-byte packets and a bridge's MTU is at most MaxMTU.
package labnet

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

	"github.com/cilium/ebpf/link"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/app/switchd"
	"github.com/dxpu/dxpu/internal/netns"
	"github.com/dxpu/dxpu/xdp"
)

// ErrNamespaces is returned when the fabric cannot be built: not root, or
// the namespaces or the XDP switch could not be set up.
var ErrNamespaces = errors.New("labnet: namespace fabric")

const (
	// VethMTU is the veths' MTU (native XDP on a veth needs <= 3506).
	VethMTU = 1500
	// MaxMTU is the largest bridge MTU (from the dxpu header on) a
	// 1500-byte packet carries: 1500 - 20 (IPv4) - 8 (UDP).
	MaxMTU = VethMTU - 28
)

var (
	hostAddr   = netip.MustParseAddr("10.78.1.2")
	swHostAddr = netip.MustParseAddr("10.78.1.1")
	gpuAddr    = netip.MustParseAddr("10.78.2.2")
	swGPUAddr  = netip.MustParseAddr("10.78.2.1")
	hostMAC    = net.HardwareAddr{0x02, 0x78, 0, 0, 0, 0x01}
	gpuMAC     = net.HardwareAddr{0x02, 0x78, 0, 0, 0, 0x02}
	swHostMAC  = net.HardwareAddr{0x02, 0x78, 0, 0, 0x01, 0x01}
	swGPUMAC   = net.HardwareAddr{0x02, 0x78, 0, 0, 0x01, 0x02}
)

// Pair is a pair the switch forwards: frames of pair ID between the two
// ends' UDPPort.
type Pair struct {
	ID      uint32
	UDPPort uint16
}

// Options configure Start.
type Options struct {
	// Pairs the switch's table holds (at least one; IDs and ports unique).
	Pairs []Pair
	// Log receives the switch's log (default: discarded).
	Log *slog.Logger
}

// Net is a running fabric.
type Net struct {
	// Host and GPU are the end namespaces: open a bridge's socket inside
	// one with its Do.
	Host, GPU *netns.NS
	sw        *netns.NS
	pairs     []Pair
	log       *slog.Logger
	dir       string      // holds the switch's table file
	pass      []link.Link // pass programs on the ends' eth0
	stop      context.CancelFunc
	done      chan error // the switch's Run result
	metrics   string     // the switch's /metrics address, in netns sw
}

// RequireRoot returns the error the fabric gives without root.
func RequireRoot(euid int) error {
	if euid != 0 {
		return fmt.Errorf("%w needs root (network namespaces and the XDP switch; euid %d)", ErrNamespaces, euid)
	}
	return nil
}

// Start builds the fabric and starts the switch; Close undoes everything,
// and so does a failure part way.
func Start(ctx context.Context, o Options) (*Net, error) {
	if err := RequireRoot(os.Geteuid()); err != nil {
		return nil, err
	}
	if len(o.Pairs) == 0 {
		return nil, fmt.Errorf("%w: no pairs to forward", ErrNamespaces)
	}
	ids, ports := map[uint32]bool{}, map[uint16]bool{}
	for _, p := range o.Pairs {
		if ids[p.ID] || ports[p.UDPPort] || p.UDPPort == 0 || p.UDPPort == switching.DefaultUDPPort {
			return nil, fmt.Errorf("%w: pair %d at UDP port %d: IDs and ports must be unique, ports nonzero and not the switch's %d",
				ErrNamespaces, p.ID, p.UDPPort, switching.DefaultUDPPort)
		}
		ids[p.ID], ports[p.UDPPort] = true, true
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	n := &Net{pairs: append([]Pair(nil), o.Pairs...), log: o.Log}
	if err := n.build(ctx); err != nil {
		n.Close()
		return nil, fmt.Errorf("%w: %w", ErrNamespaces, err)
	}
	return n, nil
}

// HostAddr is the host end's address at port; HostSwitch is where the
// host end sends (its switch port).
func (n *Net) HostAddr(port uint16) netip.AddrPort { return netip.AddrPortFrom(hostAddr, port) }
func (n *Net) HostSwitch() netip.AddrPort {
	return netip.AddrPortFrom(swHostAddr, switching.DefaultUDPPort)
}

// GPUAddr is the GPU end's address at port; GPUSwitch is where the GPU
// end sends.
func (n *Net) GPUAddr(port uint16) netip.AddrPort { return netip.AddrPortFrom(gpuAddr, port) }
func (n *Net) GPUSwitch() netip.AddrPort {
	return netip.AddrPortFrom(swGPUAddr, switching.DefaultUDPPort)
}

func (n *Net) build(ctx context.Context) error {
	var err error
	for _, s := range []struct {
		ns   **netns.NS
		name string
	}{{&n.Host, "host"}, {&n.sw, "sw"}, {&n.GPU, "gpu"}} {
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
		{n.Host, "s-host", swHostMAC, hostMAC, swHostAddr, hostAddr},
		{n.GPU, "s-gpu", swGPUMAC, gpuMAC, swGPUAddr, gpuAddr},
	} {
		_, eth0, err := n.sw.AddVeth(netns.VethEnd{Name: end.port, MAC: end.portMAC, Addr: netip.PrefixFrom(end.portAddr, 24)},
			end.ns, netns.VethEnd{Name: "eth0", MAC: end.mac, Addr: netip.PrefixFrom(end.addr, 24)}, VethMTU)
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
	if n.dir, err = os.MkdirTemp("", "dxpu-labnet-"); err != nil {
		return err
	}
	tablePath := filepath.Join(n.dir, "table.json")
	b, err := json.Marshal(n.table())
	if err == nil {
		err = os.WriteFile(tablePath, b, 0o600)
	}
	if err != nil {
		return fmt.Errorf("switch table: %w", err)
	}
	return n.startSwitch(ctx, tablePath)
}

// table is the switch's table: each pair between the ends' eth0.
func (n *Net) table() *table.Table {
	t := &table.Table{Version: 1}
	for _, p := range n.pairs {
		t.Pairs = append(t.Pairs, table.Pair{ID: p.ID,
			Host: table.Endpoint{Port: "s-host", MAC: hostMAC, IP: hostAddr, UDPPort: p.UDPPort},
			GPU:  table.Endpoint{Port: "s-gpu", MAC: gpuMAC, IP: gpuAddr, UDPPort: p.UDPPort}})
	}
	return t
}

// startSwitch runs the switch in netns sw until Close and waits until its
// table is in force (its metrics say version 1).
func (n *Net) startSwitch(ctx context.Context, tablePath string) error {
	sctx, stop := context.WithCancel(context.Background())
	n.stop, n.done = stop, make(chan error, 1)
	ready := make(chan net.Addr, 1)
	o := switchd.Options{Mode: "xdp", Ports: []string{"s-host", "s-gpu"}, TableFile: tablePath,
		Metrics: "127.0.0.1:0", UDPPort: switching.DefaultUDPPort, MaxPairs: xdp.DefaultMaxPairs, SlowPath: "packet",
		Log: n.log, Ready: func(a net.Addr) { ready <- a }}
	go func() {
		// Run's sockets and XDP attachments are made on this thread, in
		// netns sw; its own goroutines only use them.
		n.done <- n.sw.Do(func() error { return switchd.Run(sctx, o) })
	}()
	select {
	case a := <-ready:
		n.metrics = a.String()
	case err := <-n.done:
		n.done <- err // for Close
		return fmt.Errorf("XDP switch: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	m, err := n.Metrics(ctx)
	if err != nil {
		return err
	}
	if v := m["dxpu_switch_table_version"]; v != 1 {
		return fmt.Errorf("XDP switch: table version %v in force, want 1 (see the switch's log)", v)
	}
	return nil
}

// Close stops the switch and removes the namespaces, links, programs and
// files; safe on a half-built fabric and more than once.
func (n *Net) Close() {
	if n.stop != nil {
		n.stop()
		if err := <-n.done; err != nil {
			n.log.Warn("labnet: XDP switch", "err", err)
		}
		n.stop = nil
	}
	for _, l := range n.pass {
		l.Close()
	}
	n.pass = nil
	// sw owns the veths: closing it first deletes them at once.
	for _, ns := range []**netns.NS{&n.sw, &n.Host, &n.GPU} {
		if *ns != nil {
			if err := (*ns).Close(); err != nil {
				n.log.Warn("labnet: removing namespaces", "err", err)
			}
			*ns = nil
		}
	}
	if n.dir != "" {
		os.RemoveAll(n.dir)
		n.dir = ""
	}
}
