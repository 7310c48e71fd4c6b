package nettlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
)

// TargetConfig configures a Target.
type TargetConfig struct {
	// Addr is the address the tag ports bind (127.0.0.2 on loopback, say,
	// with libtlp on 127.0.0.1).
	Addr netip.Addr
	// Tags is the number of tag ports (default 16: 0x3000..0x300f).
	Tags int
	// RecvBuffer per socket in bytes (default DefaultRecvBuffer).
	RecvBuffer int
	// Completer shapes completions (MPS, RCB, completer ID).
	Completer CompleterConfig
	// Logger receives one debug line per TLP that could not be served
	// (nil: no logging).
	Logger *slog.Logger
	// Allow lists the sources the target answers. A datagram from any
	// other address is dropped unread and counted (Stats.Refused): a
	// target that answered anyone would be a reflection amplifier (a
	// 24-byte read brings back up to 4 KiB). Empty: loopback sources only.
	Allow []netip.Prefix
}

// allowed reports whether the target answers datagrams from a.
func (c *TargetConfig) allowed(a netip.Addr) bool {
	a = a.Unmap()
	if len(c.Allow) == 0 {
		return a.IsLoopback()
	}
	for _, p := range c.Allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Target is a NetTLP-compatible DMA target: it stands where a NetTLP
// adapter stands and answers the DMA reads and writes that libtlp (or a
// device behind an adapter) sends, out of a Memory. Each tag port is served
// by its own goroutine in arrival order, so a read on a port returns only
// after every write sent before it on that port has landed; replies leave
// from the port the request came to, addressed to its source.
type Target struct {
	cfg   TargetConfig
	mem   Memory
	tr    *Transport
	stats Stats
	log   *slog.Logger
}

// NewTarget binds the tag ports and returns a target ready to Serve.
func NewTarget(cfg TargetConfig, mem Memory) (*Target, error) {
	if err := cfg.Completer.fill(); err != nil {
		return nil, err
	}
	if mem == nil {
		return nil, fmt.Errorf("%w: nil Memory", ErrConfig)
	}
	tr, err := Listen(TransportConfig{Local: cfg.Addr, Tags: cfg.Tags, RecvBuffer: cfg.RecvBuffer})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Target{cfg: cfg, mem: mem, tr: tr, log: log}, nil
}

// Transport returns the sockets (for their addresses and buffer sizes).
func (t *Target) Transport() *Transport { return t.tr }

// Close releases the sockets of a target that is not serving.
func (t *Target) Close() error { return t.tr.Close() }

// Stats returns the live counters.
func (t *Target) Stats() *Stats { return &t.stats }

// Serve answers requests until ctx is done, then closes the sockets and
// returns nil; it returns an error if a socket fails. A Target serves once.
func (t *Target) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, t.tr.Tags())
	for i := range t.tr.Tags() {
		c, err := NewCompleter(t.cfg.Completer, t.mem, HeaderLen, &t.stats)
		if err != nil {
			t.tr.Close()
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = t.servePort(i, c)
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	<-ctx.Done()
	t.tr.Close()
	wg.Wait()
	return errors.Join(errs...)
}

func (t *Target) servePort(i int, c *Completer) error {
	var src netip.AddrPort
	var sendErr error
	emit := func(frame []byte) error {
		if err := t.tr.Send(i, src, frame); err != nil {
			t.stats.SendErrors.Add(1)
			sendErr = err
			return err
		}
		return nil
	}
	return t.tr.recvLoop(i, func(d []byte, from netip.AddrPort) {
		t.stats.Datagrams.Add(1)
		if !t.cfg.allowed(from.Addr()) {
			t.stats.Refused.Add(1)
			return
		}
		src = from
		_, b, err := SplitDatagram(d)
		if err != nil {
			t.stats.Malformed.Add(1)
			t.log.Debug("nettlp target: datagram dropped", "port", Port(uint16(i)), "from", from, "err", err)
			return
		}
		sendErr = nil
		if err := c.Handle(b, emit); err != nil && !errors.Is(err, ErrUnsupported) && sendErr == nil {
			t.log.Debug("nettlp target: TLP not served as asked", "port", Port(uint16(i)), "from", from, "err", err)
		}
	})
}
