package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/afpacket"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/realtime"
	emutopo "github.com/dxpu/dxpu/emu/topo"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/xdptest"
	"github.com/dxpu/dxpu/sim"
)

// pairID is the host-GPU pair of the tests (24 bits).
const pairID = 0x00d1e5

// fabric is one emulated host with one remote GPU behind the XDP switch.
type fabric struct {
	net   *xdptest.Topology
	sw    *xdptest.XDPSwitch
	clk   *realtime.Clock
	path  *realtime.UDPPath
	world *emutopo.World

	mu     sync.Mutex
	events []bridge.Event // host bridge's, in order
}

// fabricOptions are what the two tests vary.
type fabricOptions struct {
	// deadAfter is the bridges' silence limit (keepalives every 100ms).
	deadAfter time.Duration
	// hostTimeout is the root complex's completion timeout.
	hostTimeout time.Duration
}

// newFabric builds the three namespaces, starts the XDP switch (fast and
// slow path) with a one-pair table, opens an AF_PACKET socket for each
// bridge inside its namespace, and builds and enumerates the emulated
// world over them on the wall clock. The host bridge's surprise removal
// unplugs the GPU from the host's virtual downstream port, as the hot-plug
// interrupt of a real slot does.
func newFabric(t *testing.T, o fabricOptions) *fabric {
	t.Helper()
	privtest.BPF(t)
	privtest.NetNS(t)
	f := &fabric{net: xdptest.NewTopology(t)}
	f.sw = xdptest.RunXDPSwitch(t, f.net, f.net.Table(pairID))

	s := sim.New(1)
	f.clk = realtime.New(s)
	f.path = &realtime.UDPPath{
		Clock:  f.clk,
		PairID: pairID,
		// Generous for a loaded CI machine: a stalled goroutine must not
		// look like a dead link.
		Bridge:     bridge.Config{Keepalive: 100 * time.Millisecond, DeadAfter: o.deadAfter, CompletionTimeout: 5 * time.Second},
		UpWithin:   10 * time.Second,
		Transports: f.openSockets,
		OnEvent:    f.onEvent,
	}
	t.Cleanup(f.path.Close)
	w, err := emutopo.Build(emutopo.Options{Sim: s, Driver: f.clk, GPUs: 1, Fabric: &emutopo.Fabric{},
		Enum: host.EnumConfig{TenBitTags: true},
		Host: host.Config{CompletionTimeout: o.hostTimeout},
		Path: func(_ *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			if i != 0 {
				t.Errorf("path for GPU %d requested; the test has one", i)
			}
			return f.path
		}})
	if perr := f.path.Err(); perr != nil {
		t.Fatalf("bridge pair over AF_PACKET: %v (build: %v)", perr, err)
	}
	if err != nil {
		t.Fatalf("building and enumerating the world through the XDP switch: %v", err)
	}
	f.world = w
	return f
}

// openSockets opens each bridge's AF_PACKET socket inside its namespace;
// the sockets stay bound there when used from the test's goroutines. Each
// bridge talks to its switch port's MAC, the source of everything the
// switch sends it.
func (f *fabric) openSockets() (driver.Transport, driver.Transport, error) {
	var hc, gc *afpacket.Conn
	if err := f.net.Host.Do(func() (err error) {
		hc, err = afpacket.Listen(f.net.HostIf.Name, f.net.SwitchHost.MAC)
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("host bridge socket: %w", err)
	}
	if err := f.net.GPU.Do(func() (err error) {
		gc, err = afpacket.Listen(f.net.GPUIf.Name, f.net.SwitchGPU.MAC)
		return err
	}); err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("GPU bridge socket: %w", err)
	}
	return hc, gc, nil
}

// onEvent runs on a bridge's goroutine: it records the host bridge's
// events and hands a surprise removal to the simulation.
func (f *fabric) onEvent(role bridge.Role, e bridge.Event) {
	if role != bridge.RoleHost {
		return
	}
	f.mu.Lock()
	f.events = append(f.events, e)
	f.mu.Unlock()
	if e.Kind == bridge.EventSurpriseRemoval {
		f.clk.Post(func() {
			if f.world != nil && f.world.Switch.Occupied(0) {
				_ = f.world.SurpriseRemove(0) // port 0 holds the GPU: cannot fail
			}
		})
	}
}

// hostEvents returns the kinds of the host bridge's events so far.
func (f *fabric) hostEvents() []bridge.EventKind {
	f.mu.Lock()
	defer f.mu.Unlock()
	var k []bridge.EventKind
	for _, e := range f.events {
		k = append(k, e.Kind)
	}
	return k
}

// xdpPair returns the XDP program's counters of the test pair, and
// whether the pair is installed.
func (f *fabric) xdpPair(t *testing.T) (switching.Counters, bool) {
	t.Helper()
	var c switching.Counters
	found := false
	if err := f.sw.PairCounters(func(id uint32, pc switching.Counters) {
		if id == pairID {
			c, found = pc, true
		}
	}); err != nil {
		t.Fatalf("reading XDP pair counters: %v", err)
	}
	return c, found
}

// xdpPort returns the XDP program's counters of a switch port.
func (f *fabric) xdpPort(t *testing.T, name string) switching.Counters {
	t.Helper()
	var c switching.Counters
	if err := f.sw.PortCounters(func(p string, pc switching.Counters) {
		if p == name {
			c = pc
		}
	}); err != nil {
		t.Fatalf("reading XDP port counters: %v", err)
	}
	return c
}

// slowPair returns the Go slow path's counters of the test pair.
func (f *fabric) slowPair(t *testing.T) switching.Counters {
	t.Helper()
	var c switching.Counters
	if err := f.sw.Slow.PairCounters(func(id uint32, pc switching.Counters) {
		if id == pairID {
			c = pc
		}
	}); err != nil {
		t.Fatalf("reading slow-path pair counters: %v", err)
	}
	return c
}

// txDropped returns the tx_dropped counter of interface name in ns: what
// the veth discarded of the frames written to it.
func (f *fabric) txDropped(t *testing.T, ns xdptest.NS, name string) uint64 {
	t.Helper()
	var n uint64
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if st := l.Attrs().Statistics; st != nil {
			n = st.TxDropped
		}
		return nil
	}); err != nil {
		t.Fatalf("reading the statistics of %s: %v", name, err)
	}
	return n
}
