package xdp_test

import (
	"bytes"
	"context"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/switching/afxdp"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

// TestEndToEndAFXDP runs the userspace switch over AF_XDP in the switch
// namespace: frames both ways arrive as the Go decision rewrites them,
// including a pushed VLAN tag (the UMEM headroom), and a spoofed frame is
// dropped and counted.
func TestEndToEndAFXDP(t *testing.T) {
	privtest.BPF(t)
	privtest.NetNS(t)
	topo := xdptest.NewTopology(t)
	tbl := topo.Table(e2ePair)
	tbl.Pairs[0].VLAN = 9
	ports := topo.Ports()
	fwd, err := topo.Forwarder(tbl)
	if err != nil {
		t.Fatal(err)
	}
	var a *xdp.AFXDPSwitch
	if err := topo.Switch.Do(func() error {
		var err error
		a, err = xdp.NewAFXDPSwitch(fwd, ports, xdp.Options{}, afxdp.Config{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() { cancel(); <-done }()

	hostConn := xdptest.OpenPacket(t, topo.Host, topo.HostIf)
	gpuConn := xdptest.OpenPacket(t, topo.GPU, topo.GPUIf)
	ref, err := topo.Forwarder(tbl) // the expected outputs
	if err != nil {
		t.Fatal(err)
	}
	for i := uint32(0); i < 16; i++ {
		from, to, src, in := hostConn, gpuConn, topo.HostIf.MAC, topo.SwitchHost
		if i%2 == 1 {
			from, to, src, in = gpuConn, hostConn, topo.GPUIf.MAC, topo.SwitchGPU
		}
		frame := dxpuFrame(t, src, in.MAC, e2ePair, i)
		if err := from.Send(frame); err != nil {
			t.Fatal(err)
		}
		got, err := to.RecvMatching(recvLimit, xdptest.IsDXPU)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		buf := append(make([]byte, switching.Headroom), frame...)
		res := ref.Forward(buf, switching.Headroom, uint32(in.Index))
		if !bytes.Equal(got, buf[res.Off:]) {
			t.Fatalf("frame %d: got\n% x\nwant\n% x", i, got[:40], buf[res.Off:res.Off+40])
		}
	}
	// CONTROL messages (the bridges' handshake) cross through the slow
	// path, inline in the driver.
	hello := dxpuFrame(t, topo.HostIf.MAC, topo.SwitchHost.MAC, e2ePair, 7)
	hello[15] = byte(encap.MsgControl)
	if err := hostConn.Send(hello); err != nil {
		t.Fatal(err)
	}
	got, err := gpuConn.RecvMatching(recvLimit, xdptest.IsDXPU)
	if err != nil {
		t.Fatalf("CONTROL frame: %v", err)
	}
	hbuf := append(make([]byte, switching.Headroom), hello...)
	hres := ref.ForwardControl(hbuf, switching.Headroom, uint32(topo.SwitchHost.Index))
	if hres.Verdict != switching.VerdictForward || !bytes.Equal(got, hbuf[hres.Off:]) {
		t.Fatalf("CONTROL frame: got\n% x\nwant (%v)\n% x", got, hres.Verdict, hbuf[hres.Off:])
	}
	// Spoofed: the GPU's MAC from the host port.
	if err := hostConn.Send(dxpuFrame(t, topo.GPUIf.MAC, topo.SwitchHost.MAC, e2ePair, 99)); err != nil {
		t.Fatal(err)
	}
	marker := dxpuFrame(t, topo.HostIf.MAC, topo.SwitchHost.MAC, e2ePair, 0xfeed)
	if err := hostConn.Send(marker); err != nil {
		t.Fatal(err)
	}
	got, err = gpuConn.RecvMatching(recvLimit, xdptest.IsDXPU)
	if err != nil {
		t.Fatal(err)
	}
	if seq := seqOf(got[4:]); seq != 0xfeed { // tagged: the header is 4 bytes later
		t.Fatalf("GPU side got seq %#x first; the spoofed frame leaked", seq)
	}
	var spoofed uint64
	fwd.PairCounters(func(id uint32, c switching.Counters) { spoofed = c.Packets[switching.ReasonSpoofed] })
	if spoofed != 1 {
		t.Fatalf("spoofed counter %d, want 1", spoofed)
	}
}
