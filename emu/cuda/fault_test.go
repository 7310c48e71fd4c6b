package cuda

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// readFaults answers chosen DMA reads of the GPU, on the host side of the
// fabric, with an error completion instead of host memory, or drops them
// (never answered). Reads are counted from arm.
type readFaults struct {
	nth    int // the read to fail, counted from arm (1: the next); 0: none
	seen   int
	status tlp.Status
	drop   bool
	failed []uint64 // addresses of the reads failed
}

// arm fails the nth GPU read from now with status, or drops it.
func (r *readFaults) arm(nth int, status tlp.Status, drop bool) {
	r.nth, r.seen, r.status, r.drop = nth, 0, status, drop
}

// faultPath is a fabric path whose host side passes the GPU's reads
// through readFaults.
type faultPath struct {
	inner pcie.Path
	rf    *readFaults
	up    pcie.Receiver // the switch's downstream port
	down  pcie.Sender   // towards the GPU
}

func (p *faultPath) Connect(upstream, downstream pcie.Receiver) (down, up pcie.Sender) {
	p.up = upstream
	down, up = p.inner.Connect(pcie.ReceiverFunc(p.fromGPU), downstream)
	p.down = down
	return down, up
}

func (p *faultPath) fromGPU(v tlp.View) {
	r := p.rf
	if v.Kind() == tlp.MRd && r.nth > 0 {
		r.seen++
		if r.seen == r.nth {
			r.nth = 0
			addr, n := pcie.RequestBytes(v)
			r.failed = append(r.failed, addr)
			if !r.drop {
				p.down.SendTLP(pcie.AppendCpl(nil, 0, v.RequesterID(), v.Tag(), r.status, n))
			}
			return
		}
	}
	p.up.ReceiveTLP(v)
}

// progressGuard is the host's driver in virtual time, except that one
// blocking call gives up once it has run a virtual minute: a wait that
// only timers (the bridges' keepalives) keep alive would otherwise run
// forever. It stands for the test's hang detector: a call that returns
// after a virtual minute was hung.
type progressGuard struct{ s *sim.Sim }

const hung = time.Minute

func (g progressGuard) RunWhile(cond func() bool) bool {
	until := g.s.Now() + hung
	g.s.RunWhile(func() bool { return cond() && g.s.Now() < until }, 0)
	return !cond()
}

func (g progressGuard) Advance(d time.Duration) { pcie.RunUntil(g.s, g.s.Now()+d) }

// faultWorld is one GPU behind a fabric whose host side fails the reads
// rf says: through a real bridge pair (whose keepalives keep the
// simulation going forever) or a plain pipe (which runs out of events).
func faultWorld(t *testing.T, bridged bool, mode SyncMode) (*topo.World, *Context, *readFaults) {
	t.Helper()
	s := sim.New(1)
	f := topo.Fabric{RTT: 4 * time.Microsecond}
	rf := &readFaults{}
	o := topo.Options{GPUs: 1, Sim: s, Fabric: &f, Driver: progressGuard{s}, Enum: host.EnumConfig{TenBitTags: true},
		Path: func(s *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			var inner pcie.Path
			if bridged {
				inner = &topo.BridgePath{S: s, Fabric: f, PairID: uint32(i + 1)}
			} else {
				lc := topo.FabricLink(f, gpu.H100SXM)
				inner = &pcie.LinkPath{S: s, Down: lc, Up: lc}
			}
			return &faultPath{inner: inner, rf: rf}
		}}
	if bridged {
		o.Host.CompletionTimeout = 2 * f.CompletionTimeout()
	}
	w, err := topo.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(w.Host, w.Devices, Config{Sync: mode})
	if err != nil {
		t.Fatal(err)
	}
	return w, c, rf
}

// wantStopped checks that err is the channel fault of stream 0 of device
// 0 with reason and status, named in its one line, and that the call
// returned soon after the fault (at start, virtual), not after the hang
// detector gave up.
func wantStopped(t *testing.T, what string, c *Context, start time.Duration, err error, reason gpu.FaultReason, status tlp.Status, text string) {
	t.Helper()
	var ce *ChannelError
	if !errors.Is(err, ErrChannelStopped) || !errors.As(err, &ce) {
		t.Fatalf("%s: %v (after %v virtual), want a channel stopped by a fault", what, err, c.Now()-start)
	}
	if ce.Device != 0 || ce.Stream != 0 || ce.Fault.Reason != reason || ce.Fault.Status != status {
		t.Errorf("%s: %+v, want device 0 stream 0 reason %d status %v", what, ce, reason, status)
	}
	t.Logf("%s after %v virtual: %v", what, c.Now()-start, err)
	msg := err.Error()
	if !strings.HasPrefix(msg, "cuda: device 0 (") || !strings.Contains(msg, " stream 0: channel stopped: ") ||
		!strings.Contains(msg, text) || strings.Contains(msg, "\n") {
		t.Errorf("%s: message %q, want one line naming device 0, stream 0 and %q", what, msg, text)
	}
	if took := c.Now() - start; took > time.Second {
		t.Errorf("%s: returned after %v virtual: hung until the guard gave up", what, took)
	}
}

// TestFetchAbortEndsEventSynchronize: the GPU's read of a pushbuffer is
// answered with Completer Abort. When it held the event record,
// EventSynchronize used to wait for the event's semaphore forever (the
// bridges' keepalives kept the simulation alive; here the guard gives up
// after a virtual minute); when it held a kernel before the record, the
// GPU skipped it and released the event, and EventSynchronize reported
// success for a kernel that never ran. Now the GPU stops the channel at
// the fault and posts it to the channel's notifier, and the wait fails at
// once with the device, the stream and the cause. The error is sticky, as
// CUDA's: later calls fail, while an event the GPU released before the
// fault still reads as done.
func TestFetchAbortEndsEventSynchronize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		nth     int // the failed read: a submission reads its GPFIFO entry, then its pushbuffer
		kernels uint64
	}{{"the event record's pushbuffer", 4, 1}, {"a kernel's pushbuffer before the record", 2, 0}} {
		for _, mode := range []SyncMode{SyncSpin, SyncBlocking} {
			w, c, rf := faultWorld(t, true, mode)
			d := c.Devices[0]
			st, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			other, err := d.NewStream()
			if err != nil {
				t.Fatal(err)
			}
			before, ev := d.NewEvent(), d.NewEvent()
			if err := c.EventRecord(before, st); err != nil {
				t.Fatal(err)
			}
			if err := c.EventSynchronize(before); err != nil {
				t.Fatal(err)
			}
			rf.arm(tc.nth, tlp.StatusCA, false)
			if err := c.Launch(st, 10*time.Microsecond); err != nil {
				t.Fatal(err)
			}
			if err := c.EventRecord(ev, st); err != nil {
				t.Fatal(err)
			}
			start := c.Now()
			err = c.EventSynchronize(ev)
			if len(rf.failed) != 1 {
				t.Fatalf("%s, mode %v: %d reads failed, want 1", tc.name, mode, len(rf.failed))
			}
			wantStopped(t, "EventSynchronize", c, start, err, gpu.FaultSegmentFetch, tlp.StatusCA, "pushbuffer fetch at ")
			if g := w.GPUs[0]; g.Stats.Kernels != tc.kernels {
				t.Errorf("%s, mode %v: %d kernels ran, want %d", tc.name, mode, g.Stats.Kernels, tc.kernels)
			}
			if err := c.EventSynchronize(before); err != nil {
				t.Errorf("%s, mode %v: an event released before the fault: %v", tc.name, mode, err)
			}
			for name, call := range map[string]func() error{
				"StreamSynchronize":             func() error { return c.StreamSynchronize(st) },
				"DeviceSynchronize":             func() error { return c.DeviceSynchronize(d) },
				"Launch":                        func() error { return c.Launch(st, 0) },
				"Launch on another stream":      func() error { return c.Launch(other, 0) },
				"MemcpyHtoD":                    func() error { return c.MemcpyHtoD(other, d.Malloc(64), c.MallocHost(64), 64) },
				"EventRecord on another stream": func() error { return c.EventRecord(d.NewEvent(), other) },
			} {
				start := c.Now()
				wantStopped(t, name, c, start, call(), gpu.FaultSegmentFetch, tlp.StatusCA, "completer abort")
			}
			if err := st.Err(); !errors.Is(err, ErrChannelStopped) {
				t.Errorf("%s, mode %v: Stream.Err = %v", tc.name, mode, err)
			}
		}
	}
}

// TestFetchFaultsEndWaits: every way a command fetch or a copy's read can
// fail ends the wait on it with the fault: the GPFIFO read answered with
// Unsupported Request, a copy's data read answered with Completer Abort
// (which used to report success over stale VRAM), and a pushbuffer read
// that is never answered (the GPU-side bridge's completion timeout
// answers it with CA).
func TestFetchFaultsEndWaits(t *testing.T) {
	t.Parallel()
	for _, mode := range []SyncMode{SyncSpin, SyncBlocking} {
		m := map[SyncMode]string{SyncSpin: "spin", SyncBlocking: "blocking"}[mode]
		t.Run(m+"/ring UR", func(t *testing.T) {
			_, c, rf := faultWorld(t, true, mode)
			st, _ := c.Devices[0].NewStream()
			rf.arm(1, tlp.StatusUR, false)
			if err := c.Launch(st, 0); err != nil {
				t.Fatal(err)
			}
			start := c.Now()
			err := c.StreamSynchronize(st)
			wantStopped(t, "StreamSynchronize", c, start, err, gpu.FaultRingFetch, tlp.StatusUR, "GPFIFO fetch at ")
			if !strings.HasSuffix(err.Error(), "unsupported request") {
				t.Errorf("message %q", err)
			}
		})
		t.Run(m+"/copy CA", func(t *testing.T) {
			w, c, rf := faultWorld(t, true, mode)
			d := c.Devices[0]
			st, _ := d.NewStream()
			src, dst := c.MallocHost(4096), d.Malloc(4096)
			w.Host.Mem.Write(src, []byte{1, 2, 3})
			// The GPFIFO entry, the pushbuffer, then the copy's reads.
			rf.arm(3, tlp.StatusCA, false)
			start := c.Now()
			err := c.MemcpyHtoD(st, dst, src, 4096)
			wantStopped(t, "MemcpyHtoD", c, start, err, gpu.FaultCopyRead, tlp.StatusCA, "copy's DMA read at ")
			if len(rf.failed) != 1 || !strings.Contains(err.Error(), "at 0x") {
				t.Errorf("failed reads %#x, message %q", rf.failed, err)
			}
		})
		t.Run(m+"/pushbuffer never answered", func(t *testing.T) {
			_, c, rf := faultWorld(t, true, mode)
			st, _ := c.Devices[0].NewStream()
			rf.arm(2, 0, true)
			if err := c.Launch(st, 0); err != nil {
				t.Fatal(err)
			}
			start := c.Now()
			err := c.DeviceSynchronize(c.Devices[0])
			wantStopped(t, "DeviceSynchronize", c, start, err, gpu.FaultSegmentFetch, tlp.StatusCA, "pushbuffer fetch at ")
		})
	}
}

// TestStallNamesTheWait: a read never answered on a path with no timer
// at all (a plain pipe) leaves no event to run: the wait ends at once
// with ErrStalled, naming the device, the stream and what it waited for.
func TestStallNamesTheWait(t *testing.T) {
	t.Parallel()
	_, c, rf := faultWorld(t, false, SyncSpin)
	d := c.Devices[0]
	st, _ := d.NewStream()
	ev := d.NewEvent()
	rf.arm(2, 0, true)
	if err := c.Launch(st, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.EventRecord(ev, st); err != nil {
		t.Fatal(err)
	}
	err := c.StreamSynchronize(st)
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "device 0 (") ||
		!strings.Contains(err.Error(), "stream 0: waited for sequence 2, the host saw 0") {
		t.Fatalf("StreamSynchronize: %v, want ErrStalled naming device 0, stream 0 and sequence 2", err)
	}
	err = c.EventSynchronize(ev)
	if !errors.Is(err, ErrStalled) || !strings.Contains(err.Error(), "stream 0: waited for an event to reach 1, the host saw 0") {
		t.Fatalf("EventSynchronize: %v, want ErrStalled naming the event's stream", err)
	}
}
