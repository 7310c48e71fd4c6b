package pcie

import (
	"math"
	"time"

	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Receiver consumes TLPs. The view is only valid during the call: a receiver
// that needs the bytes later copies them.
type Receiver interface {
	ReceiveTLP(v tlp.View)
}

// ReceiverFunc adapts a function to Receiver.
type ReceiverFunc func(v tlp.View)

// ReceiveTLP calls f.
func (f ReceiverFunc) ReceiveTLP(v tlp.View) { f(v) }

// Sender accepts TLPs for transmission. The caller keeps ownership of v: a
// sender copies what it keeps. Backlog says how long a TLP sent now would
// wait before its first bit goes on the wire; DMA engines use it as their
// flow-control signal (it stands for posted credits running out).
type Sender interface {
	SendTLP(v tlp.View)
	Backlog() time.Duration
}

// LinkConfig describes one direction of a point-to-point path.
type LinkConfig struct {
	// Latency is the one-way time from the last bit leaving the sender to
	// the TLP being delivered: propagation plus every store-and-forward hop
	// (root port, switch, bridge, network) folded together.
	Latency time.Duration
	// BytesPerSec is the serialization rate of the narrowest hop; 0 means
	// infinitely fast.
	BytesPerSec float64
	// OverheadBytes is added to each TLP's length on the wire: PCIe framing,
	// sequence number and LCRC (about 8 bytes) plus, over a fabric, the
	// share of Ethernet and dxpu encapsulation each TLP pays.
	OverheadBytes int
}

// PCIe Gen5 x16 after 128b/130b encoding, and the per-TLP framing a Gen3+
// link adds (STP token 4, LCRC 4) plus an allowance for DLLPs.
const (
	Gen5x16BytesPerSec = 32e9 * 16 / 8 * 128 / 130
	Gen4x16BytesPerSec = 16e9 * 16 / 8 * 128 / 130
	PCIeOverheadBytes  = 12
)

// Link carries TLPs in one direction in virtual time. TLPs leave in the
// order they were sent, one after another at BytesPerSec, and arrive Latency
// after their last byte left. It stands for every kind of hop between two
// PCIe components: a PCIe link, a chain of switches, or a pipe through a
// fabric.
type Link struct {
	s    *sim.Sim
	cfg  LinkConfig
	dst  Receiver
	busy float64 // when the wire is free again, in ns (sub-ns precision: a 64-byte TLP at 63 GB/s takes 1.2 ns)
	free [][]byte
	// inflight holds the TLPs on the wire in order; arrivals are in send
	// order (one latency, one FIFO wire), so one method value serves every
	// delivery without a closure per TLP.
	inflight [][]byte
	head     int
	deliverF func()
	// Counters.
	TLPs  uint64
	Bytes uint64 // wire bytes, overhead included
}

// NewLink returns a link delivering to dst.
func NewLink(s *sim.Sim, cfg LinkConfig, dst Receiver) *Link {
	l := &Link{s: s, cfg: cfg, dst: dst}
	l.deliverF = l.deliver
	return l
}

func (l *Link) deliver() {
	buf := l.inflight[l.head]
	l.inflight[l.head] = nil
	l.head++
	if l.head == len(l.inflight) {
		l.inflight, l.head = l.inflight[:0], 0
	} else if l.head >= 1024 && 2*l.head >= len(l.inflight) {
		n := copy(l.inflight, l.inflight[l.head:])
		l.inflight, l.head = l.inflight[:n], 0
	}
	if l.dst != nil {
		l.dst.ReceiveTLP(tlp.View(buf))
	}
	l.put(buf)
}

// Config returns the link's configuration.
func (l *Link) Config() LinkConfig { return l.cfg }

// SetReceiver changes where the link delivers (used when a device is
// hot-added or removed).
func (l *Link) SetReceiver(dst Receiver) { l.dst = dst }

// Backlog implements Sender.
func (l *Link) Backlog() time.Duration {
	if d := time.Duration(math.Ceil(l.busy)) - l.s.Now(); d > 0 {
		return d
	}
	return 0
}

// SerializationTime returns how long n TLP bytes occupy the wire, in ns.
func (l *Link) SerializationTime(n int) float64 {
	if l.cfg.BytesPerSec <= 0 {
		return 0
	}
	return float64(n+l.cfg.OverheadBytes) / l.cfg.BytesPerSec * 1e9
}

// SendTLP implements Sender.
func (l *Link) SendTLP(v tlp.View) {
	buf := l.get(len(v))
	copy(buf, v)
	start := float64(l.s.Now())
	if l.busy > start {
		start = l.busy
	}
	l.busy = start + l.SerializationTime(len(v))
	l.TLPs++
	l.Bytes += uint64(len(v) + l.cfg.OverheadBytes)
	l.inflight = append(l.inflight, buf)
	l.s.At(time.Duration(math.Ceil(l.busy))+l.cfg.Latency, l.deliverF)
}

func (l *Link) get(n int) []byte {
	for i := len(l.free) - 1; i >= 0 && i >= len(l.free)-4; i-- {
		if cap(l.free[i]) >= n {
			b := l.free[i][:n]
			l.free[i] = l.free[len(l.free)-1]
			l.free = l.free[:len(l.free)-1]
			return b
		}
	}
	c := 64
	for c < n {
		c *= 2
	}
	return make([]byte, n, c)
}

func (l *Link) put(b []byte) {
	if len(l.free) < 4096 {
		l.free = append(l.free, b)
	}
}

// Path is a full-duplex connection between an upstream component (towards
// the root complex) and a downstream one. Native PCIe links, a pipe through
// a fabric, or a pair of dxpu bridges all implement it, which is what makes
// the topology pluggable.
type Path interface {
	// Connect wires the two ends and returns the senders each end uses:
	// down carries TLPs from upstream to downstream, up the other way.
	Connect(upstream, downstream Receiver) (down, up Sender)
}

// LinkPath is a Path made of two Links.
type LinkPath struct {
	S        *sim.Sim
	Down, Up LinkConfig
	DownLink *Link // set by Connect
	UpLink   *Link // set by Connect
}

// Connect implements Path.
func (p *LinkPath) Connect(upstream, downstream Receiver) (down, up Sender) {
	p.DownLink = NewLink(p.S, p.Down, downstream)
	p.UpLink = NewLink(p.S, p.Up, upstream)
	return p.DownLink, p.UpLink
}
