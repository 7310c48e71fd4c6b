package nettlpside

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/tlp"
)

// MemoryDevice is the simplest GPU side: a memory-backed completer behind
// a GPU-side bridge, the stand-in for a device's BAR. Memory reads are
// answered with completions shaped by nettlp.Completer (at most MPS each,
// split on RCB multiples, UR outside the memory), writes land in the
// memory. It issues no DMA of its own.
//
// It serves each TLP as the runner delivers it (OnTLP), in arrival order,
// and hands a turn's completions to the bridge in the same turn
// (driver.Runner.Reply), as a device's completer answers from the link
// without a scheduler in between: a read's round trip carries no
// goroutine wake-up. What the bridge cannot take at once (its queue or
// window full, the link not up) waits in a backlog that Run's goroutine
// hands over in order. A read's completions are built together, so the
// ones deferred are the tail of one read's and all of the later ones'; a
// later turn's may overtake them, as completions of different
// transactions may on PCIe. Writes land when they arrive, so a read after
// a write sees it.
type MemoryDevice struct {
	// OnMPS, when set before Run, hears each change of the MPS the
	// completions use: the configured one, or less while the peer bridge
	// takes smaller payloads (mps, then the peer's largest payload).
	OnMPS func(mps, peerMaxPayload int)

	r     *driver.Runner
	c     *nettlp.Completer
	stats nettlp.Stats

	// Under the runner's lock (its callbacks).
	peer  int // the peer's largest payload when last looked, 0 unknown
	turn  cplBatch
	fatal error // a completer failure, which ends Run

	mu      sync.Mutex
	backlog cplBatch // completions the bridge did not take in their turn
	failed  error    // fatal, handed to Run
	wake    chan struct{}
	// deferred counts the completions that went through the backlog.
	deferred atomic.Uint64
}

// NewMemoryDevice puts mem behind the GPU-side bridge runner r. It sets
// r.OnTLP and r.OnDelivered, so call it before r.Run. cfg.CompleterID is
// the device's routing ID; cfg.MPS must not exceed the bridge's
// MaxPayload. The completions follow the peer bridge too: a peer that
// takes smaller payloads than cfg.MPS (its HELLO says) gets completions
// of the largest Max Payload Size it takes, as PCIe enumeration would
// have set the device's MPS (see OnMPS).
func NewMemoryDevice(r *driver.Runner, mem nettlp.Memory, cfg nettlp.CompleterConfig) (*MemoryDevice, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: NewMemoryDevice needs a runner", nettlp.ErrConfig)
	}
	d := &MemoryDevice{r: r, wake: make(chan struct{}, 1)}
	c, err := nettlp.NewCompleter(cfg, mem, 0, &d.stats)
	if err != nil {
		return nil, err
	}
	d.c = c
	r.OnTLP = d.take
	r.OnDelivered = d.answer
	return d, nil
}

// MPS returns the Max Payload Size the completions use now (the
// configured one until a peer takes less).
func (d *MemoryDevice) MPS() int { return d.c.MPS() }

// Stats returns the completer's counters.
func (d *MemoryDevice) Stats() *nettlp.Stats { return &d.stats }

// Deferred returns how many completions the bridge could not take in the
// turn that delivered their read, and Run's goroutine handed over later.
func (d *MemoryDevice) Deferred() uint64 { return d.deferred.Load() }

// take serves one delivered TLP (OnTLP, the runner locked): a write lands,
// a read's completions join the turn's.
func (d *MemoryDevice) take(v tlp.View) {
	if d.fatal != nil {
		return
	}
	d.followPeer()
	err := d.c.Handle(v, d.turn.add)
	if err != nil && !errors.Is(err, nettlp.ErrUnsupported) && !errors.Is(err, nettlp.ErrMalformedRequest) && !errors.Is(err, nettlp.ErrOutOfRange) {
		d.fatal = err
	}
}

// answer hands the turn's completions to the bridge (OnDelivered, the
// runner locked); what it does not take goes to the backlog, behind
// what waits there already.
func (d *MemoryDevice) answer() {
	if len(d.turn.ends) == 0 && d.fatal == nil {
		return
	}
	views := d.turn.list()
	n := 0
	d.mu.Lock()
	waiting := len(d.backlog.ends) > 0
	d.mu.Unlock()
	if !waiting {
		// ErrBusy or the link not up: the rest waits for Run, which
		// tells the errors that lose completions from those that wait.
		n, _ = d.r.Reply(views)
	}
	if n < len(views) || d.fatal != nil {
		d.mu.Lock()
		for _, v := range views[n:] {
			d.backlog.add(v)
		}
		if d.fatal != nil && d.failed == nil {
			d.failed = d.fatal
		}
		d.mu.Unlock()
		d.deferred.Add(uint64(len(views) - n))
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	d.turn.reset()
}

// Run hands the completions the bridge could not take in their turn over,
// in order, until ctx ends or the completer fails.
func (d *MemoryDevice) Run(ctx context.Context) error {
	var out cplBatch
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		}
		for {
			d.mu.Lock()
			failed := d.failed
			out, d.backlog = d.backlog, out
			d.mu.Unlock()
			if len(out.ends) == 0 {
				if failed != nil {
					return fmt.Errorf("nettlpside: memory device: %w", failed)
				}
				break
			}
			err := out.send(ctx, d.r)
			out.reset()
			if err != nil && !errors.Is(err, bridge.ErrPeerTLPSize) {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("nettlpside: memory device: %w", err)
			}
			// ErrPeerTLPSize: a new peer took smaller payloads between
			// the request and its completions: they are lost with the
			// old session, and the next request follows the new peer.
		}
	}
}

// followPeer caps the completer's MPS at what the peer bridge takes, when
// that changed since the last request (a new session, a new peer).
func (d *MemoryDevice) followPeer() {
	p := d.r.PeerMaxPayload()
	if p == d.peer || p == 0 {
		return
	}
	d.peer = p
	before := d.c.MPS()
	if now := d.c.LimitMPS(p); now != before && d.OnMPS != nil {
		d.OnMPS(now, p)
	}
}

// cplBatch collects completions, copied (the completer reuses its
// buffer), to hand them to the runner together. Its buffers are reused:
// once warm, no allocation per read.
type cplBatch struct {
	buf   []byte
	ends  []int
	views [][]byte
}

func (b *cplBatch) add(cpl []byte) error {
	b.buf = append(b.buf, cpl...)
	b.ends = append(b.ends, len(b.buf))
	return nil
}

// list returns the collected completions, valid until reset.
func (b *cplBatch) list() [][]byte {
	views := b.views[:0]
	start := 0
	for _, e := range b.ends {
		views = append(views, b.buf[start:e])
		start = e
	}
	b.views = views
	return views
}

// reset empties the batch, keeping its buffers.
func (b *cplBatch) reset() {
	clear(b.views)
	b.buf, b.ends, b.views = b.buf[:0], b.ends[:0], b.views[:0]
}

// send hands the collected completions to r, waiting for room
// (driver.SendManyWait).
func (b *cplBatch) send(ctx context.Context, r *driver.Runner) error {
	if len(b.ends) == 0 {
		return nil
	}
	if err := driver.SendManyWait(ctx, r, b.list()); err != nil {
		return fmt.Errorf("completions: %w", err)
	}
	return nil
}
