package driver_test

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// TestQueuedSenderBatch: with Batch set, TLPs wait for Flush, then leave
// in order, several to a frame; what the bridge refuses (a small window of
// credits) stays queued and goes once the runner reports progress; nothing
// is lost or reordered.
func TestQueuedSenderBatch(t *testing.T) {
	t.Parallel()
	a, b := newPipes()
	var runners [2]*driver.Runner
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		br, err := bridge.New(testConfig(role))
		if err != nil {
			t.Fatal(err)
		}
		runners[i] = driver.New(br, []driver.Transport{batchPipe{a}, batchPipe{b}}[i])
	}
	var mu sync.Mutex
	var got []uint64
	runners[1].OnTLP = func(v tlp.View) {
		mu.Lock()
		got = append(got, binary.BigEndian.Uint64(v.Payload()))
		mu.Unlock()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range runners {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	q := driver.NewQueuedSender(sim.New(1), runners[0])
	q.Batch = true
	const n = 3000
	data := make([]byte, 64)
	for i := range n {
		binary.BigEndian.PutUint64(data, uint64(i))
		p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i)*64, Data: data}
		v, _ := p.AppendTo(nil)
		q.SendTLP(v)
	}
	if q.Backlog() != n*100*time.Nanosecond {
		t.Fatalf("backlog %v before Flush, want %v: SendTLP sent something", q.Backlog(), n*100*time.Nanosecond)
	}
	if c := runners[0].Counters(); c.TLPsFromLocal != 0 {
		t.Fatalf("%d TLPs reached the bridge before Flush", c.TLPsFromLocal)
	}
	// Flush until the queue drains; each pass either moves TLPs or waits
	// for the runner's progress, so no progress for 10s is a failure.
	last, since := q.Backlog(), time.Now()
	for q.Flush() {
		if bl := q.Backlog(); bl != last {
			last, since = bl, time.Now()
		} else if time.Since(since) > 10*time.Second {
			t.Fatalf("queue stuck at %v", bl)
		}
		select {
		case <-time.After(100 * time.Microsecond):
		case <-ctx.Done():
		}
	}
	for seen, since := -1, time.Now(); ; {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k == n {
			break
		}
		if k != seen {
			seen, since = k, time.Now()
		} else if time.Since(since) > 10*time.Second {
			t.Fatalf("delivered %d of %d, nothing more for 10s", k, n)
		}
		select {
		case <-runners[0].Progress:
		case <-time.After(time.Millisecond):
		}
	}
	for i, v := range got {
		if v != uint64(i) {
			t.Fatalf("delivery %d is write %d", i, v)
		}
	}
	c := runners[0].Counters()
	if c.TLPsSent != n || c.FramesSent >= n/4 {
		t.Errorf("%d TLPs in %d frames: want all %d, several to a frame", c.TLPsSent, c.FramesSent, n)
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
// takes: a sender that gave up after some retries, or dropped the TLP,
// fails it.
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
	waitLen(t, &p.w, 1)
}

// TestQueuedSenderKeepsOrder: a TLP sent while others wait is queued
// behind them, even when the bridge would take it; one handed to the
// bridge ahead of the queue fails it.
func TestQueuedSenderKeepsOrder(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, false, quietConfig)
	p.q.SendTLP(write(t, 0))
	p.up(t)
	p.q.SendTLP(write(t, 1))
	p.s.Run(p.s.Now() + 50*time.Microsecond)
	waitLen(t, &p.w, 2)
	if got := p.w.list(); !slices.Equal(got, seq(2)) {
		t.Fatalf("delivered %v, want [0 1]", got)
	}
}

// TestQueuedSenderFlushAfterRefusal: once a refused queue has drained, a
// Flush hands the next TLPs over at once, without waiting for progress:
// a sender still marked refused, waiting for a progress signal that no
// frame is on its way to give, fails it.
func TestQueuedSenderFlushAfterRefusal(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, true, quietConfig)
	p.q.SendTLP(write(t, 0))
	if !p.q.Flush() {
		t.Fatal("Flush with the link down reported no backlog")
	}
	p.up(t)
	waitfor.Until(t, "queue drained", func() bool { return !p.q.Flush() })
	waitLen(t, &p.w, 1)
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
	waitLen(t, &p.w, 2)
}

// TestQueuedSenderDropsMalformedHead: a malformed TLP at the head of the
// queue is dropped and the rest go: a Flush that retried it for ever, or
// kept it, fails it.
func TestQueuedSenderDropsMalformedHead(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, true, quietConfig)
	p.up(t)
	p.q.SendTLP(malformed)
	p.q.SendTLP(write(t, 0))
	if returnsWithin(t, "Flush", p.q.Flush) {
		t.Fatal("Flush left a backlog")
	}
	waitLen(t, &p.w, 1)
}

// TestQueuedSenderFlushWhileDown: Flush returns (with a backlog) while
// the link is not up, instead of waiting for it.
func TestQueuedSenderFlushWhileDown(t *testing.T) {
	t.Parallel()
	p := newQueuedPair(t, true, quietConfig)
	p.q.SendTLP(write(t, 0))
	if !returnsWithin(t, "Flush", p.q.Flush) {
		t.Fatal("Flush with the link down reported no backlog")
	}
}

// TestQueuedSenderPushKeepsQueue: a TLP queued after the bridge took part
// of the queue goes behind the rest, which stays: a queue that lost or
// counted twice what the bridge left fails it.
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
