package topo

import (
	"fmt"
	"math"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/bridge/vpair"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// BridgePath is the fabric path through a real dxpu bridge pair (package
// bridge, driven by bridge/vpair on the same simulator): TLPs from the
// host-side switch port enter the host-side bridge, cross an in-memory
// Ethernet link in frames with sequence numbers, acks, credits and tag
// tracking, and leave the GPU-side bridge towards the GPU; the GPU's TLPs
// go back the same way.
type BridgePath struct {
	S      *sim.Sim
	Fabric Fabric
	PairID uint32
	// Pair is set by Connect.
	Pair *vpair.Pair
	// Err holds a configuration error found by Connect (the path then
	// drops everything).
	Err error
}

// BridgePaths returns a PathFactory that puts a bridge pair between every
// downstream port and its GPU.
func BridgePaths(f Fabric) PathFactory {
	return func(s *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
		return &BridgePath{S: s, Fabric: f, PairID: uint32(i + 1)}
	}
}

// Connect implements pcie.Path.
func (b *BridgePath) Connect(upstream, downstream pcie.Receiver) (down, up pcie.Sender) {
	f := b.Fabric
	f.defaults()
	bc := bridge.Config{TagBits: 10, Window: 4096, TxQueue: 4096, InfiniteQueue: 4096, MaxPayload: 512,
		Credits: [3]bridge.ClassCredits{{Headers: 4096, Data: 4096 * 32}, {Headers: 4096, Data: 4096 * 32}, {Headers: 4096, Data: 4096 * 32}}}
	cfg := vpair.PairConfig{Host: bc, GPU: bc, PairID: b.PairID,
		Faults: &memlink.Faults{
			// The bridges' own latency and the GPU box's PCIe hop ride on
			// the link's delay.
			Delay: f.RTT/2 + 2*f.BridgeLatency + NativeHop,
			Loss:  f.Loss,
		}}
	p, err := vpair.NewPair(b.S, cfg)
	if err != nil {
		b.Err = fmt.Errorf("topo: bridge pair %d: %w", b.PairID, err)
		return dropSender{}, dropSender{}
	}
	b.Pair = p
	p.Host.OnTLP = upstream.ReceiveTLP
	p.GPU.OnTLP = downstream.ReceiveTLP
	return &sideSender{s: b.S, sd: p.Host, rate: f.BytesPerSec, overhead: f.OverheadBytes},
		&sideSender{s: b.S, sd: p.GPU, rate: f.BytesPerSec, overhead: f.OverheadBytes}
}

// sideSender feeds one bridge at the fabric's rate: the port in front of
// the bridge serializes TLPs (plus their share of framing), which makes
// Backlog exact and gives DMA engines the back-pressure posted credits
// would.
type sideSender struct {
	s        *sim.Sim
	sd       *vpair.Side
	rate     float64
	overhead int
	busy     float64 // ns, sub-ns precision
}

func (s *sideSender) SendTLP(v tlp.View) {
	start := max(float64(s.s.Now()), s.busy)
	s.busy = start + float64(len(v)+s.overhead)/s.rate*1e9
	buf := append([]byte(nil), v...)
	s.s.At(time.Duration(math.Ceil(s.busy)), func() { _ = s.sd.Send(buf) }) // malformed TLPs are counted by the side
}

// Backlog is the wait in front of the bridge: the port's serialization,
// or the TLPs the bridge refused for now (window or credits exhausted,
// retransmissions pending), whichever is longer.
func (s *sideSender) Backlog() time.Duration {
	pace := max(0, time.Duration(math.Ceil(s.busy))-s.s.Now())
	held := time.Duration(float64(s.sd.Backlog()*(256+s.overhead)) / s.rate * 1e9)
	return max(pace, held)
}

type dropSender struct{}

func (dropSender) SendTLP(tlp.View)       {}
func (dropSender) Backlog() time.Duration { return 0 }
