package realtime

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// UDPPath is a fabric path made of two real dxpu bridges (package bridge,
// run by bridge/driver on the wall clock) exchanging frames over UDP on
// loopback, or over the transports Transports opens. It implements
// pcie.Path for a world driven by Clock.
type UDPPath struct {
	Clock *Clock
	// GPUClock, when set, is the clock of the GPU side: the downstream
	// receiver lives in its simulator, and the GPU-side bridge's
	// deliveries, sends, flushes and polls run on it, as a GPU box's
	// bridge runs on the box and not on the host. Its caller drives it
	// (Clock.Run on a goroutine of its own). Nil: both sides on Clock.
	GPUClock *Clock
	PairID   uint32
	// Bridge is the bridge configuration both sides start from.
	Bridge bridge.Config
	// Transports, when set, opens the two bridges' transports (host side
	// first) in place of UDP sockets on loopback: AF_PACKET sockets on
	// veths through a switch, say. The path closes them.
	Transports func() (host, gpu driver.Transport, err error)
	// OnEvent, when set, receives each bridge's events with its role. It
	// runs on the bridge's goroutine with the bridge locked: hand work to
	// Clock.Post, never call back into the path.
	OnEvent func(role bridge.Role, e bridge.Event)
	// OnFail, when set, is called once, on a runner's goroutine, when
	// either bridge's runner stops with an error (its socket failed):
	// the path then carries nothing, and a world waiting on it would
	// wait forever unless told (by a surprise removal, say). Hand work
	// to Clock.Post.
	OnFail func(err error)
	// NoBatch hands each TLP to its bridge as the simulation sends it.
	// By default what each moment of the simulation sends is queued and
	// handed over after it, in as few frames as fit (see
	// driver.QueuedSender.Batch): several times the copy bandwidth.
	NoBatch bool
	// NoBusyPoll leaves receiving to the runners' goroutines. By default
	// the clock polls both runners while it spins (Clock.AddPoller): a
	// frame that arrives while the world waits for it is taken by the
	// waiting goroutine, without waking another.
	NoBusyPoll bool
	// UpWithin bounds Connect's wait for the handshake (default 2s).
	UpWithin time.Duration

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	runners [2]*driver.Runner
	mu      sync.Mutex
	err     error
}

// Connect implements pcie.Path. Errors (sockets, configuration) are kept
// for Err; the path then drops everything.
func (p *UDPPath) Connect(upstream, downstream pcie.Receiver) (down, up pcie.Sender) {
	if err := p.start(upstream, downstream); err != nil {
		p.setErr(err)
		return dropSender{}, dropSender{}
	}
	// Like link training before presence detect: the pair finishes its
	// handshake before the port reports a device.
	within := p.UpWithin
	if within <= 0 {
		within = 2 * time.Second
	}
	deadline := time.Now().Add(within)
	for !p.Up() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	if !p.Up() {
		p.setErr(fmt.Errorf("realtime: bridge pair %d did not come up within %s", p.PairID, sim.FormatDuration(within)))
	}
	return p.sender(p.Clock, p.runners[0]), p.sender(p.clock(bridge.RoleGPU), p.runners[1])
}

// clock returns the clock the side of role runs on.
func (p *UDPPath) clock(role bridge.Role) *Clock {
	if role == bridge.RoleGPU && p.GPUClock != nil {
		return p.GPUClock
	}
	return p.Clock
}

// sender returns the sender to r in c's simulation: unless NoBatch, one c
// flushes after each moment of the simulation, so that what a moment
// produced leaves in as few frames as fit.
func (p *UDPPath) sender(c *Clock, r *driver.Runner) pcie.Sender {
	q := driver.NewQueuedSender(c.S, r)
	if !p.NoBatch {
		q.Batch = true
		c.AddFlusher(q.Flush)
	}
	return q
}

// setErr keeps err unless an error came first; it reports whether err
// was the first.
func (p *UDPPath) setErr(err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		p.err = err
		return true
	}
	return false
}

// Err returns the first error of the path (set-up or transport).
func (p *UDPPath) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// loopback opens the two UDP sockets on 127.0.0.1, each towards the other.
func loopback() (host, gpu driver.Transport, err error) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	hc, err := udp.Listen(lo, netip.AddrPort{})
	if err != nil {
		return nil, nil, fmt.Errorf("realtime: host-side socket: %w", err)
	}
	gc, err := udp.Listen(lo, hc.LocalAddr())
	if err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("realtime: GPU-side socket: %w", err)
	}
	hc.SetPeer(gc.LocalAddr())
	return hc, gc, nil
}

func (p *UDPPath) start(upstream, downstream pcie.Receiver) error {
	open := p.Transports
	if open == nil {
		open = loopback
	}
	hc, gc, err := open()
	if err != nil {
		return err
	}
	var bridges [2]*bridge.Bridge
	for i, role := range []bridge.Role{bridge.RoleHost, bridge.RoleGPU} {
		cfg := p.Bridge
		cfg.Role, cfg.PairID = role, p.PairID
		if cfg.TagBits == 0 {
			cfg.TagBits = 10
		}
		// A shared, loaded machine can stall a goroutine for tens of
		// milliseconds: timers sized for a dedicated NIC would declare
		// the link dead. Unless configured, allow for it.
		if cfg.DeadAfter == 0 {
			cfg.Keepalive, cfg.DeadAfter = 100*time.Millisecond, 5*time.Second
		}
		if cfg.CompletionTimeout == 0 {
			cfg.CompletionTimeout = 5 * time.Second
		}
		if cfg.MaxRTO == 0 {
			cfg.MaxRTO = time.Second
		}
		if bridges[i], err = bridge.New(cfg); err != nil {
			hc.Close()
			gc.Close()
			return fmt.Errorf("realtime: %v bridge: %w", role, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for i, t := range []driver.Transport{hc, gc} {
		r := driver.New(bridges[i], t)
		role := []bridge.Role{bridge.RoleHost, bridge.RoleGPU}[i]
		dst := []pcie.Receiver{upstream, downstream}[i]
		clk := p.clock(role)
		r.OnTLP = func(v tlp.View) { clk.PostTLP(dst, v) }
		if !p.NoBatch {
			// The clock's poll runs with the world held: its TLPs go
			// straight in. (Batched senders only queue, so the
			// simulation does not call back into the locked runner.)
			r.OnPolledTLP = func(v tlp.View) { clk.deliverPolled(dst, v) }
		}
		if p.OnEvent != nil {
			r.OnEvent = func(e bridge.Event) { p.OnEvent(role, e) }
		}
		// Framing and sending wait for the end of the clock's step:
		// one sendmmsg per runner and step, acks on the data.
		r.HoldSends = true
		clk.AddSender(r.SendHeld)
		p.runners[i] = r
		if !p.NoBusyPoll {
			clk.AddPoller(r.Poll, r.PollIdle)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("realtime: %v bridge of pair %d stopped: %w", role, p.PairID, err)
				if p.setErr(err) && p.OnFail != nil {
					p.OnFail(err)
				}
			}
		}()
	}
	return nil
}

// Runner returns the runner of the bridge with the given role (nil before
// Connect): its State and Counters are safe to read from any goroutine.
func (p *UDPPath) Runner(role bridge.Role) *driver.Runner {
	if role == bridge.RoleGPU {
		return p.runners[1]
	}
	return p.runners[0]
}

// Up reports whether both bridges finished their handshake.
func (p *UDPPath) Up() bool {
	return p.runners[0] != nil && p.runners[0].State() == bridge.StateUp && p.runners[1].State() == bridge.StateUp
}

// Close stops both bridges and their sockets.
func (p *UDPPath) Close() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
}

// deliverPolled hands v, which the clock's own poll received, to dst at
// once, without the copy and lock of PostTLP; unless something posted
// earlier (by the runner's goroutine, before the clock polled) still waits
// in the inbox: v must not overtake it. Called with the world held.
func (c *Clock) deliverPolled(dst pcie.Receiver, v tlp.View) {
	if c.posted.Load() != 0 {
		c.PostTLP(dst, v)
		return
	}
	dst.ReceiveTLP(v)
}

type dropSender struct{}

func (dropSender) SendTLP(tlp.View)       {}
func (dropSender) Backlog() time.Duration { return 0 }
