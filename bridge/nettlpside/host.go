package nettlpside

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/tlp"
)

// Host makes a NetTLP adapter the PCIe side of a host-side bridge: the
// real host's TLPs (MMIO requests to the remote GPU, completions of the
// GPU's DMA reads) arrive in NetTLP datagrams and go into the bridge; the
// TLPs the bridge delivers (completions of the host's MMIO reads, the
// GPU's DMA reads and writes, MSI writes) leave as NetTLP datagrams to the
// adapter, on the port of their tag.
type Host struct {
	a   *nettlp.Adapter
	r   *driver.Runner
	log *slog.Logger
	out *nettlp.Batch // TLPs for the host, sent at the end of a delivery
	// lost counts TLPs from the bridge that the adapter could not send.
	lost atomic.Uint64
	// refused counts TLPs from the host that the bridge did not take.
	refused atomic.Uint64
}

// NewHost joins adapter a to the host-side bridge runner r. It sets
// r.OnTLP, so call it before r.Run. log may be nil (no logging).
func NewHost(r *driver.Runner, a *nettlp.Adapter, log *slog.Logger) (*Host, error) {
	if r == nil || a == nil {
		return nil, fmt.Errorf("%w: NewHost needs a runner and an adapter", nettlp.ErrConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Host{a: a, r: r, log: log, out: a.NewBatch()}
	// Both run with the runner's lock held, which guards out: UDP
	// sends, nothing that calls back into the runner. A read's CplDs
	// queue up and leave in one sendmmsg at the end of the batch that
	// brought them, instead of one sendto each.
	r.OnTLP = func(v tlp.View) {
		lost, err := h.out.Add(v)
		h.lose(lost, err)
		if err != nil && lost == 0 {
			h.lose(1, err) // v itself was refused
		}
	}
	r.OnDelivered = func() { h.lose(h.out.Flush()) }
	return h, nil
}

// lose counts n TLPs for the host that were not sent.
func (h *Host) lose(n int, err error) {
	if n > 0 {
		h.lost.Add(uint64(n))
		h.log.Debug("nettlpside: TLPs to the host lost", "n", n, "err", err)
	}
}

// Adapter returns the NetTLP adapter (its Stats are live).
func (h *Host) Adapter() *nettlp.Adapter { return h.a }

// Runner returns the host-side bridge's runner.
func (h *Host) Runner() *driver.Runner { return h.r }

// Lost returns how many TLPs for the host the adapter failed to send.
func (h *Host) Lost() uint64 { return h.lost.Load() }

// Refused returns how many TLPs from the host the bridge refused
// (malformed, or the pair stopping).
func (h *Host) Refused() uint64 { return h.refused.Load() }

// Run carries the host's TLPs into the bridge until ctx ends, waiting
// while the bridge is full or its link not yet up; it then closes the
// adapter's sockets. Run the runner itself alongside.
func (h *Host) Run(ctx context.Context) error {
	return h.a.Run(ctx, nettlp.ReceiverFunc(func(b []byte) error {
		err := driver.SendWait(ctx, h.r, b)
		if err != nil {
			h.refused.Add(1)
		}
		return err
	}))
}
