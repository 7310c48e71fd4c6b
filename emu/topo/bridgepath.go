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
	// A long round trip, a slow link or loss outlast the bridges' default
	// timers: a request would end in CA, a lossy link be taken for dead,
	// and an RTO shorter than the round trip never sees its probe
	// answered (each RTO sends a new one), so nothing lost is resent.
	bc.CompletionTimeout, bc.MaxRTO, bc.Keepalive, bc.DeadAfter = f.bridgeTimers()
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
	poll := f.AddedRoundTrip() / 64
	return &sideSender{s: b.S, sd: p.Host, rate: f.BytesPerSec, overhead: f.OverheadBytes, poll: poll},
		&sideSender{s: b.S, sd: p.GPU, rate: f.BytesPerSec, overhead: f.OverheadBytes, poll: poll}
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
	busy     float64       // ns, sub-ns precision
	poll     time.Duration // the least wait while the bridge refuses TLPs
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
	if s.sd.Backlog() > 0 {
		// What lets them in (acks, credits) comes over the round trip: a
		// sender polling Backlog waits a fraction of it, not a TLP's
		// time, or a long round trip costs millions of polls.
		held = max(held, s.poll)
	}
	return max(pace, held)
}

type dropSender struct{}

func (dropSender) SendTLP(tlp.View)       {}
func (dropSender) Backlog() time.Duration { return 0 }

// The least likely delays the bridges' timers still wait through.
const (
	// queuedAhead is the most completion bytes queued ahead of a request's
	// own: every 10-bit tag of its requester out for 4 KiB.
	queuedAhead = 768 * 4096
	// lostOdds: a frame lost this many times in a row once in 1e12.
	lostOdds = 1e-12
)

// lossRuns returns how many times in a row something that fails with
// probability loss may fail, at odds above lostOdds (0 without loss).
func lossRuns(loss float64) float64 {
	if !(loss > 0) {
		return 0
	}
	return math.Ceil(math.Log(lostOdds) / math.Log(min(loss, 1-1e-9)))
}

// bridgeTimers returns the completion timeout, the longest retransmission
// timeout, the keepalive interval and the silence taken for a dead peer of
// the bridges on f: the defaults, or longer where f needs it.
func (f Fabric) bridgeTimers() (completion, maxRTO, keepalive, deadAfter time.Duration) {
	f.defaults()
	bd := bridge.Config{}.Defaults()
	// In float seconds: a link of a few bit/s must not wrap the
	// nanoseconds around.
	dur := func(s float64) time.Duration { return time.Duration(min(s, float64(math.MaxInt64/4)/1e9) * 1e9) }
	rtt := f.AddedRoundTrip().Seconds()
	maxRTO = max(bd.MaxRTO, dur(2*rtt))
	// A lost TLP is resent once a probe and its answer got through, and
	// the request and then its completion each may need that.
	try := 1 - math.Pow(1-f.Loss, 3)
	retx := 2 * lossRuns(try) * (rtt + maxRTO.Seconds())
	queue := float64(queuedAhead*(4096+12+f.OverheadBytes)/4096) / f.BytesPerSec
	completion = max(bd.CompletionTimeout, dur(2*(rtt+queue)+retx))
	// Keepalives at a fraction of the round trip, not every millisecond:
	// a virtual run of a long round trip would spend its time on them.
	keepalive = max(bd.Keepalive, dur(rtt/16))
	// Silence is then loss, taken for a dead peer only once as unlikely
	// as the rest, and never before the defaults' ten keepalives.
	deadAfter = max(bd.DeadAfter, dur((lossRuns(f.Loss)+10)*keepalive.Seconds()))
	return completion, maxRTO, keepalive, deadAfter
}

// CompletionTimeout returns how long a request across f may wait for its
// completion: the bridges' default 50 ms, or longer where f rightly delays
// a completion more: a long round trip, a slow link with a tag space of
// completions queued ahead, retransmissions through loss.
func (f Fabric) CompletionTimeout() time.Duration {
	c, _, _, _ := f.bridgeTimers()
	return c
}
