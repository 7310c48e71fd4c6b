package afpacket

import (
	"context"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/frametest"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// vethPair makes a fresh network namespace holding a veth pair dx0 <-> dx1
// and opens a Conn on each end, towards the other.
func vethPair(t testing.TB) (*Conn, *Conn) {
	a, b, raw := vethPairRaw(t)
	raw.Close()
	return a, b
}

// vethPairRaw is vethPair with a third socket on dx1: a raw packet socket
// (bound to no EtherType: it receives nothing) that writes whole Ethernet
// frames, any source address in them, to dx0.
func vethPairRaw(t testing.TB) (*Conn, *Conn, *rawEnd) {
	privtest.NetNS(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatal(err)
		}
		ns.Close() // the sockets keep the namespace alive until closed
	}()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dx0", MTU: 9000}, PeerName: "dx1"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("veth: %v", err)
	}
	var macs [2][]byte
	for i, name := range []string{"dx0", "dx1"} {
		l, err := netlink.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetMTU(l, 9000); err != nil {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
		macs[i] = l.Attrs().HardwareAddr
	}
	a, err := Listen("dx0", macs[1])
	if err != nil {
		t.Fatal(err)
	}
	b, err := Listen("dx1", macs[0])
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	ifi, err := net.InterfaceByName("dx1")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := packet.Listen(ifi, packet.Raw, 0, nil)
	if err != nil {
		a.Close()
		b.Close()
		t.Fatal(err)
	}
	return a, b, &rawEnd{c: raw, to: macs[0]}
}

// rawEnd writes Ethernet frames out of dx1 towards dx0's MAC.
type rawEnd struct {
	c  *packet.Conn
	to net.HardwareAddr
}

// send writes frame behind an Ethernet header from src to dx0, EtherType
// 0x88B5.
func (r *rawEnd) send(src net.HardwareAddr, frame []byte) error {
	_, err := r.c.WriteTo(frametest.Ethernet(r.to, src, frame), &packet.Addr{HardwareAddr: r.to})
	return err
}

func (r *rawEnd) Close() error { return r.c.Close() }

// Frames from another MAC than the peer's are dropped before the bridge
// sees them, and counted where the runner exports them
// (bridge.Counters.DroppedForeignSource, the bridge's
// dxpu_bridge_dropped_foreign_source_total), as over UDP: they were
// counted here and exported nowhere. The peer's frames still reach the
// bridge, and none of the strangers' HELLOs is taken.
func TestForeignFramesCounted(t *testing.T) {
	t.Parallel()
	a, b, raw := vethPairRaw(t)
	defer b.Close()
	defer raw.Close()
	const pair, strangers, each = 7, 3, 4
	r := frametest.HostRunner(t, pair, a) // closes a
	hello := frametest.SendStrangers(t, pair, strangers, each, raw.send)
	// The peer's own frame, cut short: it reaches the bridge, which drops
	// it as malformed.
	if err := b.Send(hello[:12]); err != nil {
		t.Fatal(err)
	}
	frametest.AwaitForeignCounted(t, r, strangers*each, a.Foreign.Load)
}

// Two bridges over raw Ethernet on a veth pair: posted writes arrive in
// order and reads are answered.
func TestBridgeOverVeth(t *testing.T) {
	t.Parallel()
	a, b := vethPair(t)
	// Timers for a shared, loaded test machine: with the defaults (1 ms
	// keepalive, dead after 10 ms) a goroutine stalled for tens of
	// milliseconds takes the link down, and a link going down loses the
	// posted writes in flight, as PCIe does.
	cfg := bridge.Config{MTU: 9000, Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second}
	hc, gc := cfg, cfg
	hc.Role, gc.Role = bridge.RoleHost, bridge.RoleGPU
	hb, err := bridge.New(hc)
	if err != nil {
		t.Fatal(err)
	}
	gb, err := bridge.New(gc)
	if err != nil {
		t.Fatal(err)
	}
	host, gpu := driver.New(hb, a), driver.New(gb, b)
	var mu sync.Mutex
	var got []uint64
	cpls := 0
	gpu.OnTLP = func(v tlp.View) {
		mu.Lock()
		defer mu.Unlock()
		if v.Kind() == tlp.MWr {
			got = append(got, v.Address())
		}
	}
	host.OnTLP = func(v tlp.View) {
		mu.Lock()
		defer mu.Unlock()
		if v.Kind().IsCompletion() {
			cpls++
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{}, 2)
	for _, r := range []*driver.Runner{host, gpu} {
		go func() { defer func() { stopped <- struct{}{} }(); _ = r.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range 2 {
			waitfor.Receive(t, stopped, "the runners returning once their context ended")
		}
	}()
	defer func() {
		if t.Failed() {
			t.Logf("host: state %v, %d pending, last frame error %v, send errors %d, counters %+v",
				host.State(), host.Pending(), host.FrameError(), host.SendErrors(), host.Counters())
			t.Logf("gpu: state %v, %d pending, last frame error %v, send errors %d, counters %+v",
				gpu.State(), gpu.Pending(), gpu.FrameError(), gpu.SendErrors(), gpu.Counters())
		}
	}()
	waitfor.Until(t, "link up over the veth pair", func() bool {
		return host.State() == bridge.StateUp && gpu.State() == bridge.StateUp
	})
	// TLPs the GPU side took from the veth and handed to OnTLP: while
	// either grows the pair is working, however slowly. (Not read under mu:
	// OnTLP takes mu with the runner's lock held.)
	progress := func() uint64 {
		if d := host.Counters().LinkDowns + gpu.Counters().LinkDowns; d != 0 {
			t.Fatalf("the link went down %d times: posted writes in flight are lost", d)
		}
		c := gpu.Counters()
		return c.TLPsReceived + c.TLPsDelivered
	}
	const n = 2000
	w := waitfor.NewWatch(t, "writes over the veth pair")
	for i := 0; i < n; {
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: uint64(i) * 4096, Data: make([]byte, 128)}
		raw, _ := p.AppendTo(nil)
		switch err := host.Send(raw); {
		case err == nil:
			i++
		case errors.Is(err, bridge.ErrBusy):
			w.Wait(progress())
		default:
			t.Fatalf("write %d: %v", i, err)
		}
	}
	waitfor.Progress(t, "writes arriving over the veth pair", func() (bool, uint64) {
		p := progress()
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= n, p
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n {
		t.Fatalf("%d of %d writes arrived", len(got), n)
	}
	for i, addr := range got {
		if addr != uint64(i)*4096 {
			t.Fatalf("write %d arrived as address %#x: out of order", i, addr)
		}
	}
	c := host.Counters()
	t.Logf("host counters: frames %d, TLPs %d, retransmits %d", c.FramesSent, c.TLPsSent, c.Retransmits)
}
