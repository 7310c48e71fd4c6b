package driver_test

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/tlp"
)

// pollPipe is a pipe that is also a driver.Poller, shaped like a socket:
// WaitReadable reports a queued frame without taking it (the peer's Send
// signals ready), and TryRecvBatch takes what is queued.
type pollPipe struct {
	*pipe
	ready, peerReady chan struct{}
	waiting          atomic.Int32 // goroutines in WaitReadable
	waits            atomic.Int64 // WaitReadable calls
}

func newPollPipes() (*pollPipe, *pollPipe) {
	a, b := newPipes()
	ra, rb := make(chan struct{}, 1), make(chan struct{}, 1)
	return &pollPipe{pipe: a, ready: ra, peerReady: rb}, &pollPipe{pipe: b, ready: rb, peerReady: ra}
}

// pollRunners returns a host-side and a GPU-side runner, each bridge
// configured by cfg, joined by a fresh pair of poll pipes.
func pollRunners(t *testing.T, cfg func(bridge.Role) bridge.Config) [2]*driver.Runner {
	t.Helper()
	a, b := newPollPipes()
	return pollRunnersOn(t, cfg, a, b)
}

// pollRunnersOn is pollRunners over the pipes a (host side) and b.
func pollRunnersOn(t *testing.T, cfg func(bridge.Role) bridge.Config, a, b *pollPipe) [2]*driver.Runner {
	t.Helper()
	var rs [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		br, err := bridge.New(cfg(role))
		if err != nil {
			t.Fatal(err)
		}
		rs[i] = driver.New(br, []*pollPipe{a, b}[i])
	}
	return rs
}

func (p *pollPipe) Send(f []byte) error {
	err := p.pipe.Send(f)
	select {
	case p.peerReady <- struct{}{}:
	default:
	}
	return err
}

func (p *pollPipe) TryRecvBatch(bufs [][]byte, sizes []int) (int, error) {
	k := 0
	for ; k < len(bufs); k++ {
		select {
		case <-p.done:
			return 0, errClosedPipe
		default:
		}
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

func (p *pollPipe) WaitReadable() error {
	p.waits.Add(1)
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	for len(p.in) == 0 {
		select {
		case <-p.ready:
		case <-p.done:
			return errClosedPipe
		}
	}
	return nil
}

var errClosedPipe = context.Canceled

// Over a Poller transport, Run's loop (take what is queued, else wait)
// delivers every write once and in order.
func TestRunnerDeliversPolled(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	const n = 3000
	got, _ := runPair(t, a, b, n)
	if len(got) != n {
		t.Fatalf("delivered %d, want %d", len(got), n)
	}
	for i, w := range got {
		if w != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, w)
		}
	}
}

// A goroutine calling Poll takes frames while Run's goroutine leaves the
// socket to it; every write arrives once and in order. Once the poller
// calls PollIdle and stops, Run's goroutine receives again: the writes
// sent afterwards arrive too, none of them through Poll.
func TestPollTakesFrames(t *testing.T) {
	t.Parallel()
	rs := pollRunners(t, testConfig)
	if k := rs[1].Poll(); k != 0 {
		t.Fatalf("Poll before Run took %d frames", k)
	}
	var mu sync.Mutex
	var got []uint64
	rs[1].OnTLP = func(v tlp.View) {
		mu.Lock()
		got = append(got, binary.BigEndian.Uint64(v.Payload()))
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	const n = 2000
	data := make([]byte, 64)
	next := 0
	send := func(upTo int) {
		w := waitfor.NewWatch(t, "sending")
		for next < upTo {
			binary.BigEndian.PutUint64(data, uint64(next))
			p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(next)*64, Data: data}
			buf, _ := p.AppendTo(nil)
			if err := rs[0].Send(buf); err != nil {
				w.Wait(rs[1].Counters().TLPsDelivered)
				continue
			}
			next++
		}
		waitfor.Progress(t, "delivering", func() (bool, uint64) {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == upTo, uint64(len(got))
		})
	}
	var polled atomic.Int64
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				rs[1].PollIdle()
				return
			default:
			}
			polled.Add(int64(rs[1].Poll()))
		}
	}()
	send(n)
	close(stop)
	<-stopped
	if polled.Load() == 0 {
		t.Fatal("Poll never took a frame")
	}
	before := rs[1].Polled()
	send(2 * n)
	if after := rs[1].Polled(); after != before {
		t.Fatalf("Poll took %d frames after it stopped", after-before)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, v)
		}
	}
	t.Logf("Poll took %d frames", polled.Load())
}

// While a loop polls a runner, its Polls serve the bridge's deadline (the
// runner's timer is not re-armed meanwhile): with its peer gone silent the
// host keeps sending keepalives. After PollIdle the timer serves it
// again, with nobody polling and no frame coming in to re-arm it.
func TestPollServesDeadline(t *testing.T) {
	t.Parallel()
	rs := pollRunners(t, func(role bridge.Role) bridge.Config {
		c := testConfig(role)
		c.Keepalive, c.DeadAfter = time.Millisecond, time.Hour
		return c
	})
	ctx, cancel := context.WithCancel(context.Background())
	gctx, gcancel := context.WithCancel(ctx)
	var wg, gwg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = rs[0].Run(ctx) }()
	gwg.Add(1)
	go func() { defer gwg.Done(); _ = rs[1].Run(gctx) }()
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	gcancel()
	gwg.Wait()
	keepalives := func() uint64 { return rs[0].Counters().KeepalivesSent }
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				rs[0].PollIdle()
				return
			default:
			}
			rs[0].Poll()
		}
	}()
	// More than the one a timer armed before the polls began could send.
	k0 := keepalives()
	waitfor.Progress(t, "keepalives while polled", func() (bool, uint64) { k := keepalives(); return k >= k0+5, k })
	close(stop)
	<-stopped
	k1 := keepalives()
	waitfor.Progress(t, "keepalives after PollIdle", func() (bool, uint64) { k := keepalives(); return k >= k1+5, k })
}

// slowClose is a pollPipe whose Close waits for the test's word.
type slowClose struct {
	*pollPipe
	closing, release chan struct{}
}

func (p *slowClose) Close() error {
	close(p.closing)
	<-p.release
	return p.pollPipe.Close()
}

// Run returns only once its transport is closed, also when a loop polls
// it (Run's goroutine then waits for ctx, not for a failed receive): a
// caller that binds the same address next finds it free.
func TestRunReturnsAfterClose(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	tr := &slowClose{a, make(chan struct{}), make(chan struct{})}
	br, err := bridge.New(testConfig(bridge.RoleHost))
	if err != nil {
		t.Fatal(err)
	}
	r := driver.New(br, tr)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	// Run's goroutine waits on the transport. Once a Poll ran, the next
	// frame sends it from the socket to wait for ctx. (Polls before it
	// first waits would send it to wait for ctx at once, and the stray
	// frame below would wait for a Poll.)
	waitfor.Until(t, "Run waits on its transport", func() bool { return a.waiting.Load() > 0 })
	for range 100 {
		r.Poll()
		runtime.Gosched()
	}
	if err := b.Send([]byte("stray")); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "Run's goroutine took the stray frame", func() bool { return len(a.in) == 0 })
	for range 100 {
		runtime.Gosched()
	}
	cancel()
	<-tr.closing
	// A Run that does not wait for the close returns within microseconds;
	// on a loaded machine a late one only lets this check pass.
	select {
	case <-ran:
		t.Fatal("Run returned while its transport was still closing")
	case <-time.After(100 * time.Millisecond):
	}
	close(tr.release)
	<-ran
}

// A socket that fails while a loop polls the runner, and keeps polling (a
// GPU box's clock never stops), is reported all the same: Poll hands the
// socket back and Run returns the receive error, for its owner to act on
// (the host's emulated world sees a surprise removal).
func TestPollHandsBackAFailedSocket(t *testing.T) {
	t.Parallel()
	a, b := newPollPipes()
	rs := pollRunnersOn(t, testConfig, a, b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// The host's pipe too: its runner, sending to a peer that no longer
	// reads, would block on the full pipe.
	defer func() { cancel(); a.pipe.Close(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); _ = rs[0].Run(ctx) }()
	ran := make(chan error, 1)
	go func() { ran <- rs[1].Run(ctx) }()
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			rs[1].Poll()
			runtime.Gosched()
		}
	}()
	defer close(stop)
	waitfor.Until(t, "the loop polling", func() bool { return b.waiting.Load() == 0 })
	b.pipe.Close()
	var err error
	waitfor.Until(t, "Run returning while the loop polls on", func() bool {
		select {
		case err = <-ran:
			return true
		default:
			return false
		}
	})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run returned %v, want the receive error", err)
	}
}

// TestPolledCountsPolledFrames: Polled adds up what Poll returned; a
// Polled that counted calls, or nothing, fails it.
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

// runUp runs rs until stop (also at the test's end: stop is idempotent)
// and waits for both links up; ctx ends at stop.
func runUp(t *testing.T, rs [2]*driver.Runner) (ctx context.Context, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	return ctx, stop
}
