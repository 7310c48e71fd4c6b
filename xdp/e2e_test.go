package xdp_test

import (
	"bytes"
	"github.com/dxpu/dxpu/internal/switchtest"
	"net"
	"net/netip"
	"testing"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

const (
	e2ePair   = 0x000a01
	e2eOther  = 0x000b02 // both endpoints behind the GPU port
	recvLimit = 3 * time.Second
)

// xdpTopology is the three-namespace network with the XDP switch attached
// to both switch ports and pass programs on the bridge ends.
type xdpTopology struct {
	*xdptest.Topology
	sw    *xdp.Switch
	ports map[string]switching.Port
	tbl   *table.Table
}

func newXDPTopology(t *testing.T) *xdpTopology {
	t.Helper()
	privtest.BPF(t)
	privtest.NetNS(t)
	topo := xdptest.NewTopology(t)
	tbl := topo.Table(e2ePair)
	tbl.Pairs = append(tbl.Pairs, table.Pair{ID: e2eOther,
		Host: table.Endpoint{Port: topo.SwitchGPU.Name, MAC: net.HardwareAddr{2, 0xd0, 0, 0, 0, 0x0b}},
		GPU:  table.Endpoint{Port: topo.SwitchGPU.Name, MAC: net.HardwareAddr{2, 0xd0, 0, 0, 0, 0x0c}}})
	sw := xdptest.RunXDPFastPath(t, topo, tbl)
	return &xdpTopology{Topology: topo, tbl: tbl, ports: topo.Ports(), sw: sw}
}

func dxpuFrame(t *testing.T, src, dst net.HardwareAddr, pair uint32, seq uint32) []byte {
	t.Helper()
	tlp := make([]byte, 16+64) // 4-DW memory write with 64 bytes of data
	tlp[0], tlp[3] = 0x60, 16
	for i := 16; i < len(tlp); i++ {
		tlp[i] = byte(seq) + byte(i)
	}
	b, err := encap.AppendDxpuEth(nil, &encap.L2{Src: [6]byte(src), Dst: [6]byte(dst)}, &encap.Fields{PairID: pair, Seq: seq}, [][]byte{tlp})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func seqOf(b []byte) uint32 { return encap.Header(b[14:]).Seq() }

// TestEndToEndXDPVLAN gives the pair VLAN 300: untagged frames from the
// bridges leave the switch tagged.
func TestEndToEndXDPVLAN(t *testing.T) {
	x := newXDPTopology(t)
	x.tbl.Pairs[0].VLAN = 300
	if err := x.Reconcile(x.sw, x.tbl); err != nil {
		t.Fatal(err)
	}
	hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
	gpuConn := xdptest.OpenPacket(t, x.GPU, x.GPUIf)
	if err := hostConn.Send(dxpuFrame(t, x.HostIf.MAC, x.SwitchHost.MAC, e2ePair, 1)); err != nil {
		t.Fatal(err)
	}
	got, err := gpuConn.RecvMatching(recvLimit, xdptest.IsDXPU)
	if err != nil {
		t.Fatal(err)
	}
	if got[12] != 0x81 || got[13] != 0 || (uint16(got[14])<<8|uint16(got[15]))&0xfff != 300 {
		t.Fatalf("GPU side got % x, want an 802.1Q tag with VLAN 300", got[:18])
	}
}

// TestEndToEndXDP sends frames from the host bridge's namespace through the
// switch namespace's XDP program to the GPU bridge's namespace and back,
// and checks every byte against the Go path's rewrite.
func TestEndToEndXDP(t *testing.T) {
	x := newXDPTopology(t)
	hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
	gpuConn := xdptest.OpenPacket(t, x.GPU, x.GPUIf)
	fwd := switching.NewForwarder(0)
	rules, _, err := switching.Compile(x.tbl, x.ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	fwd.Update(rules)

	const n = 32
	for i := uint32(0); i < n; i++ {
		for _, dir := range []struct {
			name     string
			from, to *xdptest.Conn
			src, dst net.HardwareAddr
			in       int
		}{
			{"host->gpu", hostConn, gpuConn, x.HostIf.MAC, x.SwitchHost.MAC, x.SwitchHost.Index},
			{"gpu->host", gpuConn, hostConn, x.GPUIf.MAC, x.SwitchGPU.MAC, x.SwitchGPU.Index},
		} {
			frame := dxpuFrame(t, dir.src, dir.dst, e2ePair, i)
			if i%2 == 1 { // every other frame arrives tagged (VLAN 5): the pair pops it
				frame = append(append(append([]byte(nil), frame[:12]...), 0x81, 0x00, 0x60, 0x05), frame[12:]...)
			}
			if err := dir.from.Send(frame); err != nil {
				t.Fatalf("%s: send: %v", dir.name, err)
			}
			got, err := dir.to.RecvMatching(recvLimit, xdptest.IsDXPU)
			if err != nil {
				t.Fatalf("%s frame %d: %v", dir.name, i, err)
			}
			buf := append(make([]byte, switching.Headroom), frame...)
			res := fwd.Forward(buf, switching.Headroom, uint32(dir.in))
			if res.Verdict != switching.VerdictForward || !bytes.Equal(got, buf[res.Off:]) {
				t.Fatalf("%s frame %d: received\n% x\nGo path (%v) gives\n% x", dir.name, i, got, res.Verdict, buf[res.Off:])
			}
		}
	}
	var fwdGPU, fwdHost uint64
	x.sw.PairCounters(func(id uint32, c switching.Counters) {
		if id == e2ePair {
			fwdGPU, fwdHost = c.Packets[switching.ReasonToGPU], c.Packets[switching.ReasonToHost]
		}
	})
	if fwdGPU != n || fwdHost != n {
		t.Fatalf("pair counters: %d to GPU, %d to host; want %d each", fwdGPU, fwdHost, n)
	}
}

// TestSpoofingDropped sends frames carrying another pair's ID from the host
// port: none reaches the GPU side, and each is counted as spoofed on that
// pair and on the ingress port.
func TestSpoofingDropped(t *testing.T) {
	x := newXDPTopology(t)
	hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
	gpuConn := xdptest.OpenPacket(t, x.GPU, x.GPUIf)
	const n = 10
	for i := uint32(0); i < n; i++ {
		// The other pair's ID, from the host (wrong port), and from the
		// other pair's own host MAC (right MAC, wrong port).
		if err := hostConn.Send(dxpuFrame(t, x.HostIf.MAC, x.SwitchHost.MAC, e2eOther, i)); err != nil {
			t.Fatal(err)
		}
		if err := hostConn.Send(dxpuFrame(t, x.tbl.Pairs[1].Host.MAC, x.SwitchHost.MAC, e2eOther, i)); err != nil {
			t.Fatal(err)
		}
	}
	// A legitimate frame sent after them must be the first to arrive.
	marker := dxpuFrame(t, x.HostIf.MAC, x.SwitchHost.MAC, e2ePair, 0xfeed)
	if err := hostConn.Send(marker); err != nil {
		t.Fatal(err)
	}
	got, err := gpuConn.RecvMatching(recvLimit, xdptest.IsDXPU)
	if err != nil {
		t.Fatal(err)
	}
	if pid := encap.Header(got[14:]).PairID(); pid != e2ePair || seqOf(got) != 0xfeed {
		t.Fatalf("GPU side received pair %#x seq %#x first; spoofed frames leaked", pid, seqOf(got))
	}
	var spoofed uint64
	x.sw.PairCounters(func(id uint32, c switching.Counters) {
		if id == e2eOther {
			spoofed = c.Packets[switching.ReasonSpoofed]
		}
	})
	var portSpoofed uint64
	x.sw.PortCounters(func(p string, c switching.Counters) {
		if p == x.SwitchHost.Name {
			portSpoofed = c.Packets[switching.ReasonSpoofed]
		}
	})
	if spoofed != 2*n || portSpoofed != 2*n {
		t.Fatalf("spoofed: pair counter %d, port counter %d; want %d", spoofed, portSpoofed, 2*n)
	}
}

// TestReconcileRemovesPair removes the pair while the topology runs: frames
// of a removed pair no longer reach the GPU side (they go to the slow path,
// here the kernel stack, which ignores them).
func TestReconcileRemovesPair(t *testing.T) {
	x := newXDPTopology(t)
	hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
	gpuConn := xdptest.OpenPacket(t, x.GPU, x.GPUIf)
	if err := hostConn.Send(dxpuFrame(t, x.HostIf.MAC, x.SwitchHost.MAC, e2ePair, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := gpuConn.RecvMatching(recvLimit, xdptest.IsDXPU); err != nil {
		t.Fatalf("before removal: %v", err)
	}
	// Version 2: the pair is gone, the other pair moves to the host port.
	t2 := &table.Table{Version: 2, Pairs: []table.Pair{x.tbl.Pairs[1]}}
	t2.Pairs[0].Host.Port = x.SwitchHost.Name
	t2.Pairs[0].Host.MAC = x.HostIf.MAC
	if err := x.Reconcile(x.sw, t2); err != nil {
		t.Fatal(err)
	}
	for i := uint32(0); i < 5; i++ {
		if err := hostConn.Send(dxpuFrame(t, x.HostIf.MAC, x.SwitchHost.MAC, e2ePair, 100+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := hostConn.Send(dxpuFrame(t, x.HostIf.MAC, x.SwitchHost.MAC, e2eOther, 0xfeed)); err != nil {
		t.Fatal(err)
	}
	got, err := gpuConn.RecvMatching(recvLimit, func(b []byte) bool { return xdptest.IsDXPU(b) })
	if err != nil {
		t.Fatal(err)
	}
	if pid := encap.Header(got[14:]).PairID(); pid != e2eOther {
		t.Fatalf("after removal the GPU side got pair %#x first", pid)
	}
	if x.sw.Version() != 2 {
		t.Fatalf("version %d after reconcile, want 2", x.sw.Version())
	}
}

// TestAttachRefusesOccupiedInterface: a second switch cannot attach where
// one runs (and does not slip in beside it in generic mode); after Detach
// it can.
func TestAttachRefusesOccupiedInterface(t *testing.T) {
	x := newXDPTopology(t)
	err := x.Switch.Do(func() error {
		other, err := xdp.Load(xdp.Options{})
		if err != nil {
			return err
		}
		defer other.Close()
		if _, err := other.Attach(x.SwitchHost.Index); err == nil {
			t.Errorf("second program attached to an occupied interface")
		}
		if err := x.sw.Detach(x.SwitchHost.Index); err != nil {
			return err
		}
		if _, err := other.Attach(x.SwitchHost.Index); err != nil {
			t.Errorf("attach after detach: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEndToEndXDPUDP switches dxpu-udp frames through the XDP program on
// the veths (real redirects, not test runs): addresses, ports and both
// checksums rewritten exactly as the Go path does.
func TestEndToEndXDPUDP(t *testing.T) {
	x := newXDPTopology(t)
	ports := x.Ports()
	for name, ip := range map[string]string{x.SwitchHost.Name: "10.9.0.1", x.SwitchGPU.Name: "10.9.1.1"} {
		p := ports[name]
		p.IP = netip.MustParseAddr(ip)
		ports[name] = p
	}
	tbl := x.Table(e2ePair)
	tbl.Version = 2
	tbl.Pairs[0].Host.IP, tbl.Pairs[0].Host.UDPPort = netip.MustParseAddr("10.9.0.2"), 7000
	tbl.Pairs[0].GPU.IP = netip.MustParseAddr("10.9.1.2")
	if err := x.Switch.Do(func() error { _, err := x.sw.Reconcile(tbl, ports); return err }); err != nil {
		t.Fatal(err)
	}
	rules, _, err := switching.Compile(tbl, ports, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := switching.NewForwarder(0)
	ref.Update(rules)
	hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
	gpuConn := xdptest.OpenPacket(t, x.GPU, x.GPUIf)
	for i, dir := range []struct {
		from, to *xdptest.Conn
		src      net.HardwareAddr
		srcIP    string
		in       xdptest.Iface
	}{
		{hostConn, gpuConn, x.HostIf.MAC, "10.9.0.2", x.SwitchHost},
		{gpuConn, hostConn, x.GPUIf.MAC, "10.9.1.2", x.SwitchGPU},
	} {
		frame := switchtest.Frame(dir.src, dir.in.MAC, -1,
			&encap.L3{Src: netip.MustParseAddr(dir.srcIP), Dst: ports[dir.in.Name].IP, SrcPort: 7000}, encap.MsgTLP, e2ePair, i == 0)
		if err := dir.from.Send(frame); err != nil {
			t.Fatal(err)
		}
		got, err := dir.to.RecvMatching(recvLimit, func(b []byte) bool {
			return len(b) > 42 && b[12] == 0x08 && b[13] == 0x00 && b[23] == 17
		})
		if err != nil {
			t.Fatalf("direction %d: %v", i, err)
		}
		buf := append(make([]byte, switching.Headroom), frame...)
		res := ref.Forward(buf, switching.Headroom, uint32(dir.in.Index))
		if res.Verdict != switching.VerdictForward || !bytes.Equal(got, buf[res.Off:]) {
			t.Fatalf("direction %d: got\n% x\nGo path (%v/%v)\n% x", i, got, res.Verdict, res.Reason, buf[res.Off:])
		}
	}
}

// TestRunXDPSwitchCarriesHandshake: the harness the bridges' end-to-end
// tests use carries CONTROL messages (their handshake) and data both ways.
func TestRunXDPSwitchCarriesHandshake(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	topo := xdptest.NewTopology(t)
	xdptest.RunXDPSwitch(t, topo, topo.Table(e2ePair))
	hostConn := xdptest.OpenPacket(t, topo.Host, topo.HostIf)
	gpuConn := xdptest.OpenPacket(t, topo.GPU, topo.GPUIf)
	for _, typ := range []encap.MsgType{encap.MsgControl, encap.MsgTLP} {
		for i, c := range []struct {
			from, to *xdptest.Conn
			src      net.HardwareAddr
			dst      net.HardwareAddr
		}{{hostConn, gpuConn, topo.HostIf.MAC, topo.SwitchHost.MAC}, {gpuConn, hostConn, topo.GPUIf.MAC, topo.SwitchGPU.MAC}} {
			if err := c.from.Send(switchtest.Frame(c.src, c.dst, -1, nil, typ, e2ePair, false)); err != nil {
				t.Fatal(err)
			}
			got, err := c.to.RecvMatching(recvLimit, xdptest.IsDXPU)
			if err != nil {
				t.Fatalf("%v direction %d: %v", typ, i, err)
			}
			if encap.MsgType(got[15]) != typ {
				t.Fatalf("%v direction %d: got message type %d", typ, i, got[15])
			}
		}
	}
}
