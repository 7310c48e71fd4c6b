package nettlpside

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/tlp"
)

// MemoryDevice is the simplest GPU side: a memory-backed completer behind
// a GPU-side bridge, the stand-in for a device's BAR. Memory reads are
// answered with completions shaped by nettlp.Completer (at most MPS each,
// split on RCB multiples, UR outside the memory), writes land in the
// memory. It issues no DMA of its own.
type MemoryDevice struct {
	r     *driver.Runner
	c     *nettlp.Completer
	stats nettlp.Stats

	mu    sync.Mutex
	q     [][]byte // TLPs waiting, oldest first
	spare [][]byte // the other queue, swapped with q by Run
	free  [][]byte // buffers for TLPs, recycled: no allocation per TLP
	wake  chan struct{}
}

// NewMemoryDevice puts mem behind the GPU-side bridge runner r. It sets
// r.OnTLP, so call it before r.Run. cfg.CompleterID is the device's
// routing ID; cfg.MPS must not exceed the bridge's MaxPayload.
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
	// OnTLP runs with the runner's lock held and must not send: queue.
	r.OnTLP = func(v tlp.View) {
		d.mu.Lock()
		var b []byte
		if k := len(d.free); k > 0 {
			b, d.free = d.free[k-1][:0], d.free[:k-1]
		}
		d.q = append(d.q, append(b, v...))
		d.mu.Unlock()
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
	return d, nil
}

// Stats returns the completer's counters.
func (d *MemoryDevice) Stats() *nettlp.Stats { return &d.stats }

// Run serves the queued TLPs in arrival order until ctx ends.
func (d *MemoryDevice) Run(ctx context.Context) error {
	emit := func(cpl []byte) error { return driver.SendWait(ctx, d.r, cpl) }
	for {
		d.mu.Lock()
		q := d.q
		d.q, d.spare = d.spare[:0], nil
		d.mu.Unlock()
		for _, b := range q {
			if err := d.c.Handle(b, emit); err != nil && ctx.Err() != nil {
				return nil
			} else if err != nil && !errors.Is(err, nettlp.ErrUnsupported) && !errors.Is(err, nettlp.ErrMalformedRequest) && !errors.Is(err, nettlp.ErrOutOfRange) {
				return fmt.Errorf("nettlpside: memory device: %w", err)
			}
		}
		d.mu.Lock()
		d.free = append(d.free, q...)
		clear(q)
		d.spare = q[:0]
		d.mu.Unlock()
		if len(q) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		}
	}
}
