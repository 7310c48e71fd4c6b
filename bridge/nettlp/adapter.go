package nettlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"
)

// Receiver is the PCIe side of a host-side bridge as a link driver sees it:
// every TLP the host sends (MMIO requests to the remote GPU, completions
// for the GPU's DMA reads, messages) is delivered up through it. The slice
// is valid only during the call. Each tag port delivers from its own
// goroutine, in arrival order (NetTLP keeps no order across ports). A
// Receiver should block rather than refuse when it cannot take a TLP yet
// (see RetryReceiver): an error is counted and logged and the TLP dropped,
// and a dropped posted write is lost.
//
// Glue for the bridge driver (package bridge/driver), which this package
// does not import:
//
//	runner.OnTLP = func(v tlp.View) { adapter.SendTLP(v) }
//	up := nettlp.RetryReceiver(ctx, runner.Send,
//		func(err error) bool { return errors.Is(err, bridge.ErrBusy) }, runner.Progress)
//	go adapter.Run(ctx, up)
type Receiver interface {
	ReceiveTLP(tlp []byte) error
}

// ReceiverFunc adapts a function to Receiver.
type ReceiverFunc func(tlp []byte) error

// ReceiveTLP calls f.
func (f ReceiverFunc) ReceiveTLP(tlp []byte) error { return f(tlp) }

// RetryReceiver makes a Receiver of a send function that refuses work
// while full (the bridge driver's Send returns bridge.ErrBusy): on an
// error for which busy reports true it waits for a signal on progress (or
// 1 ms when progress is nil) and offers the TLP again, until it is taken,
// another error comes back, or ctx ends. The socket's receive buffer
// absorbs the stall.
func RetryReceiver(ctx context.Context, send func(tlp []byte) error, busy func(error) bool, progress <-chan struct{}) Receiver {
	return ReceiverFunc(func(tlp []byte) error {
		for {
			err := send(tlp)
			if err == nil || !busy(err) {
				return err
			}
			var tick <-chan time.Time
			if progress == nil {
				tick = time.After(time.Millisecond)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("nettlp: TLP still refused when stopping: %w", err)
			case <-progress:
			case <-tick:
			}
		}
	})
}

// Link is the way down to the host: the bridge sends the GPU's TLPs (DMA
// reads and writes, MSI writes, completions for the host's MMIO reads)
// through it. *Adapter implements it.
type Link interface {
	SendTLP(tlp []byte) error
}

// AdapterConfig configures an Adapter.
type AdapterConfig struct {
	// Local is the address the tag ports bind on this machine.
	Local netip.Addr
	// Remote is the NetTLP adapter (the real host's side).
	Remote netip.Addr
	// DMARemote, when set, is where requests sent down (the GPU's DMA
	// reads and writes, MSI writes) go instead of Remote, and a second
	// address datagrams are accepted from; completions still go to
	// Remote. A real adapter is one address and leaves it unset; on one
	// machine it separates a libtlp-like client doing the host's MMIO
	// (Remote) from a Target serving the host's memory (DMARemote), which
	// cannot share tag ports.
	DMARemote netip.Addr
	// Tags is the number of tag ports (default 16).
	Tags int
	// RecvBuffer per socket in bytes (default DefaultRecvBuffer).
	RecvBuffer int
	// Logger for TLPs the Receiver refused (nil: no logging).
	Logger *slog.Logger
}

// Adapter makes a NetTLP adapter the PCIe side of a host-side bridge: the
// real host's TLPs arrive in NetTLP datagrams and go up to a Receiver; the
// TLPs sent down with SendTLP leave as NetTLP datagrams to the adapter, on
// the port of their tag (0x3000 + Tag[3:0]) from the same local port, with
// a running sequence number and a timestamp.
type Adapter struct {
	cfg   AdapterConfig
	tr    *Transport
	stats Stats
	log   *slog.Logger
	bufs  sync.Pool
}

// NewAdapter binds the tag ports.
func NewAdapter(cfg AdapterConfig) (*Adapter, error) {
	if !cfg.Remote.Is4() || cfg.Remote.IsUnspecified() {
		return nil, fmt.Errorf("%w: remote address %v: want the NetTLP adapter's IPv4 address", ErrConfig, cfg.Remote)
	}
	if cfg.DMARemote.IsValid() && (!cfg.DMARemote.Is4() || cfg.DMARemote.IsUnspecified()) {
		return nil, fmt.Errorf("%w: DMA remote address %v: want an IPv4 address", ErrConfig, cfg.DMARemote)
	}
	tr, err := Listen(TransportConfig{Local: cfg.Local, Tags: cfg.Tags, RecvBuffer: cfg.RecvBuffer})
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Adapter{cfg: cfg, tr: tr, log: log}
	a.bufs.New = func() any { b := make([]byte, MaxDatagram); return &b }
	return a, nil
}

// Transport returns the sockets.
func (a *Adapter) Transport() *Transport { return a.tr }

// Stats returns the live counters (Datagrams up, Completions counts TLPs
// sent down).
func (a *Adapter) Stats() *Stats { return &a.stats }

// SendTLP sends one TLP to the host through the adapter. Safe for
// concurrent use.
func (a *Adapter) SendTLP(tlp []byte) error {
	if len(tlp) == 0 || len(tlp) > MaxDatagram-HeaderLen {
		return fmt.Errorf("%w: TLP of %d bytes (want 1..%d)", ErrMalformedRequest, len(tlp), MaxDatagram-HeaderLen)
	}
	bp := a.bufs.Get().(*[]byte)
	defer a.bufs.Put(bp)
	f := (*bp)[:HeaderLen+len(tlp)]
	copy(f[HeaderLen:], tlp)
	port, dst, err := a.route(tlp)
	if err != nil {
		return err
	}
	if err := a.tr.Send(port, dst, f); err != nil {
		a.stats.SendErrors.Add(1)
		return err
	}
	a.stats.Completions.Add(1)
	return nil
}

// route returns the tag socket and the destination of tlp.
func (a *Adapter) route(tlp []byte) (int, netip.AddrPort, error) {
	tag := TLPTag(tlp)
	port := int(tag & 0xf)
	if port >= a.tr.Tags() {
		return 0, netip.AddrPort{}, fmt.Errorf("%w: tag %#x needs port %#x, only %d tag ports are open", ErrConfig, tag, Port(tag), a.tr.Tags())
	}
	dst := a.cfg.Remote
	if a.cfg.DMARemote.IsValid() && tlp[0]&0x1e != 0x0a { // not Cpl/CplD/CplLk/CplDLk
		dst = a.cfg.DMARemote
	}
	return port, netip.AddrPortFrom(dst, Port(tag)), nil
}

// Run delivers the host's TLPs to up until ctx is done; then it closes the
// sockets and returns nil. Datagrams from addresses other than Remote (and
// DMARemote) are dropped.
func (a *Adapter) Run(ctx context.Context, up Receiver) error {
	if up == nil {
		return fmt.Errorf("%w: nil Receiver", ErrConfig)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, a.tr.Tags())
	for i := range a.tr.Tags() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.tr.recvLoop(i, func(d []byte, from netip.AddrPort) {
				a.stats.Datagrams.Add(1)
				if from.Addr() != a.cfg.Remote && (!a.cfg.DMARemote.IsValid() || from.Addr() != a.cfg.DMARemote) {
					a.stats.Ignored.Add(1)
					return
				}
				_, b, err := SplitDatagram(d)
				if err != nil {
					a.stats.Malformed.Add(1)
					return
				}
				if err := up.ReceiveTLP(b); err != nil {
					a.stats.Malformed.Add(1)
					a.log.Debug("nettlp adapter: TLP refused", "port", Port(uint16(i)), "err", err)
				}
			})
			if errs[i] != nil {
				cancel()
			}
		}()
	}
	<-ctx.Done()
	a.tr.Close()
	wg.Wait()
	return errors.Join(errs...)
}

// Close releases the sockets of an adapter that is not running.
func (a *Adapter) Close() error { return a.tr.Close() }
