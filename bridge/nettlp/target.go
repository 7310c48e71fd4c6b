package nettlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync/atomic"
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
// device behind an adapter) sends, out of a Memory. One goroutine serves
// all tag ports in the order the datagrams arrived, so a read returns only
// after every write sent before it, on any port, has landed; replies leave
// from the port the request came to, addressed to its source.
type Target struct {
	cfg   TargetConfig
	mem   Memory
	tr    *Transport
	stats Stats
	log   *slog.Logger
	sched *sched
	// serving: Serve owns the sched's descriptors and closes them itself.
	serving atomic.Bool
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
	t := &Target{cfg: cfg, mem: mem, tr: tr, log: log}
	if t.sched, err = t.newSched(); err != nil {
		tr.Close()
		return nil, err
	}
	awaitArrivalStamps(cfg.Addr)
	return t, nil
}

// Transport returns the sockets (for their addresses and buffer sizes).
func (t *Target) Transport() *Transport { return t.tr }

// Close releases the sockets of a target that is not serving.
func (t *Target) Close() error {
	if t.serving.Load() {
		t.sched.wake() // Serve closes the descriptors on its way out
	} else {
		t.sched.close()
	}
	return t.tr.Close()
}

// Stats returns the live counters.
func (t *Target) Stats() *Stats { return &t.stats }

// Serve answers requests until ctx is done, then closes the sockets and
// returns nil; it returns an error if a socket fails. A Target serves once.
//
// One goroutine serves every tag port, in the order the kernel received
// the datagrams (SO_TIMESTAMPNS): a host runs one stream in order, and a
// read sent on one tag port after a posted write on another must see that
// write (PCIe: a read never passes a posted write). A goroutine per port
// let the read win under load.
func (t *Target) Serve(ctx context.Context) error {
	t.serving.Store(true)
	defer t.sched.close()
	err := t.sched.run(ctx)
	t.tr.Close()
	return err
}

// portState is one tag port's completer and its reply path; emit is built
// once so serving a datagram allocates nothing.
type portState struct {
	c       *Completer
	src     netip.AddrPort
	sendErr error
	emit    func([]byte) error
}

// serve executes one datagram that came to tag port i from src.
func (t *Target) serve(i int, p *portState, d []byte, from netip.AddrPort) {
	t.stats.Datagrams.Add(1)
	if !t.cfg.allowed(from.Addr()) {
		t.stats.Refused.Add(1)
		return
	}
	p.src = from
	_, b, err := SplitDatagram(d)
	if err != nil {
		t.stats.Malformed.Add(1)
		t.log.Debug("nettlp target: datagram dropped", "port", Port(uint16(i)), "from", from, "err", err)
		return
	}
	p.sendErr = nil
	if err := p.c.Handle(b, p.emit); err != nil && !errors.Is(err, ErrUnsupported) && p.sendErr == nil {
		t.log.Debug("nettlp target: TLP not served as asked", "port", Port(uint16(i)), "from", from, "err", err)
	}
}
