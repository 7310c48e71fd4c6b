package nettlpside

import (
	"context"
	"errors"
	"fmt"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
)

// MemoryDevice is the simplest GPU side: a memory-backed completer behind
// a GPU-side bridge, the stand-in for a device's BAR. Memory reads are
// answered with completions shaped by nettlp.Completer (at most MPS each,
// split on RCB multiples, UR outside the memory), writes land in the
// memory. It issues no DMA of its own.
type MemoryDevice struct {
	// OnMPS, when set before Run, hears each change of the MPS the
	// completions use: the configured one, or less while the peer bridge
	// takes smaller payloads (mps, then the peer's largest payload).
	OnMPS func(mps, peerMaxPayload int)

	r     *driver.Runner
	c     *nettlp.Completer
	stats nettlp.Stats
	peer  int // the peer's largest payload when last looked, 0 unknown

	q     *driver.TLPQueue
	batch cplBatch // used by Run only
}

// NewMemoryDevice puts mem behind the GPU-side bridge runner r. It sets
// r.OnTLP, so call it before r.Run. cfg.CompleterID is the device's
// routing ID; cfg.MPS must not exceed the bridge's MaxPayload. The
// completions follow the peer bridge too: a peer that takes smaller
// payloads than cfg.MPS (its HELLO says) gets completions of the largest
// Max Payload Size it takes, as PCIe enumeration would have set the
// device's MPS (see OnMPS).
func NewMemoryDevice(r *driver.Runner, mem nettlp.Memory, cfg nettlp.CompleterConfig) (*MemoryDevice, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: NewMemoryDevice needs a runner", nettlp.ErrConfig)
	}
	d := &MemoryDevice{r: r, q: driver.NewTLPQueue()}
	c, err := nettlp.NewCompleter(cfg, mem, 0, &d.stats)
	if err != nil {
		return nil, err
	}
	d.c = c
	// OnTLP runs with the runner's lock held and must not send: queue.
	r.OnTLP = d.q.Push
	return d, nil
}

// MPS returns the Max Payload Size the completions use now (the
// configured one until a peer takes less).
func (d *MemoryDevice) MPS() int { return d.c.MPS() }

// Stats returns the completer's counters.
func (d *MemoryDevice) Stats() *nettlp.Stats { return &d.stats }

// Run serves the queued TLPs in arrival order until ctx ends.
func (d *MemoryDevice) Run(ctx context.Context) error {
	err := d.q.Serve(ctx, func(b []byte) error {
		d.followPeer()
		err := d.c.Handle(b, d.batch.add)
		// A read's completions go to the bridge together: handed over
		// one by one, each left in a frame of its own (a 4 KiB read was
		// 16 frames, 16 seals and 16 sends instead of 4).
		if serr := d.batch.send(ctx, d.r); serr != nil {
			if errors.Is(serr, bridge.ErrPeerTLPSize) && d.r.PeerMaxPayload() != d.peer {
				// A new peer took smaller payloads between the request
				// and its completions: they are lost with the old
				// session, and the next request follows the new peer.
				return nil
			}
			return serr
		}
		if err == nil || errors.Is(err, nettlp.ErrUnsupported) || errors.Is(err, nettlp.ErrMalformedRequest) || errors.Is(err, nettlp.ErrOutOfRange) {
			return nil
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("nettlpside: memory device: %w", err)
	}
	return nil
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

// cplBatch collects the completions of one request, copied (the
// completer reuses its buffer), to hand them to the runner in one
// SendMany. Its buffers are reused: once warm, no allocation per read.
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

// send hands the collected completions to r (driver.SendManyWait) and
// empties the batch.
func (b *cplBatch) send(ctx context.Context, r *driver.Runner) error {
	if len(b.ends) == 0 {
		return nil
	}
	views := b.views[:0]
	start := 0
	for _, e := range b.ends {
		views = append(views, b.buf[start:e])
		start = e
	}
	b.views = views
	defer func() {
		clear(b.views)
		b.buf, b.ends = b.buf[:0], b.ends[:0]
	}()
	if err := driver.SendManyWait(ctx, r, views); err != nil {
		return fmt.Errorf("nettlpside: completions: %w", err)
	}
	return nil
}
