package driver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// pollOnly is a pollPipe whose frames only Poll takes: WaitReadable
// blocks until the pipe closes, so the runner's own goroutine, once it
// waits there, never receives. It sends in batches, as UDP does.
// wire counts the frames that went out.
type pollOnly struct {
	*pollPipe
	waiting atomic.Bool
	wire    atomic.Uint64
}

func (p *pollOnly) Send(f []byte) error {
	p.wire.Add(1)
	return p.pollPipe.Send(f)
}

func (p *pollOnly) SendBatch(fs [][]byte) (int, error) {
	for i, f := range fs {
		if err := p.Send(f); err != nil {
			return i, err
		}
	}
	return len(fs), nil
}

func (p *pollOnly) WaitReadable() error {
	p.waiting.Store(true)
	<-p.done
	return errClosedPipe
}

// quietConfig is testConfig without keepalives, so that the frames a test
// counts are the ones it caused.
func quietConfig(role bridge.Role) bridge.Config {
	c := testConfig(role)
	c.Keepalive, c.DeadAfter = time.Hour, 2*time.Hour
	return c
}

// heldPair is a host runner on its own goroutine and a GPU runner that the
// test polls (as a spinning clock does), with HoldSends as given.
type heldPair struct {
	host, gpu *driver.Runner
	gpuPipe   *pollOnly
}

func newHeldPair(t *testing.T, hold bool) *heldPair {
	t.Helper()
	a, b := newPollPipes()
	hb, err := bridge.New(quietConfig(bridge.RoleHost))
	if err != nil {
		t.Fatal(err)
	}
	gb, err := bridge.New(quietConfig(bridge.RoleGPU))
	if err != nil {
		t.Fatal(err)
	}
	p := &heldPair{host: driver.New(hb, a), gpuPipe: &pollOnly{pollPipe: b}}
	p.gpu = driver.New(gb, p.gpuPipe)
	p.gpu.HoldSends = hold
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, r := range []*driver.Runner{p.host, p.gpu} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	// The GPU runner's goroutine parks in WaitReadable for good before
	// the first Poll (after it, it would wait for PollIdle instead).
	waitfor.Until(t, "GPU runner waiting", p.gpuPipe.waiting.Load)
	waitfor.Until(t, "link up (GPU side polled)", func() bool {
		p.gpu.Poll()
		p.gpu.SendHeld()
		return p.host.State() == bridge.StateUp && p.gpu.State() == bridge.StateUp
	})
	return p
}

func write(t *testing.T, i int) []byte {
	t.Helper()
	p := tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: base + uint64(i)*64, Data: make([]byte, 64)}
	b, err := p.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// With HoldSends, what a Poll received and what a batching QueuedSender
// handed over in the same turn leave together at SendHeld: the
// acknowledgement that two received frames call for rides on the data
// frame instead of going out alone at the Poll. Without it, each Poll
// sends a bare ACK and each Flush a data frame of its own. Counted over
// many turns, so that a stray frame (a HELLO_ACK trailing the handshake,
// the runner's timer firing once after the first Poll) cannot decide it.
func TestHoldSendsPacksTurn(t *testing.T) {
	t.Parallel()
	const turns = 50
	for _, c := range []struct {
		hold bool
		// per turn, the GPU side's frames, those sent before SendHeld,
		// and bare ACKs
		frames, early, acks uint64
	}{
		{hold: true, frames: 1, early: 0, acks: 0},
		{hold: false, frames: 2, early: 2, acks: 1},
	} {
		t.Run(map[bool]string{true: "hold", false: "no-hold"}[c.hold], func(t *testing.T) {
			t.Parallel()
			p := newHeldPair(t, c.hold)
			q := driver.NewQueuedSender(sim.New(1), p.gpu)
			q.Batch = true
			g0, w0, h0 := p.gpu.Counters(), p.gpuPipe.wire.Load(), p.host.Counters().TLPsDelivered
			var early uint64
			for turn := range turns {
				w := p.gpuPipe.wire.Load()
				// Two frames from the host: the GPU side owes an ACK
				// at once.
				for i := range 2 {
					if err := p.host.Send(write(t, 2*turn+i)); err != nil {
						t.Fatal(err)
					}
				}
				want := g0.TLPsDelivered + 2*uint64(turn+1)
				waitfor.Until(t, "GPU side polled the host's writes", func() bool {
					p.gpu.Poll()
					return p.gpu.Counters().TLPsDelivered == want
				})
				q.SendTLP(write(t, 1000+turn))
				if q.Flush() {
					t.Fatal("Flush left the TLP queued")
				}
				early += p.gpuPipe.wire.Load() - w
				p.gpu.SendHeld()
			}
			g := p.gpu.Counters()
			frames, acks, tlps := p.gpuPipe.wire.Load()-w0, g.AcksSent-g0.AcksSent, g.TLPsSent-g0.TLPsSent
			t.Logf("%d turns: %d frames (%d before SendHeld), %d bare ACKs, %d TLPs", turns, frames, early, acks, tlps)
			if tlps != turns {
				t.Fatalf("%d TLPs sent, want %d", tlps, turns)
			}
			// A few strays either way; the two modes stay far apart.
			const slack = turns / 10
			if frames < c.frames*turns || frames > c.frames*turns+slack {
				t.Errorf("%d frames in %d turns, want %d (+%d strays at most)", frames, turns, c.frames*turns, slack)
			}
			if early+slack < c.early*turns || early > c.early*turns+slack {
				t.Errorf("%d frames sent before SendHeld in %d turns, want %d (within %d)", early, turns, c.early*turns, slack)
			}
			if acks+slack < c.acks*turns || acks > c.acks*turns+slack {
				t.Errorf("%d bare ACKs in %d turns, want %d (within %d)", acks, turns, c.acks*turns, slack)
			}
			// Either way the host learns that its writes arrived, and
			// gets the GPU side's.
			waitfor.Until(t, "host's writes acknowledged, GPU's delivered", func() bool {
				return p.host.Pending() == 0 && p.host.Counters().TLPsDelivered == h0+turns
			})
		})
	}
}

// Under HoldSends a batching QueuedSender hands over more TLPs than the
// bridge's queue holds (TxQueue) in one Flush: a full queue is framed to
// make room instead of refusing; SendHeld sends them.
func TestHoldSendsFramesWhenQueueFull(t *testing.T) {
	t.Parallel()
	p := newHeldPair(t, true)
	q := driver.NewQueuedSender(sim.New(1), p.gpu)
	q.Batch = true
	const n = 100 // > TxQueue 64, < 128 posted credits
	if tq := quietConfig(bridge.RoleGPU).TxQueue; tq >= n {
		t.Fatalf("TxQueue %d: the test needs fewer than %d", tq, n)
	}
	g0, w0 := p.gpu.Counters(), p.gpuPipe.wire.Load()
	h0 := p.host.Counters().TLPsDelivered
	for i := range n {
		q.SendTLP(write(t, i))
	}
	if q.Flush() {
		t.Fatalf("Flush left %v of backlog: the full queue was refused, not framed", q.Backlog())
	}
	if g := p.gpu.Counters(); g.TLPsFromLocal-g0.TLPsFromLocal != n {
		t.Fatalf("after Flush: %d TLPs taken, want %d", g.TLPsFromLocal-g0.TLPsFromLocal, n)
	}
	p.gpu.SendHeld()
	if g := p.gpu.Counters(); g.TLPsSent-g0.TLPsSent != n || p.gpuPipe.wire.Load() == w0 {
		t.Fatalf("SendHeld sent %d TLPs in %d frames, want %d", g.TLPsSent-g0.TLPsSent, p.gpuPipe.wire.Load()-w0, n)
	}
	waitfor.Until(t, "host got every write", func() bool { return p.host.Counters().TLPsDelivered == h0+n })
}

// TLPs from frames that Poll took go to OnPolledTLP, on Poll's goroutine;
// the ones the runner's own goroutine received go to OnTLP.
func TestOnPolledTLP(t *testing.T) {
	t.Parallel()
	rs := pollRunners(t, quietConfig)
	var inPoll atomic.Bool
	var polled, plain, strays atomic.Int64
	rs[1].OnPolledTLP = func(tlp.View) {
		polled.Add(1)
		if !inPoll.Load() {
			strays.Add(1)
		}
	}
	rs[1].OnTLP = func(tlp.View) { plain.Add(1) }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, r := range rs {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(ctx) }()
	}
	waitfor.Until(t, "link up", func() bool { return rs[0].State() == bridge.StateUp && rs[1].State() == bridge.StateUp })
	// Nobody polls: the runner's goroutine receives.
	if err := rs[0].Send(write(t, 0)); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, "delivery through OnTLP", func() bool { return plain.Load() == 1 })
	// The test polls until it took one of the next writes itself (the
	// runner's goroutine, still waiting on the socket, may take a few).
	for i := 1; polled.Load() == 0; i++ {
		if i > 1000 {
			t.Fatal("1000 writes delivered while polling, none through OnPolledTLP")
		}
		if err := rs[0].Send(write(t, i)); err != nil {
			t.Fatal(err)
		}
		waitfor.Until(t, "write delivered", func() bool {
			inPoll.Store(true)
			rs[1].Poll()
			inPoll.Store(false)
			return polled.Load()+plain.Load() == int64(i+1)
		})
	}
	rs[1].PollIdle()
	if strays.Load() != 0 {
		t.Fatalf("%d TLPs reached OnPolledTLP outside Poll", strays.Load())
	}
}
