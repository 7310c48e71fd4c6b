package switching_test

import (
	"bytes"
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestPacketDriverEndToEnd runs the userspace switch over AF_PACKET in the
// switch namespace of the three-namespace topology: frames from the host
// bridge reach the GPU bridge rewritten as Forward says, and back; a
// tagged frame keeps its tag although veth strips it on receive.
func TestPacketDriverEndToEnd(t *testing.T) {
	privtest.NetNS(t)
	topo := xdptest.NewTopology(t)
	tbl := topo.Table(0x000c01)
	tbl.Pairs[0].VLAN = 42
	ports := topo.Ports()
	fwd, err := topo.Forwarder(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var drv *switching.PacketDriver
	if err := topo.Switch.Do(func() error {
		var err error
		drv, err = switching.NewPacketDriver(fwd, ports)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	hostConn := xdptest.OpenPacket(t, topo.Host, topo.HostIf)
	gpuConn := xdptest.OpenPacket(t, topo.GPU, topo.GPUIf)
	ref, err := topo.Forwarder(tbl) // the expected outputs
	if err != nil {
		t.Fatal(err)
	}
	for i, vlan := range []int{-1, 7, -1, 7} {
		from, to, src, in := hostConn, gpuConn, topo.HostIf.MAC, topo.SwitchHost
		if i%2 == 1 {
			from, to, src, in = gpuConn, hostConn, topo.GPUIf.MAC, topo.SwitchGPU
		}
		frame := switchtest.Frame(src, in.MAC, vlan, nil, encap.MsgTLP, 0x000c01, false)
		if err := from.Send(frame); err != nil {
			t.Fatal(err)
		}
		got, err := to.RecvMatching(3*time.Second, xdptest.IsDXPU)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		buf := append(make([]byte, switching.Headroom), frame...)
		res := ref.Forward(buf, switching.Headroom, uint32(in.Index))
		if !bytes.Equal(got, buf[res.Off:]) {
			t.Fatalf("frame %d: got\n% x\nwant\n% x", i, got[:min(len(got), 40)], buf[res.Off:res.Off+40])
		}
	}
	controlCrosses(t, topo, hostConn, gpuConn, ref, 0x000c01)
}

// controlCrosses sends a CONTROL frame (the bridges' handshake) from the
// host end and expects it at the GPU end, rewritten like data.
func controlCrosses(t *testing.T, topo *xdptest.Topology, host, gpu *xdptest.Conn, ref *switching.Forwarder, pair uint32) {
	t.Helper()
	hello := switchtest.Frame(topo.HostIf.MAC, topo.SwitchHost.MAC, -1, nil, encap.MsgControl, pair, false)
	if err := host.Send(hello); err != nil {
		t.Fatal(err)
	}
	got, err := gpu.RecvMatching(3*time.Second, func(b []byte) bool { return xdptest.IsDXPU(b) && len(b) > 19 && (b[15] == 5 || b[19] == 5) })
	if err != nil {
		t.Fatalf("CONTROL frame did not cross the switch: %v", err)
	}
	buf := append(make([]byte, switching.Headroom), hello...)
	res := ref.ForwardControl(buf, switching.Headroom, uint32(topo.SwitchHost.Index))
	if !bytes.Equal(got, buf[res.Off:]) {
		t.Fatalf("CONTROL frame: got\n% x\nwant\n% x", got, buf[res.Off:])
	}
}

func TestUDPDriverRelays(t *testing.T) {
	fwd := switching.NewForwarder(0)
	privtest.Loopback(t) // 127.0.0.2 reaches lo without configuration
	host, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	gpu, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatalf("binding 127.0.0.2: %v", err)
	}
	defer gpu.Close()
	ha, ga := host.LocalAddr().(*net.UDPAddr).AddrPort(), gpu.LocalAddr().(*net.UDPAddr).AddrPort()
	tbl := &table.Table{Version: 1, Pairs: []table.Pair{{ID: 9,
		Host: table.Endpoint{Port: "udp", MAC: switchtest.MAC(1, 1), IP: ha.Addr(), UDPPort: ha.Port()},
		GPU:  table.Endpoint{Port: "udp", MAC: switchtest.MAC(2, 1), IP: ga.Addr(), UDPPort: ga.Port()}}}}
	rules, _, err := switching.Compile(tbl, switching.SyntheticPorts([]string{"udp"}), 0)
	if err != nil {
		t.Fatal(err)
	}
	fwd.Update(rules)
	drv, err := switching.NewUDPDriver(fwd, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- drv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	msg := make([]byte, 48)
	encap.Header(msg).SetVersionFlags(1, 0)
	encap.Header(msg).SetType(encap.MsgTLP)
	encap.Header(msg).SetPairID(9)
	sw := net.UDPAddrFromAddrPort(drv.Addr())
	for _, c := range []struct {
		from, to *net.UDPConn
		toAddr   netip.AddrPort
	}{{host, gpu, ga}, {gpu, host, ha}} {
		if _, err := c.from.WriteToUDP(msg, sw); err != nil {
			t.Fatal(err)
		}
		c.to.SetReadDeadline(time.Now().Add(3 * time.Second))
		buf := make([]byte, 100)
		n, from, err := c.to.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf[:n], msg) || from != drv.Addr() {
			t.Fatalf("got %d bytes from %v", n, from)
		}
	}
	// CONTROL datagrams (the bridges' handshake) are relayed too.
	ctl := append([]byte(nil), msg...)
	encap.Header(ctl).SetType(encap.MsgControl)
	if _, err := host.WriteToUDP(ctl, sw); err != nil {
		t.Fatal(err)
	}
	gpu.SetReadDeadline(time.Now().Add(3 * time.Second))
	cbuf := make([]byte, 100)
	if n, _, err := gpu.ReadFromUDPAddrPort(cbuf); err != nil || !bytes.Equal(cbuf[:n], ctl) {
		t.Fatalf("CONTROL datagram not relayed: %v", err)
	}
	// A third party using pair 9 is dropped as spoofed.
	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.WriteToUDP(msg, sw)
	// Then a legitimate one: the GPU must see it first.
	msg[10] = 0x77
	host.WriteToUDP(msg, sw)
	gpu.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 100)
	n, _, err := gpu.ReadFromUDPAddrPort(buf)
	if err != nil || buf[10] != 0x77 || n != len(msg) {
		t.Fatalf("after the spoofed datagram the GPU got %v %x", err, buf[:n])
	}
	var spoofed uint64
	fwd.PairCounters(func(id uint32, c switching.Counters) { spoofed = c.Packets[switching.ReasonSpoofed] })
	if spoofed != 1 {
		t.Fatalf("spoofed counter %d, want 1", spoofed)
	}
}
