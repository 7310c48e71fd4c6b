package cuda

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/gpudrv"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// crossings counts the TLPs a bridge pair delivers, by kind, each way.
type crossings struct {
	down, up map[tlp.Kind]int
}

func (c *crossings) reset() { c.down, c.up = map[tlp.Kind]int{}, map[tlp.Kind]int{} }

// nonPosted returns the non-posted requests that crossed either way.
func (c *crossings) nonPosted() int {
	n := 0
	for _, m := range []map[tlp.Kind]int{c.down, c.up} {
		for k, v := range m {
			if k.IsNonPosted() {
				n += v
			}
		}
	}
	return n
}

// countingPath is a path through a real bridge pair (topo.BridgePath) that
// counts what crosses it.
type countingPath struct {
	inner pcie.Path
	c     *crossings
}

func (p countingPath) Connect(upstream, downstream pcie.Receiver) (down, up pcie.Sender) {
	return p.inner.Connect(
		pcie.ReceiverFunc(func(v tlp.View) { p.c.up[v.Kind()]++; upstream.ReceiveTLP(v) }),
		pcie.ReceiverFunc(func(v tlp.View) { p.c.down[v.Kind()]++; downstream.ReceiveTLP(v) }))
}

// launchSync times one empty-kernel launch and the host seeing it done,
// after two that warm the path, on a new stream of c with the commands
// placed as p. cr, when set, counts what the last one sent across the
// fabric. A launch that never completes fails the test after a
// millisecond of virtual time (a bridge pair's timers keep the simulation
// busy, so a blocking sync would wait for ever).
func launchSync(t *testing.T, c *Context, p gpudrv.Placement, cr *crossings) time.Duration {
	t.Helper()
	st, err := c.Devices[0].NewStreamPlaced(p)
	if err != nil {
		t.Fatal(err)
	}
	var lat time.Duration
	for range 3 {
		if cr != nil {
			cr.reset()
		}
		t0 := c.Now()
		if err := c.Launch(st, 0); err != nil {
			t.Fatal(err)
		}
		done := false
		st.OnDone(st.Submitted(), func() { done = true })
		c.Host().RunWhile(func() bool { return !done && c.Now() < t0+time.Millisecond })
		if !done {
			t.Fatalf("%v placement: launch not seen done after %v", p, c.Now()-t0)
		}
		lat = c.Now() - t0
	}
	return lat
}

// TestLaunchSyncRoundTrips counts, in virtual time over a bridge pair,
// what one empty-kernel launch and its stream sync send across the fabric
// with the commands in each placement: in host memory the GPU reads the
// ring entry and then the segment (2 non-posted reads, 3 round trips in
// all); in device memory nothing crosses but posted writes (1 round
// trip). Against the same placement on native PCIe, the fabric adds about
// 3 and 1 round trips.
func TestLaunchSyncRoundTrips(t *testing.T) {
	t.Parallel()
	const rtt = 10 * time.Microsecond
	f := topo.Fabric{RTT: rtt}
	var cr crossings
	cr.reset()
	w, err := topo.Build(topo.Options{GPUs: 1, Fabric: &f, Enum: host.EnumConfig{TenBitTags: true},
		Path: func(s *sim.Sim, i int, g *gpu.GPU) pcie.Path {
			return countingPath{inner: topo.BridgePaths(f)(s, i, g), c: &cr}
		}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(w.Host, w.Devices, Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, nc := world(t, nil, SyncSpin)
	type want struct {
		reads, downWrites, upWrites int
		rtts                        float64 // the fabric's excess over native, in RTTs: at least
		maxRTTs                     float64 // and at most
	}
	for p, wt := range map[gpudrv.Placement]want{gpudrv.HostMemory: {2, 1, 1, 3, 3.5}, gpudrv.DeviceMemory: {0, 3, 1, 1, 1.5}} {
		kernels := w.GPUs[0].Stats.Kernels
		fab := launchSync(t, c, p, &cr)
		if w.GPUs[0].Stats.Kernels != kernels+3 {
			t.Fatalf("%v placement: %d kernels ran, want 3", p, w.GPUs[0].Stats.Kernels-kernels)
		}
		got := want{cr.nonPosted(), cr.down[tlp.MWr], cr.up[tlp.MWr], wt.rtts, wt.maxRTTs}
		if got != wt {
			t.Errorf("%v placement: %d non-posted requests, %d posted writes down, %d up crossed; want %d, %d, %d (down %v, up %v)",
				p, got.reads, got.downWrites, got.upWrites, wt.reads, wt.downWrites, wt.upWrites, cr.down, cr.up)
		}
		native := launchSync(t, nc, p, nil)
		excess := float64(fab-native) / float64(rtt)
		if excess < wt.rtts || excess > wt.maxRTTs {
			t.Errorf("%v placement: launch+sync %v over the fabric, %v native: %.2f RTTs more, want %v..%v", p, fab, native, excess, wt.rtts, wt.maxRTTs)
		}
		t.Logf("%v placement: launch+sync %v over a %v RTT fabric, %v native", p, fab, rtt, native)
	}
}

// TestDeviceCommandsCarryData runs copies, a memset and events on streams
// whose commands are in device memory, natively and over a fabric, in
// both sync modes: the data and the ordering are those of host-memory
// commands.
func TestDeviceCommandsCarryData(t *testing.T) {
	t.Parallel()
	for _, f := range []*topo.Fabric{nil, {RTT: 4 * time.Microsecond}} {
		for _, mode := range []SyncMode{SyncSpin, SyncBlocking} {
			name := fmt.Sprintf("fabric=%v sync=%v", f != nil, mode)
			w, err := topo.Build(topo.Options{GPUs: 1, Fabric: f, Enum: host.EnumConfig{TenBitTags: true}})
			if err != nil {
				t.Fatal(err)
			}
			c, err := New(w.Host, w.Devices, Config{Sync: mode, Commands: gpudrv.DeviceMemory})
			if err != nil {
				t.Fatal(err)
			}
			d := c.Devices[0]
			a, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			b, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			const n = 64<<10 + 12
			dst := c.MallocHost(n)
			want := bytes.Repeat([]byte{0x5a}, n)
			v := d.Malloc(n)
			// a fills VRAM after a kernel; b copies it out once a's event
			// says so.
			ev := d.NewEvent()
			for _, err := range []error{c.Launch(a, 50*time.Microsecond), c.MemsetAsync(a, v, 0x5a, n), c.EventRecord(ev, a),
				c.StreamWaitEvent(b, ev), c.MemcpyDtoHAsync(b, dst, v, n), c.StreamSynchronize(b)} {
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
			}
			got := make([]byte, n)
			w.Host.Mem.Read(dst, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: device-to-host copy after the memset differs", name)
			}
			g := w.GPUs[0]
			if g.Stats.LocalFetches == 0 || g.Stats.Errors != 0 || g.Stats.ReadRequests != 0 {
				t.Fatalf("%s: %d local fetches, %d errors, %d DMA reads: want local fetches only", name, g.Stats.LocalFetches, g.Stats.Errors, g.Stats.ReadRequests)
			}
		}
	}
}
