// Package vpair joins a host-side and a GPU-side bridge with two in-memory
// links (bridge/memlink) on the virtual-time simulator (package sim),
// deterministically from a seed, so any run replays exactly: the fabric path
// of the emulator (emu/topo) and of the seeded scenarios (internal/pairsim).
//
// A Pair is the path host side -> host bridge -> link -> GPU bridge -> GPU
// side and back. Put PCIe models at both ends:
//
//	s := sim.New(seed)
//	p, err := vpair.NewPair(s, vpair.PairConfig{Delay: 2 * time.Microsecond, Bandwidth: 100e9})
//	p.Host.OnTLP = func(t tlp.View) { rootComplex.Receive(t) } // TLPs from the GPU side
//	p.GPU.OnTLP = func(t tlp.View) { gpu.Receive(t) }          // TLPs from the host side
//	p.Host.Send(mrd)                                          // a TLP from the root complex
//	s.Run(-1)
//
// Credits return when OnTLP returns, unless Side.ManualRelease is set; then
// the model calls Side.Release as its buffers drain. Send queues TLPs in
// software while the bridge pushes back (ErrBusy) or the link is not yet up,
// so models need no retry logic. Events (link up/down, surprise removal,
// posted TLPs lost, completion timeouts) reach Side.OnEvent.
package vpair

import (
	"errors"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// PairConfig configures NewPair. Zero bridge configs get working defaults
// (roles and pair ID are filled in).
type PairConfig struct {
	Host, GPU bridge.Config
	PairID    uint32
	// Delay is the one-way delay of each direction, Bandwidth its rate in
	// bits per second (0: unlimited). Faults, if set, overrides both
	// directions' faults (its Delay and Bandwidth included).
	Delay     time.Duration
	Bandwidth float64
	Faults    *memlink.Faults
}

// Pair is a host-side and a GPU-side bridge joined by two links.
type Pair struct {
	Sim       *sim.Sim
	Host, GPU *Side
	// H2G carries host-to-GPU frames, G2H the other way.
	H2G, G2H *memlink.Link
}

// Side is one end of the pair: a bridge and its local PCIe port.
type Side struct {
	Name   string
	Bridge *bridge.Bridge
	// OnTLP receives TLPs for this side's PCIe model. The View is only
	// valid during the call.
	OnTLP func(tlp.View)
	// OnEvent receives the bridge's events.
	OnEvent func(bridge.Event)
	// Accept selects the classes the model can take now (default all);
	// call Kick after widening it.
	Accept bridge.ClassMask
	// ManualRelease: credits are returned by Release instead of after
	// OnTLP.
	ManualRelease bool
	// CheckInvariants runs Bridge.CheckInvariants after every step and
	// records the first failure in InvariantErr.
	CheckInvariants bool
	InvariantErr    error

	s       *sim.Sim
	out     *memlink.Link
	frame   []byte
	backlog [][]byte
	timer   sim.Timer
	timerAt time.Duration
	pumping bool
	again   bool
	// Refused counts TLPs the bridge rejected as malformed.
	Refused int
}

// NewPair builds the pair on s and starts the handshake.
func NewPair(s *sim.Sim, cfg PairConfig) (*Pair, error) {
	hc, gc := cfg.Host, cfg.GPU
	hc.Role, gc.Role = bridge.RoleHost, bridge.RoleGPU
	hc.PairID, gc.PairID = cfg.PairID, cfg.PairID
	if hc.Seed == 0 {
		hc.Seed = s.Rand().Uint64()
	}
	if gc.Seed == 0 {
		gc.Seed = s.Rand().Uint64()
	}
	hb, err := bridge.New(hc)
	if err != nil {
		return nil, fmt.Errorf("host bridge: %w", err)
	}
	gb, err := bridge.New(gc)
	if err != nil {
		return nil, fmt.Errorf("gpu bridge: %w", err)
	}
	p := &Pair{Sim: s}
	p.Host = &Side{Name: "host", Bridge: hb, s: s, Accept: bridge.AcceptAll, frame: make([]byte, hb.Config().MTU)}
	p.GPU = &Side{Name: "gpu", Bridge: gb, s: s, Accept: bridge.AcceptAll, frame: make([]byte, gb.Config().MTU)}
	f := memlink.Faults{Delay: cfg.Delay, Bandwidth: cfg.Bandwidth}
	if cfg.Faults != nil {
		f = *cfg.Faults
	}
	clk := memlink.SimClock(s)
	p.H2G = memlink.New(clk, s.Rand(), f, func(b []byte) { p.GPU.Inject(b) })
	p.G2H = memlink.New(clk, s.Rand(), f, func(b []byte) { p.Host.Inject(b) })
	p.Host.out, p.GPU.out = p.H2G, p.G2H
	s.At(s.Now(), p.Host.Kick)
	s.At(s.Now(), p.GPU.Kick)
	return p, nil
}

// Up reports whether both bridges are up.
func (p *Pair) Up() bool {
	return p.Host.Bridge.State() == bridge.StateUp && p.GPU.Bridge.State() == bridge.StateUp
}

// SetDown takes both directions down or up (a link flap).
func (p *Pair) SetDown(down bool) {
	p.H2G.SetDown(down)
	p.G2H.SetDown(down)
}

// Send offers a TLP from this side's PCIe model to its bridge. The bytes
// are copied. It fails only for a malformed TLP; pushback is absorbed by a
// software queue drained in order.
func (sd *Side) Send(t []byte) error {
	if len(sd.backlog) == 0 {
		err := sd.Bridge.HandleTLP(sd.s.Now(), t)
		switch {
		case err == nil:
			sd.Kick()
			return nil
		case !errors.Is(err, bridge.ErrBusy) && !errors.Is(err, bridge.ErrNotUp):
			sd.Refused++
			return err
		}
	}
	sd.backlog = append(sd.backlog, append([]byte(nil), t...))
	sd.Kick()
	return nil
}

// Backlog returns the TLPs waiting in the software queue.
// Sim is the simulator the side runs on.
func (sd *Side) Sim() *sim.Sim { return sd.s }

func (sd *Side) Backlog() int { return len(sd.backlog) }

// Release returns credits for TLPs the model consumed (ManualRelease).
func (sd *Side) Release(c tlp.Class, headers, data int) error {
	err := sd.Bridge.Release(c, headers, data)
	sd.Kick()
	return err
}

// Inject hands the side's bridge a frame as if it came off the link (hostile
// input in fuzz tests included), then runs it.
func (sd *Side) Inject(b []byte) {
	_ = sd.Bridge.HandleFrame(sd.s.Now(), b) // drops are counted by the bridge
	sd.Kick()
}

// Kick runs the bridge: queued TLPs, frames out, TLPs and events to the
// model, and the timer. Reentrant calls (from OnTLP) are folded in.
func (sd *Side) Kick() {
	if sd.pumping {
		sd.again = true
		return
	}
	sd.pumping = true
	for {
		sd.again = false
		sd.pump()
		if !sd.again {
			break
		}
	}
	sd.pumping = false
	if sd.CheckInvariants && sd.InvariantErr == nil {
		if err := sd.Bridge.CheckInvariants(); err != nil {
			sd.InvariantErr = fmt.Errorf("%s side at %s: %w", sd.Name, sim.FormatDuration(sd.s.Now()), err)
		}
	}
	sd.arm()
}

func (sd *Side) pump() {
	b := sd.Bridge
	now := sd.s.Now()
	for len(sd.backlog) > 0 {
		err := b.HandleTLP(now, sd.backlog[0])
		if errors.Is(err, bridge.ErrBusy) || errors.Is(err, bridge.ErrNotUp) {
			break
		}
		if err != nil {
			sd.Refused++
		}
		sd.backlog[0] = nil
		sd.backlog = sd.backlog[1:]
	}
	for {
		n := b.NextFrame(now, sd.frame)
		if n == 0 {
			break
		}
		sd.out.Send(sd.frame[:n])
	}
	for {
		v, ok := b.NextTLP(sd.Accept)
		if !ok {
			break
		}
		cls, dc := v.Class(), v.DataCredits()
		if sd.OnTLP != nil {
			sd.OnTLP(v)
		}
		if !sd.ManualRelease && !b.Config().AutoRelease {
			_ = b.Release(cls, 1, dc)
		}
		sd.again = true // the release may let a credit update out
	}
	for {
		e, ok := b.NextEvent()
		if !ok {
			break
		}
		if sd.OnEvent != nil {
			sd.OnEvent(e)
		}
	}
}

func (sd *Side) arm() {
	d := sd.Bridge.Deadline()
	if len(sd.backlog) > 0 && sd.Bridge.State() != bridge.StateUp {
		d = min(d, sd.s.Now()+sd.Bridge.Config().HelloInterval)
	}
	if d == bridge.NoDeadline {
		sd.timer.Stop()
		sd.timerAt = bridge.NoDeadline
		return
	}
	if d < sd.s.Now() {
		d = sd.s.Now()
	}
	sd.timer.Stop()
	sd.timerAt = d
	sd.timer = sd.s.At(d, sd.Kick)
}
