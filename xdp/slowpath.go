package xdp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/switching/afxdp"
)

// SlowPath is the Go side of the XDP switch for the frames the program
// does not forward itself: CONTROL messages (the bridges' link handshake,
// keepalives and resets) and frames of unknown pairs. It receives them from
// AF_XDP sockets registered in the XSKMAP, or from AF_PACKET listeners on
// the ports when the program passes them to the stack; Observe sees each;
// CONTROL messages are then forwarded with ForwardControl (same ingress
// checks and rewrite as data) through transmit-only AF_PACKET sockets, and
// frames of unknown pairs dropped.
type SlowPath struct {
	fwd   *switching.Forwarder
	ports map[string]switching.Port
	tx    map[uint32]*switching.PacketSocket
	rxPkt map[string]*switching.PacketSocket
	rxXSK map[string]*afxdp.Socket
	// Observe, if set, sees every slow-path frame after the decision (as
	// transmitted when forwarded: addresses rewritten, dxpu header as
	// received). It is called from the reader goroutines, concurrently.
	Observe switching.SlowPathFunc
}

// NewSlowPath opens the sockets on ports (in the calling thread's network
// namespace). With useXSK it registers AF_XDP sockets (queue 0) in sw's
// XSKMAP, so the ports must already be installed by Reconcile. fwd must
// hold the same table as sw; its counters count what the slow path
// forwards (add them to the switch's with switching.SumSources).
func NewSlowPath(sw *Switch, fwd *switching.Forwarder, ports map[string]switching.Port, useXSK bool) (*SlowPath, error) {
	s := &SlowPath{fwd: fwd, ports: ports, tx: map[uint32]*switching.PacketSocket{},
		rxPkt: map[string]*switching.PacketSocket{}, rxXSK: map[string]*afxdp.Socket{}}
	for name, p := range ports {
		tx, err := switching.OpenPacketSender(int(p.Index))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("xdp: slow path transmit socket on %s: %w", name, err)
		}
		s.tx[p.Index] = tx
		if useXSK {
			x, err := afxdp.Open(int(p.Index), 0, afxdp.Config{})
			if err == nil {
				s.rxXSK[name] = x
				err = sw.SetXSK(int(p.Index), 0, x.FD())
			}
			if err != nil {
				s.Close()
				return nil, fmt.Errorf("xdp: slow path AF_XDP socket on %s: %w", name, err)
			}
			continue
		}
		rx, err := switching.OpenPacketSocket(int(p.Index))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("xdp: slow path listener on %s: %w", name, err)
		}
		s.rxPkt[name] = rx
	}
	return s, nil
}

// Run handles slow-path frames until ctx ends; its readers have stopped
// when it returns.
func (s *SlowPath) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for name, rx := range s.rxPkt {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 16+65536)
			for ctx.Err() == nil {
				off, end, err := rx.ReadFrame(buf, 16)
				if err != nil {
					if errors.Is(err, switching.ErrTimeout) {
						continue
					}
					return
				}
				s.handle(name, buf[:end], off)
			}
		}()
	}
	for name, x := range s.rxXSK {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := x.Wait(100); err != nil {
					return
				}
				x.Receive(64, func(f *afxdp.Frame) { s.handle(name, f.Buf[:f.End], f.Off) })
			}
		}()
	}
	wg.Wait()
	return nil
}

// handle takes one frame the stack (or an AF_XDP socket) got on port.
// AF_PACKET listeners see every frame the stack receives, so anything
// that is not a dxpu frame for the slow path is ignored, uncounted.
func (s *SlowPath) handle(port string, buf []byte, off int) {
	in := s.ports[port].Index
	res := s.fwd.ForwardControl(buf, off, in)
	if res.Verdict == switching.VerdictPass || res.Reason == switching.ReasonMalformed {
		return
	}
	if s.Observe != nil {
		s.Observe(port, buf[res.Off:])
	}
	if res.Verdict != switching.VerdictForward {
		slog.Debug("xdp: slow path drop", "port", port, "pair", res.PairID, "reason", res.Reason)
		return
	}
	if tx := s.tx[res.Egress]; tx != nil {
		if err := tx.WriteFrame(buf[res.Off:]); err != nil {
			slog.Debug("xdp: slow path transmit failed", "pair", res.PairID, "err", err)
		}
	}
}

// Close closes the sockets (after Run has returned).
func (s *SlowPath) Close() error {
	var errs []error
	for _, x := range s.tx {
		errs = append(errs, x.Close())
	}
	for _, x := range s.rxPkt {
		errs = append(errs, x.Close())
	}
	for _, x := range s.rxXSK {
		errs = append(errs, x.Close())
	}
	return errors.Join(errs...)
}
