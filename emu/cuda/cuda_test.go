package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/topo"
)

func world(t testing.TB, f *topo.Fabric, sync SyncMode) (*topo.World, *Context) {
	t.Helper()
	w, err := topo.Build(topo.Options{GPUs: 1, Fabric: f, Enum: host.EnumConfig{TenBitTags: true}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(w.Host, w.Devices, Config{Sync: sync})
	if err != nil {
		t.Fatal(err)
	}
	return w, c
}

func TestCopyRoundTripCarriesData(t *testing.T) {
	t.Parallel()
	for _, f := range []*topo.Fabric{nil, {RTT: 10 * time.Microsecond}} {
		for _, mode := range []SyncMode{SyncSpin, SyncBlocking} {
			w, c := world(t, f, mode)
			d := c.Devices[0]
			st, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			const n = 1<<20 + 300 // not a multiple of anything
			src, dst := c.MallocHost(n), c.MallocHost(n)
			want := make([]byte, n)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range want {
				want[i] = byte(r.Uint32())
			}
			w.Host.Mem.Write(src, want)
			v := d.Malloc(n)
			if err := c.MemcpyHtoD(st, v, src, n); err != nil {
				t.Fatal(err)
			}
			if err := c.MemcpyDtoH(st, dst, v, n); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			w.Host.Mem.Read(dst, got)
			if !bytes.Equal(got, want) {
				t.Fatalf("fabric=%v sync=%v: data differs after H2D+D2H", f != nil, mode)
			}
			g := w.GPUs[0]
			if g.Stats.FluidBytes != 0 || g.Stats.ReadBytes < n {
				t.Fatalf("copy did not move as TLPs: %+v", g.Stats)
			}
			if mode == SyncBlocking && g.Stats.MSIs == 0 {
				t.Fatal("blocking sync raised no MSI")
			}
		}
	}
}

func TestEventsAndCrossStreamWait(t *testing.T) {
	t.Parallel()
	_, c := world(t, &topo.Fabric{RTT: 4 * time.Microsecond}, SyncSpin)
	d := c.Devices[0]
	a, _ := d.NewStream()
	b, _ := d.NewStream()
	e0, e1 := d.NewEvent(), d.NewEvent()
	if err := c.EventRecord(e0, a); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(a, 300*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if err := c.EventRecord(e1, a); err != nil {
		t.Fatal(err)
	}
	// b waits for e1, then runs a short kernel: it must finish after a's.
	if err := c.StreamWaitEvent(b, e1); err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(b, 10*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	start := c.Now()
	if err := c.StreamSynchronize(b); err != nil {
		t.Fatal(err)
	}
	if a.Completed() != a.Submitted() {
		t.Fatal("stream b finished before the event it waited for")
	}
	if waited := c.Now() - start; waited < 300*time.Microsecond {
		t.Fatalf("b done after %v, want >= 300us", waited)
	}
	if err := c.EventSynchronize(e1); err != nil {
		t.Fatal(err)
	}
	el, err := c.EventElapsed(e0, e1)
	if err != nil {
		t.Fatal(err)
	}
	if el < 300*time.Microsecond || el > 320*time.Microsecond {
		t.Fatalf("elapsed %v, want the kernel's 300us plus launch gaps", el)
	}
}

func TestLaunchSyncCostsMoreOverFabric(t *testing.T) {
	t.Parallel()
	lat := func(f *topo.Fabric) time.Duration {
		_, c := world(t, f, SyncSpin)
		st, _ := c.Devices[0].NewStream()
		t0 := c.Now()
		if err := c.Launch(st, 0); err != nil {
			t.Fatal(err)
		}
		if err := c.StreamSynchronize(st); err != nil {
			t.Fatal(err)
		}
		return c.Now() - t0
	}
	native := lat(nil)
	fabric := lat(&topo.Fabric{RTT: 10 * time.Microsecond})
	// Doorbell one way, GPFIFO and pushbuffer fetches two round trips,
	// semaphore one way: at least 3 added RTTs of 10us.
	if fabric-native < 30*time.Microsecond {
		t.Fatalf("native %v fabric %v: fabric adds %v, want >= 30us", native, fabric, fabric-native)
	}
}

func TestSurpriseRemovalFailsWork(t *testing.T) {
	t.Parallel()
	w, c := world(t, &topo.Fabric{RTT: 2 * time.Microsecond}, SyncSpin)
	st, _ := c.Devices[0].NewStream()
	if err := c.Launch(st, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	c.CPU(10 * time.Microsecond)
	if err := w.SurpriseRemove(0); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(st); err != ErrDeviceLost {
		t.Fatalf("sync after removal: %v, want ErrDeviceLost", err)
	}
	if _, err := st.Submit(gpu.Command{Op: gpu.OpKernel}); err != ErrDeviceLost {
		t.Fatalf("submit after removal: %v", err)
	}
}

// A device removed while the host waits must end the wait with
// ErrDeviceLost in both sync modes: a spinning CPU gets no MSI, so the
// removal itself has to wake it.
func TestSurpriseRemovalWhileWaiting(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncSpin, SyncBlocking} {
		for _, viaEvent := range []bool{false, true} {
			w, c := world(t, &topo.Fabric{RTT: 2 * time.Microsecond}, mode)
			st, _ := c.Devices[0].NewStream()
			if err := c.Launch(st, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			var ev *Event
			if viaEvent {
				ev = c.Devices[0].NewEvent()
				if err := c.EventRecord(ev, st); err != nil {
					t.Fatal(err)
				}
			}
			removeErr := error(nil)
			c.s.After(100*time.Microsecond, func() { removeErr = w.SurpriseRemove(0) })
			var err error
			if viaEvent {
				err = c.EventSynchronize(ev)
			} else {
				err = c.StreamSynchronize(st)
			}
			if removeErr != nil {
				t.Fatal(removeErr)
			}
			if err != ErrDeviceLost {
				t.Errorf("mode %v event %v: wait across removal = %v, want ErrDeviceLost", mode, viaEvent, err)
			}
			if c.Now() > 5*time.Millisecond {
				t.Errorf("mode %v event %v: the wait ended at %v, after the kernel would have, not at the removal", mode, viaEvent, c.Now())
			}
		}
	}
}
