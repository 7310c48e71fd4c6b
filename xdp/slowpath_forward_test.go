package xdp_test

import (
	"context"
	"sync"
	"testing"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/switchtest"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/tlp/encap"
	"github.com/dxpu/dxpu/xdp"
)

// TestSlowPathForwardsControl: the bridges' CONTROL messages (HELLO and
// friends) cross the XDP switch through the Go slow path, both ways,
// rewritten like data, whether the slow path listens with AF_PACKET or
// AF_XDP; a spoofed CONTROL message and one of an unknown pair do not
// arrive, and the spoofed one is counted.
func TestSlowPathForwardsControl(t *testing.T) {
	for _, useXSK := range []bool{false, true} {
		name := "afpacket"
		if useXSK {
			name = "xsk"
		}
		t.Run(name, func(t *testing.T) {
			x := newXDPTopology(t)
			fwd := switching.NewForwarder(0)
			rules, _, err := switching.Compile(x.tbl, x.ports, 0)
			if err != nil {
				t.Fatal(err)
			}
			fwd.SetPorts(x.ports)
			fwd.Update(rules)
			var sp *xdp.SlowPath
			if err := x.Switch.Do(func() error {
				var err error
				sp, err = xdp.NewSlowPath(x.sw, fwd, x.ports, useXSK)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			observed := 0
			sp.Observe = func(string, []byte) { mu.Lock(); observed++; mu.Unlock() }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- sp.Run(ctx) }()
			defer func() { cancel(); <-done; sp.Close() }()

			hostConn := xdptest.OpenPacket(t, x.Host, x.HostIf)
			gpuConn := xdptest.OpenPacket(t, x.GPU, x.GPUIf)
			ref := switching.NewForwarder(0)
			ref.Update(rules)
			isControl := func(b []byte) bool { return xdptest.IsDXPU(b) && len(b) > 15 && b[15] == byte(encap.MsgControl) }
			// Spoofed (the GPU's MAC on the host port) and unknown-pair
			// CONTROL frames first; then the legitimate ones must be the
			// first to arrive.
			if err := hostConn.Send(switchtest.Frame(x.GPUIf.MAC, x.SwitchHost.MAC, -1, nil, encap.MsgControl, e2ePair, false)); err != nil {
				t.Fatal(err)
			}
			if err := hostConn.Send(switchtest.Frame(x.HostIf.MAC, x.SwitchHost.MAC, -1, nil, encap.MsgControl, 0x00dead, false)); err != nil {
				t.Fatal(err)
			}
			for i, dir := range []struct {
				from, to *xdptest.Conn
				src      xdptest.Iface
				in       xdptest.Iface
			}{{hostConn, gpuConn, x.HostIf, x.SwitchHost}, {gpuConn, hostConn, x.GPUIf, x.SwitchGPU}} {
				hello := switchtest.Frame(dir.src.MAC, dir.in.MAC, -1, nil, encap.MsgControl, e2ePair, false)
				if err := dir.from.Send(hello); err != nil {
					t.Fatal(err)
				}
				got, err := dir.to.RecvMatching(recvLimit, isControl)
				if err != nil {
					t.Fatalf("direction %d: %v", i, err)
				}
				buf := append(make([]byte, switching.Headroom), hello...)
				res := ref.ForwardControl(buf, switching.Headroom, uint32(dir.in.Index))
				if res.Verdict != switching.VerdictForward || string(got) != string(buf[res.Off:]) {
					t.Fatalf("direction %d: got\n% x\nwant (%v)\n% x", i, got, res.Verdict, buf[res.Off:])
				}
			}
			var spoofed, fwdGPU uint64
			fwd.PairCounters(func(id uint32, c switching.Counters) {
				if id == e2ePair {
					spoofed, fwdGPU = c.Packets[switching.ReasonSpoofed], c.Packets[switching.ReasonToGPU]
				}
			})
			if spoofed != 1 || fwdGPU != 1 {
				t.Fatalf("slow path counters: spoofed %d, to_gpu %d; want 1, 1", spoofed, fwdGPU)
			}
			mu.Lock()
			defer mu.Unlock()
			if observed < 4 {
				t.Fatalf("observed %d slow-path frames, want at least 4", observed)
			}
		})
	}
}
