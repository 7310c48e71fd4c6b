package driver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// pipe is an in-memory transport: frames sent on one end come out of the
// other. batch adds SendBatch and RecvBatch; calls counts SendBatch calls.
type pipe struct {
	out, in chan []byte
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	calls   int
}

func newPipes() (*pipe, *pipe) {
	a, b := make(chan []byte, 1<<14), make(chan []byte, 1<<14)
	return &pipe{out: a, in: b, done: make(chan struct{})}, &pipe{out: b, in: a, done: make(chan struct{})}
}

func (p *pipe) Send(f []byte) error {
	select {
	case p.out <- append([]byte(nil), f...):
		return nil
	case <-p.done:
		return net.ErrClosed
	}
}

func (p *pipe) Recv(buf []byte) (int, error) {
	select {
	case f := <-p.in:
		return copy(buf, f), nil
	case <-p.done:
		return 0, net.ErrClosed
	}
}

func (p *pipe) Close() error { p.once.Do(func() { close(p.done) }); return nil }

type batchPipe struct{ *pipe }

func (p batchPipe) SendBatch(fs [][]byte) (int, error) {
	p.mu.Lock()
	p.calls++
	p.mu.Unlock()
	for i, f := range fs {
		if err := p.Send(f); err != nil {
			return i, err
		}
	}
	return len(fs), nil
}

func (p batchPipe) RecvBatch(bufs [][]byte, sizes []int) (int, error) {
	n, err := p.Recv(bufs[0])
	if err != nil {
		return 0, err
	}
	sizes[0] = n
	k := 1
	for ; k < len(bufs); k++ {
		select {
		case f := <-p.in:
			sizes[k] = copy(bufs[k], f)
			continue
		default:
		}
		break
	}
	return k, nil
}

const base = 0x10_0000_0000

func testConfig(role bridge.Role) bridge.Config {
	c := bridge.Config{Role: role, Seed: uint64(role) + 1, MTU: 4000, MaxPayload: 256, Window: 256, TxQueue: 64,
		MinRTO: 2 * time.Millisecond, InitialRTO: 5 * time.Millisecond, AckDelay: 20 * time.Microsecond,
		DeadAfter: 5 * time.Second, Keepalive: 10 * time.Millisecond}
	for i := range c.Credits {
		c.Credits[i] = bridge.ClassCredits{Headers: 128, Data: 128 * 256 / 16}
	}
	return c
}

// runPair sends n posted writes from the host runner to the GPU runner
// over the two transports and returns the write numbers in the order they
// arrived, and the two runners.
func runPair(t *testing.T, ht, gt driver.Transport, n int) ([]uint64, [2]*driver.Runner) {
	return runPairConfig(t, ht, gt, n, testConfig)
}

// runPairConfig is runPair with the bridges configured by cfg.
func runPairConfig(t *testing.T, ht, gt driver.Transport, n int, cfg func(bridge.Role) bridge.Config) ([]uint64, [2]*driver.Runner) {
	t.Helper()
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		b, err := bridge.New(cfg(role))
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = driver.New(b, []driver.Transport{ht, gt}[i])
	}
	var mu sync.Mutex
	var got []uint64
	runners[1].OnTLP = func(v tlp.View) {
		pl := v.Payload()
		if v.Kind() != tlp.MWr || len(pl) != 64 || base+binary.BigEndian.Uint64(pl)*64 != v.Address() {
			t.Errorf("bad TLP delivered: %x", []byte(v))
			return
		}
		mu.Lock()
		got = append(got, (v.Address()-base)/64)
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	waitfor.Until(t, "link up", func() bool {
		return runners[0].State() == bridge.StateUp && runners[1].State() == bridge.StateUp
	})
	delivered := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	// Progress: TLPs the GPU side took in and delivered. (Not under mu:
	// OnTLP takes mu with the runner's lock held.)
	progress := func() uint64 {
		c := runners[1].Counters()
		return c.TLPsReceived + c.TLPsDelivered
	}
	w := waitfor.NewWatch(t, fmt.Sprintf("sending %d writes", n))
	data := make([]byte, 64)
	var burst [][]byte
	for i := 0; i < n; {
		burst = burst[:0]
		for j := 0; j < 16 && i+j < n; j++ {
			binary.BigEndian.PutUint64(data, uint64(i+j))
			p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i+j)*64, Data: data}
			b, err := p.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			burst = append(burst, b)
		}
		k, err := runners[0].SendMany(burst)
		i += k
		if err != nil {
			if !errors.Is(err, bridge.ErrBusy) {
				t.Fatal(err)
			}
			w.Wait(progress())
		}
	}
	// Done when all arrived and the host holds nothing unacknowledged;
	// either count moving is progress.
	waitfor.Progress(t, fmt.Sprintf("delivering %d writes", n), func() (bool, uint64) {
		k, pending := delivered(), runners[0].Pending()
		return k >= n && pending == 0, uint64(k)<<32 ^ uint64(pending)
	})
	mu.Lock()
	defer mu.Unlock()
	return append([]uint64(nil), got...), runners
}

// Over plain and batching transports, with and without faults, the runner
// pair delivers every posted write exactly once and in order.
func TestRunnerDelivers(t *testing.T) {
	t.Parallel()
	faults := memlink.Faults{Loss: 0.03, Duplicate: 0.02, Reorder: 0.02, Corrupt: 0.01, Delay: 20 * time.Microsecond}
	for _, c := range []struct {
		name   string
		batch  bool
		faults bool
	}{{"plain", false, false}, {"batch", true, false}, {"plain-faulty", false, true}, {"batch-faulty", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPipes()
			var ht, gt driver.Transport = a, b
			if c.batch {
				ht, gt = batchPipe{a}, batchPipe{b}
			}
			if c.faults {
				ht, gt = driver.NewFaulty(ht, faults, 1), driver.NewFaulty(gt, faults, 2)
			}
			const n = 3000
			got, runners := runPair(t, ht, gt, n)
			if len(got) != n {
				t.Fatalf("delivered %d, want %d", len(got), n)
			}
			for i, a := range got {
				if a != uint64(i) {
					t.Fatalf("delivery %d is write %d", i, a)
				}
			}
			if runners[0].SendErrors() != 0 || runners[1].SendErrors() != 0 {
				t.Fatalf("send errors %d %d", runners[0].SendErrors(), runners[1].SendErrors())
			}
			if c.faults && runners[0].Counters().Retransmits == 0 {
				t.Fatal("3% loss but no retransmission: faults not applied")
			}
			if c.batch && !c.faults && a.calls == 0 {
				t.Fatal("batch transport never got a SendBatch")
			}
		})
	}
}

// recorder keeps what it is sent; failAt makes SendBatch fail on that
// frame of each call.
type recorder struct {
	mu      sync.Mutex
	frames  [][]byte
	batches int
	failAt  int
}

func (r *recorder) Send(f []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, append([]byte(nil), f...))
	return nil
}

func (r *recorder) SendBatch(fs [][]byte) (int, error) {
	r.mu.Lock()
	r.batches++
	r.mu.Unlock()
	for i, f := range fs {
		if i == r.failAt {
			return i, errors.New("refused")
		}
		r.Send(f)
	}
	return len(fs), nil
}

func (r *recorder) Recv([]byte) (int, error) { select {} }
func (r *recorder) Close() error             { return nil }

func (r *recorder) snapshot() ([][]byte, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.frames...), r.batches
}

// Faulty without faults passes a batch through in one call, copies the
// frames (the caller may reuse them at once), and keeps their order, also
// through the delay line.
func TestFaultyBatchPassThrough(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run(fmt.Sprint(delay), func(t *testing.T) {
			t.Parallel()
			rec := &recorder{failAt: -1}
			f := driver.NewFaulty(rec, memlink.Faults{Delay: delay}, 1)
			defer f.Close()
			var frames [][]byte
			for i := 0; i < 40; i++ {
				frames = append(frames, []byte(fmt.Sprintf("frame %d", i)))
			}
			want := make([][]byte, len(frames))
			for i := range frames {
				want[i] = append([]byte(nil), frames[i]...)
			}
			if n, err := f.SendBatch(frames); n != len(frames) || err != nil {
				t.Fatalf("SendBatch: %d, %v", n, err)
			}
			for _, fr := range frames {
				copy(fr, "XXXXX") // the caller reuses its buffers
			}
			var got [][]byte
			var batches int
			waitfor.Progress(t, "frames through the delay line", func() (bool, uint64) {
				got, batches = rec.snapshot()
				return len(got) >= len(want), uint64(len(got))
			})
			if len(got) != len(want) {
				t.Fatalf("got %d frames, want %d", len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("frame %d: %q, want %q", i, got[i], want[i])
				}
			}
			if delay == 0 && batches != 1 {
				t.Fatalf("%d SendBatch calls for one batch", batches)
			}
			if st := f.Stats(); st.Sent != 40 || st.Delivered != 40 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A frame the transport refuses is counted as a send error; one it takes
// is not.
func TestRunnerCountsSendErrors(t *testing.T) {
	t.Parallel()
	for _, failAt := range []int{0, -1} {
		rec := &recorder{failAt: failAt}
		b, err := bridge.New(testConfig(bridge.RoleHost))
		if err != nil {
			t.Fatal(err)
		}
		r := driver.New(b, rec)
		r.Reset() // a flush: the bridge in Init sends its HELLO
		got, batches := rec.snapshot()
		if batches == 0 {
			t.Fatalf("failAt %d: the flush sent nothing", failAt)
		}
		if failAt == 0 && (r.SendErrors() == 0 || len(got) != 0) {
			t.Fatalf("refused: send errors %d, %d frames through", r.SendErrors(), len(got))
		}
		if failAt < 0 && (r.SendErrors() != 0 || len(got) == 0) {
			t.Fatalf("accepted: send errors %d, %d frames through", r.SendErrors(), len(got))
		}
	}
}

// OnDelivered follows every run of TLPs handed to OnTLP, under the same
// lock: a side that queues what OnTLP gave it sends all of it there.
func TestRunnerOnDelivered(t *testing.T) {
	hp, gp := newPipes()
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		b, err := bridge.New(testConfig(role))
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = driver.New(b, []driver.Transport{batchPipe{hp}, batchPipe{gp}}[i])
	}
	var mu sync.Mutex
	var queued, sent, calls int
	runners[1].OnTLP = func(tlp.View) { mu.Lock(); queued++; mu.Unlock() }
	runners[1].OnDelivered = func() {
		mu.Lock()
		defer mu.Unlock()
		if queued == 0 {
			t.Error("OnDelivered without a TLP delivered")
		}
		sent += queued
		queued = 0
		calls++
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	waitfor.Until(t, "link up", func() bool {
		return runners[0].State() == bridge.StateUp && runners[1].State() == bridge.StateUp
	})
	const n = 32
	for i := range n {
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i)*64, Data: make([]byte, 64)}
		b, err := p.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := driver.SendWait(ctx, runners[0], b); err != nil {
			t.Fatal(err)
		}
	}
	// Without the hook the TLPs stay queued and this stalls.
	waitfor.Until(t, "every delivered TLP followed by OnDelivered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return sent == n && queued == 0
	})
	mu.Lock()
	defer mu.Unlock()
	if calls < 1 || calls > n {
		t.Errorf("OnDelivered called %d times for %d TLPs", calls, n)
	}
}

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

// waitLen waits until w holds n deliveries, failing the test once
// deliveries stop coming for waitfor.Stall.
func waitLen(t *testing.T, w *writes, n int) {
	t.Helper()
	waitfor.Progress(t, fmt.Sprintf("%d writes delivered", n), func() (bool, uint64) {
		k := w.len()
		return k >= n, uint64(k)
	})
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

// returnsWithin runs f, which returns at once unless it is stuck, and
// fails the test if it has not returned within waitfor.Stall.
func returnsWithin[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	c := make(chan T, 1)
	go func() { c <- f() }()
	select {
	case v := <-c:
		return v
	case <-time.After(waitfor.Stall):
		t.Fatalf("%s did not return within %v", what, waitfor.Stall)
		panic("unreachable")
	}
}

// TestPeerMaxPayloadAfterHandshake: the runner reports the peer's largest
// payload once the link is up (a runner that never stored it, or stored
// its own, fails it), and 0 before.
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
