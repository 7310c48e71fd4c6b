package driver_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/internal/waitfor"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// pollOnly is a pollPipe whose frames only Poll takes: WaitReadable
// blocks until the pipe closes, so the runner's own goroutine, once it
// waits there, never receives. It sends in batches, as UDP does.
// wire counts the frames that went out, kinds them by kind.
type pollOnly struct {
	*pollPipe
	waiting atomic.Bool
	wire    atomic.Uint64
	mu      sync.Mutex
	kinds   frameKinds
}

// frameKinds counts frames by message type: TLP frames, bare ACKs and
// credit updates, and control frames by their type.
type frameKinds struct {
	tlp, ack, credit, other uint64
	control                 [encap.CtlReset + 1]uint64
}

func (k frameKinds) sub(o frameKinds) frameKinds {
	k.tlp, k.ack, k.credit, k.other = k.tlp-o.tlp, k.ack-o.ack, k.credit-o.credit, k.other-o.other
	for i := range k.control {
		k.control[i] -= o.control[i]
	}
	return k
}

// controls sums the control frames.
func (k frameKinds) controls() uint64 {
	var n uint64
	for _, c := range k.control {
		n += c
	}
	return n
}

func (k frameKinds) String() string {
	s := fmt.Sprintf("%d TLP, %d ACK, %d CREDIT", k.tlp, k.ack, k.credit)
	for t, c := range k.control {
		if c != 0 {
			s += fmt.Sprintf(", %d %v", c, encap.ControlType(t))
		}
	}
	if k.other != 0 {
		s += fmt.Sprintf(", %d other", k.other)
	}
	return s
}

func (p *pollOnly) Send(f []byte) error {
	p.wire.Add(1)
	p.mu.Lock()
	p.kinds.count(f)
	p.mu.Unlock()
	return p.pollPipe.Send(f)
}

func (k *frameKinds) count(f []byte) {
	h, _, err := encap.ParseHeader(f)
	if err != nil {
		k.other++
		return
	}
	switch h.Type() {
	case encap.MsgTLP:
		k.tlp++
	case encap.MsgAck:
		k.ack++
	case encap.MsgCredit:
		k.credit++
	case encap.MsgControl:
		c, err := encap.ParseControl(h[encap.HeaderLen:])
		if err != nil || int(c.Type) >= len(k.control) {
			k.other++
			return
		}
		k.control[c.Type]++
	default:
		k.other++
	}
}

// Kinds returns the counts so far.
func (p *pollOnly) Kinds() frameKinds {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kinds
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
	return newHeldPairConfig(t, hold, quietConfig)
}

// newHeldPairConfig is newHeldPair with the bridges configured by cfg.
func newHeldPairConfig(t *testing.T, hold bool, cfg func(bridge.Role) bridge.Config) *heldPair {
	t.Helper()
	a, b := newPollPipes()
	hb, err := bridge.New(cfg(bridge.RoleHost))
	if err != nil {
		t.Fatal(err)
	}
	gb, err := bridge.New(cfg(bridge.RoleGPU))
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
	// The handshake's last frames (a HELLO repeated before the HELLO-ACK
	// came, and the HELLO-ACK answering it, which carries an ack) reach
	// the other side before a test counts: each side took every frame
	// the other sent.
	waitfor.Until(t, "handshake frames all taken", func() bool {
		p.gpu.Poll()
		p.gpu.SendHeld()
		h, g := p.host.Counters(), p.gpu.Counters()
		return h.FramesReceived+h.FramesDropped == g.FramesSent && g.FramesReceived+g.FramesDropped == h.FramesSent
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

// turnConfig is quietConfig with every timer that sends a frame of its
// own out of a test's reach: no retransmission timeout (its KEEPALIVE
// probe, and the peer's KEEPALIVE-ACK to its own), no delayed ACK or
// credit update. On a loaded machine (the race detector, CPU hogs) a
// turn outlasts the 2 ms RTO and AckDelay's 20 us often, and those
// frames went out beside the turn's: a test of what a turn sends counts
// them by the clock, not by the code. The link then acknowledges by
// piggybacking and at every second frame only, which is all a turn
// needs.
func turnConfig(role bridge.Role) bridge.Config {
	c := quietConfig(role)
	c.MinRTO, c.InitialRTO, c.MaxRTO = time.Hour, time.Hour, time.Hour
	c.AckDelay = time.Hour
	return c
}

// With HoldSends, what a Poll received and what a batching QueuedSender
// handed over in the same turn leave together at SendHeld: the
// acknowledgement that two received frames call for rides on the data
// frame instead of going out alone at the Poll. Without it, each Poll
// sends a bare ACK and each Flush a data frame of its own. The frames
// are counted by kind, exactly, with the timers out of reach
// (turnConfig) and the handshake over (newHeldPair).
func TestHoldSendsPacksTurn(t *testing.T) {
	t.Parallel()
	const turns = 50
	for _, c := range []struct {
		hold bool
		// per turn, the GPU side's TLP frames and bare ACKs, in all
		// and before SendHeld
		tlp, acks, earlyTLP, earlyAcks uint64
	}{
		{hold: true, tlp: 1, acks: 0, earlyTLP: 0, earlyAcks: 0},
		{hold: false, tlp: 1, acks: 1, earlyTLP: 1, earlyAcks: 1},
	} {
		t.Run(map[bool]string{true: "hold", false: "no-hold"}[c.hold], func(t *testing.T) {
			t.Parallel()
			p := newHeldPairConfig(t, c.hold, turnConfig)
			q := driver.NewQueuedSender(sim.New(1), p.gpu)
			q.Batch = true
			g0, k0, h0 := p.gpu.Counters(), p.gpuPipe.Kinds(), p.host.Counters().TLPsDelivered
			var early frameKinds
			for turn := range turns {
				k := p.gpuPipe.Kinds()
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
				e := p.gpuPipe.Kinds().sub(k)
				early.tlp, early.ack = early.tlp+e.tlp, early.ack+e.ack
				p.gpu.SendHeld()
			}
			all := p.gpuPipe.Kinds().sub(k0)
			tlps := p.gpu.Counters().TLPsSent - g0.TLPsSent
			t.Logf("%d turns: %v (before SendHeld: %d TLP, %d ACK), %d TLPs", turns, all, early.tlp, early.ack, tlps)
			if tlps != turns {
				t.Fatalf("%d TLPs sent, want %d", tlps, turns)
			}
			if all.tlp != c.tlp*turns || all.ack != c.acks*turns || all.credit != 0 {
				t.Errorf("%d turns: %d TLP frames, %d bare ACKs, %d credit updates; want %d, %d, 0", turns, all.tlp, all.ack, all.credit, c.tlp*turns, c.acks*turns)
			}
			if early.tlp != c.earlyTLP*turns || early.ack != c.earlyAcks*turns {
				t.Errorf("%d turns: before SendHeld %d TLP frames, %d bare ACKs; want %d, %d", turns, early.tlp, early.ack, c.earlyTLP*turns, c.earlyAcks*turns)
			}
			if all.controls() != 0 || all.other != 0 {
				t.Errorf("%d control frames, %d unparsed, with no timer due: %v", all.controls(), all.other, all)
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

// The runner's timer, armed while no loop polled (PollIdle arms it for
// the delayed ACK of a frame a Poll took), comes due while a loop polls
// again: the loop serves the deadline, and under HoldSends the owed ACK
// leaves at its SendHeld, not from the timer's goroutine in the middle of
// the loop's turn. In a synctest bubble, so that the timer fires exactly
// when the fake clock passes it.
func TestHeldTurnOutlivesTimer(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const ackDelay = time.Millisecond
		p := newHeldPairConfig(t, true, func(r bridge.Role) bridge.Config {
			c := turnConfig(r)
			c.AckDelay = ackDelay
			return c
		})
		want := p.gpu.Counters().TLPsDelivered + 1
		if err := p.host.Send(write(t, 0)); err != nil {
			t.Fatal(err)
		}
		if n := p.gpu.Poll(); n != 1 || p.gpu.Counters().TLPsDelivered != want {
			t.Fatalf("Poll took %d frames, delivered %d TLPs; want 1, 1", n, p.gpu.Counters().TLPsDelivered-want+1)
		}
		p.gpu.PollIdle() // the loop sleeps: the timer is armed for the ACK
		synctest.Wait()  // the runner's goroutine waits on the socket again
		p.gpu.Poll()     // the loop polls again; nothing due yet
		k := p.gpuPipe.Kinds()
		time.Sleep(2 * ackDelay)
		synctest.Wait()
		if got := p.gpuPipe.Kinds().sub(k); got != (frameKinds{}) {
			t.Fatalf("while the loop polled, past AckDelay, before SendHeld: %v sent", got)
		}
		p.gpu.SendHeld()
		if got := p.gpuPipe.Kinds().sub(k); got != (frameKinds{ack: 1}) {
			t.Fatalf("SendHeld sent %v, want the owed ACK", got)
		}
	})
}

// SendManyHeld frames only full frames: TLPs handed over a few at a time
// wait in the bridge until they fill a frame, and SendHeld sends the
// part-filled rest (and full frames not sent yet). (Framing at each call sent a part-filled frame per
// call.) The GPU side sends and is not polled, so no acknowledgement of
// its own flushes the rest early.
func TestSendManyHeldSendsFullFrames(t *testing.T) {
	t.Parallel()
	p := newHeldPairConfig(t, false, turnConfig)
	perFrame := (turnConfig(bridge.RoleGPU).MTU - encap.HeaderLen) / (2 + len(write(t, 0)))
	const batch, batches = 5, 20
	n := batch * batches
	if n < 2*perFrame || n%perFrame == 0 {
		t.Fatalf("%d TLPs of %d a frame: the test needs two full frames and a part-filled one", n, perFrame)
	}
	g0, k0, h0 := p.gpu.Counters(), p.gpuPipe.Kinds(), p.host.Counters().TLPsDelivered
	for b := range batches {
		tlps := make([][]byte, batch)
		for i := range tlps {
			tlps[i] = write(t, b*batch+i)
		}
		if k, err := p.gpu.SendManyHeld(tlps); k != batch || err != nil {
			t.Fatalf("batch %d: SendManyHeld took %d, %v", b, k, err)
		}
	}
	// The full frames are built (and sent once a few are ready, to go
	// out in one call); the part-filled rest waits.
	full := uint64(n / perFrame)
	k, sent := p.gpuPipe.Kinds().sub(k0), p.gpu.Counters().TLPsSent-g0.TLPsSent
	if k.tlp > full || sent != full*uint64(perFrame) {
		t.Fatalf("before SendHeld: %d TLPs framed, %d frames sent; want %d in at most %d full frames", sent, k.tlp, full*uint64(perFrame), full)
	}
	p.gpu.SendHeld()
	k, sent = p.gpuPipe.Kinds().sub(k0), p.gpu.Counters().TLPsSent-g0.TLPsSent
	if k.tlp != full+1 || sent != uint64(n) {
		t.Fatalf("after SendHeld: %d TLPs in %d frames, want %d in %d", sent, k.tlp, n, full+1)
	}
	waitfor.Until(t, "host got every write", func() bool { return p.host.Counters().TLPsDelivered == h0+uint64(n) })
}

// TestSendManyFramesWhatItTookBeforeAnError: when a later TLP of the call
// fails, SendMany frames the ones taken before it at once, and
// SendManyHeld leaves them for SendHeld. A SendMany that returned without
// framing what it took (it would sit in the bridge until some other
// flush), or a SendManyHeld that framed nothing either, fails it.
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
// until four are ready, then sends them together: one that sent each full
// frame at once, or waited for more than four, fails it.
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

// TestHoldSendsRunGoroutineSends: under HoldSends, what the runner's own
// goroutine receives (nobody polls, so nobody calls SendHeld) is
// acknowledged at once. A runner that held its own goroutine's flushes
// as it holds a Poll's never acknowledges the write: nothing else arms
// its timer or calls SendHeld, and the wait fails.
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
	waitLen(t, &w, 1)
	waitfor.Until(t, "the host's write acknowledged by the GPU runner's own goroutine", func() bool { return h.Pending() == 0 })
}
