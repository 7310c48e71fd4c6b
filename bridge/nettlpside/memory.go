package nettlpside

import (
	"context"
	"errors"
	"fmt"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
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

	q *driver.TLPQueue
}

// NewMemoryDevice puts mem behind the GPU-side bridge runner r. It sets
// r.OnTLP, so call it before r.Run. cfg.CompleterID is the device's
// routing ID; cfg.MPS must not exceed the bridge's MaxPayload.
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

// Stats returns the completer's counters.
func (d *MemoryDevice) Stats() *nettlp.Stats { return &d.stats }

// Run serves the queued TLPs in arrival order until ctx ends.
func (d *MemoryDevice) Run(ctx context.Context) error {
	emit := func(cpl []byte) error { return driver.SendWait(ctx, d.r, cpl) }
	err := d.q.Serve(ctx, func(b []byte) error {
		err := d.c.Handle(b, emit)
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
