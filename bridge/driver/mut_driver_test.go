package driver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Tests from hand-made bugs: each fails with a small change to the runner,
// the queued sender, SendWait or Faulty that the older tests let through.

// newRunner builds a runner for a bridge configured by cfg over tr.
func newRunner(t *testing.T, cfg bridge.Config, tr driver.Transport) *driver.Runner {
	t.Helper()
	b, err := bridge.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return driver.New(b, tr)
}

// startRun runs r until the test ends or stop is called (stop returns
// once Run has).
func startRun(t *testing.T, r *driver.Runner) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// writes records the write numbers a runner delivers.
type writes struct {
	mu  sync.Mutex
	got []uint64
}

func (w *writes) onTLP(v tlp.View) {
	w.mu.Lock()
	w.got = append(w.got, (v.Address()-base)/64)
	w.mu.Unlock()
}

func (w *writes) list() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]uint64(nil), w.got...)
}

func (w *writes) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.got)
}

// waitUp waits for the link and for the handshake's frames to be taken.
func waitUp(t *testing.T, h, g *driver.Runner) {
	t.Helper()
	waitfor.Until(t, "link up", func() bool { return h.State() == bridge.StateUp && g.State() == bridge.StateUp })
	waitfor.Until(t, "handshake frames all taken", func() bool {
		hc, gc := h.Counters(), g.Counters()
		return hc.FramesReceived+hc.FramesDropped == gc.FramesSent && gc.FramesReceived+gc.FramesDropped == hc.FramesSent
	})
}

// waitLen waits until w holds n deliveries, failing after 5s.
func waitLen(t *testing.T, w *writes, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for w.len() < n {
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d of %d within %v", w.len(), n, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// malformed is no TLP: HandleTLP refuses it for what it is.
var malformed = []byte{0x40, 0, 0}

func seq(n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i)
	}
	return s
}

// TestSendManyFramesWhatItTookBeforeAnError: when a later TLP of the call
// fails, SendMany frames the ones taken before it at once, and
// SendManyHeld leaves them for SendHeld.
func TestSendManyFramesWhatItTookBeforeAnError(t *testing.T) {
	t.Parallel()
	p := newHeldPairConfig(t, false, turnConfig)
	g0 := p.gpu.Counters().TLPsSent
	n, err := p.gpu.SendMany([][]byte{write(t, 0), malformed})
	if n != 1 || err == nil || errors.Is(err, bridge.ErrBusy) || errors.Is(err, bridge.ErrNotUp) {
		t.Fatalf("SendMany(good, malformed) = %d, %v; want 1 and the malformed TLP's error", n, err)
	}
	if sent := p.gpu.Counters().TLPsSent - g0; sent != 1 {
		t.Fatalf("SendMany returned with %d TLPs framed, want the 1 it took", sent)
	}
	n, err = p.gpu.SendManyHeld([][]byte{write(t, 1), malformed})
	if n != 1 || err == nil {
		t.Fatalf("SendManyHeld(good, malformed) = %d, %v; want 1 and an error", n, err)
	}
	p.gpu.SendHeld()
	if sent := p.gpu.Counters().TLPsSent - g0; sent != 2 {
		t.Fatalf("after SendHeld %d TLPs framed, want 2: SendManyHeld left nothing held", sent)
	}
	waitfor.Until(t, "host got both writes", func() bool { return p.host.Counters().TLPsDelivered >= 2 })
}

// roomyConfig is turnConfig with credits for more than four full frames of
// writes in flight.
func roomyConfig(role bridge.Role) bridge.Config {
	c := turnConfig(role)
	for i := range c.Credits {
		c.Credits[i] = bridge.ClassCredits{Headers: 1024, Data: 1024 * 256 / 16}
	}
	return c
}

// TestSendManyHeldSendsOnFourthFullFrame: SendManyHeld keeps full frames
// until four are ready, then sends them together.
func TestSendManyHeldSendsOnFourthFullFrame(t *testing.T) {
	t.Parallel()
	p := newHeldPairConfig(t, false, roomyConfig)
	perFrame := (roomyConfig(bridge.RoleGPU).MTU - encap.HeaderLen) / (2 + len(write(t, 0)))
	k0 := p.gpuPipe.Kinds()
	i := 0
	hand := func(upTo int) {
		for i < upTo {
			k := min(4, upTo-i)
			tlps := make([][]byte, k)
			for j := range tlps {
				tlps[j] = write(t, i+j)
			}
			if n, err := p.gpu.SendManyHeld(tlps); n != k || err != nil {
				t.Fatalf("SendManyHeld took %d of %d: %v", n, k, err)
			}
			i += k
		}
	}
	hand(3*perFrame + 1)
	if k := p.gpuPipe.Kinds().sub(k0); k.tlp != 0 {
		t.Fatalf("three full frames: %d sent, want them kept for a fourth", k.tlp)
	}
	// A frame is full once more than a frame's worth waits: the fourth
	// is built when the TLP after its last one comes.
	hand(4*perFrame + 1)
	if k := p.gpuPipe.Kinds().sub(k0); k.tlp != 4 {
		t.Fatalf("four full frames ready: %d sent, want the 4 together", k.tlp)
	}
	p.gpu.SendHeld()
	waitfor.Until(t, "host got every write", func() bool { return p.host.Counters().TLPsDelivered >= uint64(4*perFrame+1) })
}

// TestSendManyHeldArmsTheTimer: full frames SendManyHeld sent to a peer
// that went silent are retransmitted (or probed) at the RTO: the runner's
// timer follows the deadline their sending set.
func TestSendManyHeldArmsTheTimer(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := roomyConfig(role)
		c.MinRTO, c.InitialRTO, c.MaxRTO = time.Millisecond, 2*time.Millisecond, 10*time.Millisecond
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	startRun(t, h)
	stopGPU := startRun(t, g)
	waitUp(t, h, g)
	stopGPU()
	perFrame := (cfg(bridge.RoleHost).MTU - encap.HeaderLen) / (2 + len(write(t, 0)))
	f0 := h.Counters().FramesSent
	for i := 0; i <= 4*perFrame; i++ {
		if n, err := h.SendManyHeld([][]byte{write(t, i)}); n != 1 || err != nil {
			t.Fatalf("SendManyHeld: %d, %v", n, err)
		}
	}
	if sent := h.Counters().FramesSent - f0; sent != 4 {
		t.Fatalf("%d frames sent, want the 4 full ones", sent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Counters().FramesSent-f0 == 4 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing sent in 5s after 4 unacknowledged frames (RTO %v): timer not armed", cfg(bridge.RoleHost).InitialRTO)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReleaseSendsCreditsAndStallsExported: with ManualRelease, Release
// sends the freed credits (the host's stalled writes go on), and the
// host's credit stalls are exported under their class.
func TestReleaseSendsCreditsAndStallsExported(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := turnConfig(role)
		c.AckDelay = time.Millisecond
		if role == bridge.RoleGPU {
			c.Credits[tlp.Posted] = bridge.ClassCredits{Headers: 4, Data: 4 * 64 / 16}
		}
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	var w writes
	g.OnTLP, g.ManualRelease = w.onTLP, true
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	tlps := make([][]byte, 8)
	for i := range tlps {
		tlps[i] = write(t, i)
	}
	if n, err := h.SendMany(tlps); n != 8 || err != nil {
		t.Fatalf("SendMany: %d, %v", n, err)
	}
	waitLen(t, &w, 4, 5*time.Second)
	time.Sleep(20 * time.Millisecond)
	if k := w.len(); k != 4 {
		t.Fatalf("%d writes delivered on 4 credits", k)
	}
	if err := g.Release(tlp.Posted, 4, 4*64/16); err != nil {
		t.Fatal(err)
	}
	waitLen(t, &w, 8, 2*time.Second)
	if got := w.list(); !slices.Equal(got, seq(8)) {
		t.Fatalf("delivered %v", got)
	}

	stalls := h.Counters().CreditStalls
	if stalls[tlp.Posted] == 0 {
		t.Fatalf("host credit stalls %v: want posted ones", stalls)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(driver.NewCollector(h, nil))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "dxpu_bridge_credit_stalls_total" {
			continue
		}
		for _, m := range f.Metric {
			got[m.Label[0].GetValue()] = m.Counter.GetValue()
		}
	}
	stalls = h.Counters().CreditStalls
	for i, class := range []string{"P", "NP", "Cpl"} {
		if got[class] != float64(stalls[i]) {
			t.Errorf("dxpu_bridge_credit_stalls_total{class=%q} = %v, want %d (stalls %v)", class, got[class], stalls[i], stalls)
		}
	}
}

// TestPolledCountsPolledFrames: Polled adds up what Poll returned.
func TestPolledCountsPolledFrames(t *testing.T) {
	t.Parallel()
	p := newHeldPair(t, false)
	before, took := p.gpu.Polled(), uint64(0)
	for i := range 3 {
		if err := p.host.Send(write(t, i)); err != nil {
			t.Fatal(err)
		}
		waitfor.Until(t, "a poll takes the write", func() bool {
			n := p.gpu.Poll()
			took += uint64(n)
			return n > 0
		})
	}
	if got := p.gpu.Polled() - before; got != took || took == 0 {
		t.Fatalf("Polled grew by %d, Poll returned %d in all", got, took)
	}
}

// TestDroppedFrameReported: a frame the bridge drops is FrameError's and
// OnFrameDropped hears it.
func TestDroppedFrameReported(t *testing.T) {
	t.Parallel()
	p := newHeldPair(t, false)
	if err := p.gpu.FrameError(); err != nil {
		t.Fatalf("FrameError before any bad frame: %v", err)
	}
	var heard []error
	p.gpu.OnFrameDropped = func(_ time.Duration, err error) { heard = append(heard, err) } // Poll's goroutine: this one
	p.gpuPipe.in <- []byte{0xde, 0xad, 0xbe, 0xef}
	waitfor.Until(t, "a poll takes the junk", func() bool { return p.gpu.Poll() > 0 })
	err := p.gpu.FrameError()
	if err == nil || len(heard) != 1 || heard[0] != err {
		t.Fatalf("FrameError %v, OnFrameDropped heard %v: want the one drop", err, heard)
	}
}

// groPipe is a pollPipe that coalesces queued frames as UDP GRO does: a
// run of frames of one size (the last may be shorter) in one buffer.
type groPipe struct {
	*pollPipe
	pending []byte
	runs    atomic.Int64 // messages of more than one frame
}

func (p *groPipe) EnableGRO() bool { return true }

func (p *groPipe) next() ([]byte, bool) {
	if f := p.pending; f != nil {
		p.pending = nil
		return f, true
	}
	select {
	case f := <-p.in:
		return f, true
	default:
		return nil, false
	}
}

func (p *groPipe) TryRecvSegments(bufs [][]byte, sizes, segs []int) (int, error) {
	select {
	case <-p.done:
		return 0, errClosedPipe
	default:
	}
	k := 0
	for ; k < len(bufs); k++ {
		f, ok := p.next()
		if !ok {
			break
		}
		n := copy(bufs[k], f)
		seg, frames := n, 1
		for {
			g, ok := p.next()
			if !ok {
				break
			}
			if len(g) > seg || n+len(g) > len(bufs[k]) {
				p.pending = g
				break
			}
			n += copy(bufs[k][n:], g)
			frames++
			if len(g) < seg {
				break
			}
		}
		if frames > 1 {
			p.runs.Add(1)
		}
		sizes[k], segs[k] = n, seg
	}
	return k, nil
}

func (p *groPipe) WaitReadable() error {
	for len(p.in) == 0 && p.pending == nil {
		select {
		case <-p.ready:
		case <-p.done:
			return errClosedPipe
		}
	}
	return nil
}

// TestGRORunsCutExactly: runs of equal frames (single frames included)
// reach the bridge frame by frame, with no empty remainder fed as a
// frame of its own.
func TestGRORunsCutExactly(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	gp := &groPipe{pollPipe: b}
	h, g := newRunner(t, quietConfig(bridge.RoleHost), a), newRunner(t, quietConfig(bridge.RoleGPU), gp)
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	const n = 1000
	for i := 0; i < n; {
		burst := make([][]byte, 0, 100)
		for j := 0; j < 100 && i+j < n; j++ {
			burst = append(burst, write(t, i+j))
		}
		k, err := h.SendMany(burst)
		i += k
		if err != nil {
			if !errors.Is(err, bridge.ErrBusy) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitLen(t, &w, n, 20*time.Second)
	if err := g.FrameError(); err != nil || g.Counters().FramesDropped != 0 {
		t.Fatalf("GPU side dropped %d frames (last: %v)", g.Counters().FramesDropped, err)
	}
	if !slices.Equal(w.list(), seq(n)) {
		t.Fatal("writes not delivered once each, in order")
	}
	if gp.runs.Load() == 0 {
		t.Fatal("no run of several frames came coalesced")
	}
}

// TestHoldSendsRunGoroutineSends: under HoldSends, what the runner's own
// goroutine receives (nobody polls) is acknowledged without a SendHeld.
func TestHoldSendsRunGoroutineSends(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	h, g := newRunner(t, quietConfig(bridge.RoleHost), a), newRunner(t, quietConfig(bridge.RoleGPU), b)
	g.HoldSends = true
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	if err := h.Send(write(t, 0)); err != nil {
		t.Fatal(err)
	}
	waitLen(t, &w, 1, 5*time.Second)
	deadline := time.Now().Add(2 * time.Second)
	for h.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("host's write unacknowledged 2s after delivery: the GPU runner's goroutine held its ACK")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPeerMaxPayloadAfterHandshake: the runner reports the peer's largest
// payload once the link is up.
func TestPeerMaxPayloadAfterHandshake(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := quietConfig(role)
		if role == bridge.RoleGPU {
			c.MaxPayload = 512
		}
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	if h.PeerMaxPayload() != 0 {
		t.Fatalf("PeerMaxPayload before any peer: %d", h.PeerMaxPayload())
	}
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	if hp, gp := h.PeerMaxPayload(), g.PeerMaxPayload(); hp != 512 || gp != 256 {
		t.Fatalf("PeerMaxPayload: host %d, GPU %d; want 512, 256", hp, gp)
	}
}

// TestTimerKeepsPaceWithAge: the timer is armed for the time left to the
// deadline, not for the deadline's distance from the runner's start: a
// runner that has run a while still sends its keepalives on time.
func TestTimerKeepsPaceWithAge(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := testConfig(role)
		c.Keepalive, c.DeadAfter = 5*time.Millisecond, time.Hour
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	for h.Now() < 400*time.Millisecond {
		time.Sleep(10 * time.Millisecond)
	}
	k0 := h.Counters().KeepalivesSent + g.Counters().KeepalivesSent
	time.Sleep(400 * time.Millisecond)
	if k := h.Counters().KeepalivesSent + g.Counters().KeepalivesSent - k0; k < 10 {
		t.Fatalf("%d keepalives in 400ms with a 5ms keepalive, runners 400ms old", k)
	}
}

// flaky is a pipe whose next send (or the first frame of the next
// batch) fails when failNext is set; it counts frames through.
type flaky struct {
	*pipe
	failNext atomic.Bool
	through  atomic.Int64
}

func (f *flaky) Send(b []byte) error {
	if f.failNext.CompareAndSwap(true, false) {
		return errors.New("flaky: refused")
	}
	f.through.Add(1)
	return f.pipe.Send(b)
}

type flakyBatch struct{ *flaky }

func (f flakyBatch) SendBatch(fs [][]byte) (int, error) {
	for i, b := range fs {
		if err := f.Send(b); err != nil {
			return i, err
		}
	}
	return len(fs), nil
}

// TestSendErrorSendsTheRest: a frame the transport refuses is counted, and
// the frames after it in the same flush still go, over Send and
// SendBatch alike.
func TestSendErrorSendsTheRest(t *testing.T) {
	t.Parallel()
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			t.Parallel()
			a, b := newPipes()
			fa := &flaky{pipe: a}
			var ht driver.Transport = fa
			if batch {
				ht = flakyBatch{fa}
			}
			h, g := newRunner(t, turnConfig(bridge.RoleHost), ht), newRunner(t, turnConfig(bridge.RoleGPU), b)
			startRun(t, h)
			startRun(t, g)
			waitUp(t, h, g)
			tlps := make([][]byte, 60) // two frames
			for i := range tlps {
				tlps[i] = write(t, i)
			}
			f0, t0 := h.Counters().FramesSent, fa.through.Load()
			fa.failNext.Store(true)
			if n, err := h.SendMany(tlps); n != len(tlps) || err != nil {
				t.Fatalf("SendMany: %d, %v", n, err)
			}
			framed, through := h.Counters().FramesSent-f0, fa.through.Load()-t0
			if framed < 2 || through != int64(framed)-1 || h.SendErrors() != 1 {
				t.Fatalf("%d frames built, %d went through, %d send errors; want all but the refused one through, 1 error", framed, through, h.SendErrors())
			}
		})
	}
}

// queuedPair is a host runner with a QueuedSender on a simulation, and a
// GPU runner started when the test says.
type queuedPair struct {
	h, g *driver.Runner
	s    *sim.Sim
	q    *driver.QueuedSender
	w    writes
}

func newQueuedPair(t *testing.T, batch bool, cfg func(bridge.Role) bridge.Config) *queuedPair {
	t.Helper()
	a, b := newPipes()
	p := &queuedPair{s: sim.New(1)}
	p.h, p.g = newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	p.g.OnTLP = p.w.onTLP
	p.q = driver.NewQueuedSender(p.s, p.h)
	p.q.Batch = batch
	startRun(t, p.h)
	return p
}

func (p *queuedPair) up(t *testing.T) {
	t.Helper()
	startRun(t, p.g)
	waitUp(t, p.h, p.g)
}

// TestQueuedSenderRetriesUntilUp: without Batch, a TLP refused while the
// link is down is retried every 20us of simulated time, as long as it
// takes.
func TestQueuedSenderRetriesUntilUp(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, false, quietConfig)
	p.q.SendTLP(write(t, 0))
	p.s.Run(p.s.Now() + 50*time.Microsecond) // retries while down
	if p.q.Backlog() != 100*time.Nanosecond {
		t.Fatalf("backlog %v while down, want the one TLP", p.q.Backlog())
	}
	p.up(t)
	p.s.Run(p.s.Now() + 50*time.Microsecond)
	if p.q.Backlog() != 0 {
		t.Fatalf("backlog %v after retries with the link up", p.q.Backlog())
	}
	waitLen(t, &p.w, 1, 5*time.Second)
}

// TestQueuedSenderKeepsOrder: a TLP sent while others wait is queued
// behind them, even when the bridge would take it.
func TestQueuedSenderKeepsOrder(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, false, quietConfig)
	p.q.SendTLP(write(t, 0))
	p.up(t)
	p.q.SendTLP(write(t, 1))
	p.s.Run(p.s.Now() + 50*time.Microsecond)
	waitLen(t, &p.w, 2, 5*time.Second)
	if got := p.w.list(); !slices.Equal(got, seq(2)) {
		t.Fatalf("delivered %v, want [0 1]", got)
	}
}

// TestQueuedSenderFlushAfterRefusal: once a refused queue has drained, a
// Flush hands the next TLPs over at once, without waiting for progress.
func TestQueuedSenderFlushAfterRefusal(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, true, quietConfig)
	p.q.SendTLP(write(t, 0))
	if !p.q.Flush() {
		t.Fatal("Flush with the link down reported no backlog")
	}
	p.up(t)
	waitfor.Until(t, "queue drained", func() bool { return !p.q.Flush() })
	waitLen(t, &p.w, 1, 5*time.Second)
	// Acknowledged: no frame is on its way to signal progress.
	waitfor.Until(t, "write acknowledged", func() bool { return p.h.Pending() == 0 })
	for {
		select {
		case <-p.h.Progress:
			continue
		default:
		}
		break
	}
	p.q.SendTLP(write(t, 1))
	if p.q.Flush() {
		t.Fatal("Flush kept a TLP the bridge would take, waiting for progress")
	}
	waitLen(t, &p.w, 2, 5*time.Second)
}

// returnsWithin runs f and fails the test if it has not returned in d.
func returnsWithin[T any](t *testing.T, d time.Duration, what string, f func() T) T {
	t.Helper()
	c := make(chan T, 1)
	go func() { c <- f() }()
	select {
	case v := <-c:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

// TestQueuedSenderDropsMalformedHead: a malformed TLP at the head of the
// queue is dropped and the rest go.
func TestQueuedSenderDropsMalformedHead(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, true, quietConfig)
	p.up(t)
	p.q.SendTLP(malformed)
	p.q.SendTLP(write(t, 0))
	if returnsWithin(t, 5*time.Second, "Flush", p.q.Flush) {
		t.Fatal("Flush left a backlog")
	}
	waitLen(t, &p.w, 1, 5*time.Second)
}

// TestQueuedSenderFlushWhileDown: Flush returns (with a backlog) while
// the link is not up.
func TestQueuedSenderFlushWhileDown(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, true, quietConfig)
	p.q.SendTLP(write(t, 0))
	if !returnsWithin(t, 5*time.Second, "Flush", p.q.Flush) {
		t.Fatal("Flush with the link down reported no backlog")
	}
}

// TestQueuedSenderPushKeepsQueue: a TLP queued after the bridge took part
// of the queue goes behind the rest, which stays.
func TestQueuedSenderPushKeepsQueue(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := quietConfig(role)
		c.TxQueue = 8
		if role == bridge.RoleGPU {
			c.Credits[tlp.Posted] = bridge.ClassCredits{Headers: 4, Data: 4 * 64 / 16}
		}
		return c
	}
	p := newQueuedPair(t, true, cfg)
	p.g.ManualRelease = true // set before Run: never releases
	p.up(t)
	const n = 30
	for i := range n {
		p.q.SendTLP(write(t, i))
	}
	if !p.q.Flush() {
		t.Fatal("the bridge took all 30 writes on 4 credits")
	}
	left := p.q.Backlog()
	if left == 0 || left >= n*100*time.Nanosecond {
		t.Fatalf("backlog %v: want part of the queue taken", left)
	}
	p.q.SendTLP(write(t, n))
	if got := p.q.Backlog(); got != left+100*time.Nanosecond {
		t.Fatalf("backlog %v after one more TLP, want %v", got, left+100*time.Nanosecond)
	}
}

// TestTLPQueueRecyclesBuffers: once warm, pushing and serving allocate
// nothing per TLP.
func TestTLPQueueRecyclesBuffers(t *testing.T) {
	q := driver.NewTLPQueue()
	v := tlp.View(write(t, 0))
	errStop := errors.New("stop")
	const per = 32
	served := 0
	serve := func([]byte) error {
		served++
		if served == per {
			return errStop
		}
		return nil
	}
	ctx := context.Background()
	round := func() {
		for range per {
			q.Push(v)
		}
		served = 0
		if err := q.Serve(ctx, serve); err != errStop {
			t.Fatalf("Serve: %v", err)
		}
	}
	round()
	if allocs := testing.AllocsPerRun(20, round); allocs >= per/2 {
		t.Fatalf("%v allocations per %d TLPs pushed and served", allocs, per)
	}
}

// TestSendWaitWaitsForLink: SendWait before the link is up waits for it.
func TestSendWaitWaitsForLink(t *testing.T) {
	t.Parallel()
	a, b := newPipes()
	h, g := newRunner(t, quietConfig(bridge.RoleHost), a), newRunner(t, quietConfig(bridge.RoleGPU), b)
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- driver.SendWait(ctx, h, write(t, 0)) }()
	time.Sleep(20 * time.Millisecond)
	startRun(t, g)
	if err := <-errc; err != nil {
		t.Fatalf("SendWait: %v", err)
	}
	waitLen(t, &w, 1, 5*time.Second)
}

// TestSendWaitStopsWithContext: a SendWait refused until its context
// ends returns then, with the refusal.
func TestSendWaitStopsWithContext(t *testing.T) {
	t.Parallel()
	_, b := newPipes()
	h := newRunner(t, quietConfig(bridge.RoleHost), b)
	startRun(t, h)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := returnsWithin(t, 5*time.Second, "SendWait", func() error { return driver.SendWait(ctx, h, write(t, 0)) })
	if !errors.Is(err, bridge.ErrNotUp) {
		t.Fatalf("SendWait: %v, want the ErrNotUp it waited on", err)
	}
}

// TestSendManyWaitSendsEachOnce: SendManyWait over a bridge that takes a
// few at a time sends every TLP once.
func TestSendManyWaitSendsEachOnce(t *testing.T) {
	t.Parallel()
	cfg := func(role bridge.Role) bridge.Config {
		c := quietConfig(role)
		c.Window, c.TxQueue = 8, 8
		return c
	}
	a, b := newPipes()
	h, g := newRunner(t, cfg(bridge.RoleHost), a), newRunner(t, cfg(bridge.RoleGPU), b)
	var w writes
	g.OnTLP = w.onTLP
	startRun(t, h)
	startRun(t, g)
	waitUp(t, h, g)
	const n = 200
	tlps := make([][]byte, n)
	for i := range tlps {
		tlps[i] = write(t, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := driver.SendManyWait(ctx, h, tlps); err != nil {
		t.Fatal(err)
	}
	waitLen(t, &w, n, 10*time.Second)
	time.Sleep(10 * time.Millisecond)
	if got := w.list(); !slices.Equal(got, seq(n)) {
		t.Fatalf("delivered %d writes, not each once in order (first %v)", len(got), got[:min(len(got), 20)])
	}
}

// TestFaultyReorderWaitsDelayToo: by default a frame held back for
// reordering waits the delay before it enters the delay line.
func TestFaultyReorderWaitsDelayToo(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	const delay = 30 * time.Millisecond
	f := driver.NewFaulty(rec, memlink.Faults{Reorder: 1, Delay: delay}, 1)
	defer f.Close()
	start := time.Now()
	f.Send([]byte("only"))
	waitfor.Until(t, "the frame through", func() bool { got, _ := rec.snapshot(); return len(got) == 1 })
	if took := time.Since(start); took < 2*delay-5*time.Millisecond {
		t.Fatalf("a lone reordered frame arrived after %v, want the hold (delay + 20us) and the delay, %v", took, 2*delay)
	}
}

// TestFaultyBatchErrorSendsRest: a frame the wrapped batch sender refuses
// is skipped, the ones after it still go.
func TestFaultyBatchErrorSendsRest(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: 1}
	f := driver.NewFaulty(rec, memlink.Faults{}, 1)
	defer f.Close()
	var frames [][]byte
	for i := range 6 {
		frames = append(frames, []byte(fmt.Sprintf("frame %d", i)))
	}
	f.SendBatch(frames)
	got, _ := rec.snapshot()
	want := []string{"frame 0", "frame 2", "frame 4"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q (each call's second frame refused)", got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// TestFaultyReorderLosesNothing: with every frame picked for reordering,
// frames go out pairwise swapped, none lost.
func TestFaultyReorderLosesNothing(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{Reorder: 1, ReorderDelay: 5 * time.Millisecond}, 1)
	defer f.Close()
	for i := range 6 {
		f.Send([]byte{byte(i)})
	}
	time.Sleep(30 * time.Millisecond)
	got, _ := rec.snapshot()
	var order []byte
	for _, g := range got {
		order = append(order, g[0])
	}
	if !bytes.Equal(order, []byte{1, 0, 3, 2, 5, 4}) {
		t.Fatalf("frames out %v, want [1 0 3 2 5 4]", order)
	}
}

// TestFaultyBandwidthSerializes: at 8 Mbit/s ten 1000-byte frames take
// 10ms to leave, one after the other.
func TestFaultyBandwidthSerializes(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{Bandwidth: 8e6}, 1)
	defer f.Close()
	frames := make([][]byte, 10)
	for i := range frames {
		frames[i] = make([]byte, 1000)
	}
	start := time.Now()
	f.SendBatch(frames)
	waitfor.Until(t, "all frames through", func() bool { got, _ := rec.snapshot(); return len(got) == 10 })
	if took := time.Since(start); took < 9*time.Millisecond {
		t.Fatalf("10 kB at 8 Mbit/s through in %v, want at least 10ms", took)
	}
}

// TestFaultyClosedSendsNothing: after Close, frames go nowhere.
func TestFaultyClosedSendsNothing(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{}, 1)
	f.Close()
	f.Send([]byte("late"))
	f.SendBatch([][]byte{[]byte("later")})
	if got, _ := rec.snapshot(); len(got) != 0 {
		t.Fatalf("%d frames sent after Close", len(got))
	}
}

// TestFaultyDelayLineKeepsLaterFramesBack: a frame that comes due later
// than the one the delay line just sent waits its own delay.
func TestFaultyDelayLineKeepsLaterFramesBack(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	const delay = 30 * time.Millisecond
	f := driver.NewFaulty(rec, memlink.Faults{Delay: delay}, 1)
	defer f.Close()
	f.Send([]byte("first"))
	time.Sleep(delay / 2)
	sent := time.Now()
	f.Send([]byte("second"))
	waitfor.Until(t, "both through", func() bool { got, _ := rec.snapshot(); return len(got) == 2 })
	if took := time.Since(sent); took < delay-3*time.Millisecond {
		t.Fatalf("the second frame took %v, want the %v delay", took, delay)
	}
}

// TestFaultyDownDropsFrames: a link set down drops what is sent, and
// carries frames again once up.
func TestFaultyDownDropsFrames(t *testing.T) {
	t.Parallel()
	rec := &recorder{failAt: -1}
	f := driver.NewFaulty(rec, memlink.Faults{}, 1)
	defer f.Close()
	f.SetDown(true)
	f.Send([]byte("down"))
	if got, _ := rec.snapshot(); len(got) != 0 || f.Stats().DownDrops != 1 {
		t.Fatalf("down: %d frames through, stats %+v", len(got), f.Stats())
	}
	f.SetDown(false)
	f.Send([]byte("up"))
	if got, _ := rec.snapshot(); len(got) != 1 || string(got[0]) != "up" {
		t.Fatalf("up again: got %q", got)
	}
}
