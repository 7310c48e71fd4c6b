package switching

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge/ratelog"
)

// UDPIndex is the port index the UDP socket driver counts under.
const UDPIndex = 1

// UDPDriver runs a Forwarder as a plain UDP socket (mode "udp"): bridges
// send dxpu datagrams to the switch's address, the switch relays them to
// the far endpoint's IP and UDP port. No root, no raw sockets: the demo's
// switch. On Linux it moves datagrams in batches (recvmmsg, sendmmsg).
type UDPDriver struct {
	fwd  *Forwarder
	conn *net.UDPConn
	// SlowPath observes datagrams the forwarder hands to the slow path,
	// before CONTROL messages are relayed; payload is only valid during
	// the call.
	SlowPath func(from netip.AddrPort, payload []byte)
	// Log takes the failed relays, at most a line a second with the
	// count (nil: slog.Default()). Set it before Run.
	Log *slog.Logger

	relayFailed atomic.Uint64
	// perDatagram runs the portable loop (a system call per datagram)
	// on Linux too: the baseline of the benchmarks.
	perDatagram bool
	// largest is the most datagrams one receive took, receives the
	// number of receives (written by Run; tests read them once Run
	// returned).
	largest, receives int
}

// NewUDPDriver listens on addr (host:port, IPv4 or IPv6; port 0 picks one).
func NewUDPDriver(fwd *Forwarder, addr string) (*UDPDriver, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("switch: UDP address %q: %w", addr, err)
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, fmt.Errorf("switch: %w", err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	_ = conn.SetWriteBuffer(4 << 20)
	return &UDPDriver{fwd: fwd, conn: conn}, nil
}

// Addr returns the address the switch listens on.
func (d *UDPDriver) Addr() netip.AddrPort { return d.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close closes the socket.
func (d *UDPDriver) Close() error { return d.conn.Close() }

// RelayFailures returns how many forwarded datagrams the socket failed to
// send (they are counted as forwarded by the Forwarder too).
func (d *UDPDriver) RelayFailures() uint64 { return d.relayFailed.Load() }

// Run relays until ctx ends or the driver is closed.
func (d *UDPDriver) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { d.conn.Close() })
	defer stop()
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	lim := ratelog.New(log, time.Second, nil)
	lctx, cancel := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go func() { lim.Run(lctx); close(flushed) }()
	defer func() { cancel(); <-flushed }() // the last count comes out before Run returns
	if d.perDatagram {
		return d.runPerDatagram(ctx, lim)
	}
	return d.run(ctx, lim)
}

// relayFailure counts a datagram the socket did not send and logs it,
// rate-limited: one failure per datagram can come at line rate.
func (d *UDPDriver) relayFailure(lim *ratelog.Limiter, to netip.AddrPort, err error) {
	d.relayFailed.Add(1)
	lim.Log(slog.LevelWarn, "switch: UDP relay failed", 1, "switch: UDP relay failed", "to", to, "err", err)
}

// runEnded reports whether err ends Run quietly: ctx ended or Close.
func runEnded(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, net.ErrClosed)
}

// runPerDatagram relays with a system call per datagram each way: the
// portable loop.
func (d *UDPDriver) runPerDatagram(ctx context.Context, lim *ratelog.Limiter) error {
	buf := make([]byte, 65536)
	for {
		n, from, err := d.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if runEnded(ctx, err) {
				return nil
			}
			return fmt.Errorf("switch: UDP read on %v: %w", d.conn.LocalAddr(), err)
		}
		d.largest, d.receives = 1, d.receives+1
		to, res := d.fwd.ForwardDatagram(buf[:n], from, UDPIndex)
		if res.Verdict == VerdictSlowPath {
			if d.SlowPath != nil {
				d.SlowPath(from, buf[:n])
			}
			to, res = d.fwd.ForwardDatagramControl(buf[:n], from, UDPIndex)
		}
		if res.Verdict == VerdictForward {
			if _, err := d.conn.WriteToUDPAddrPort(buf[:n], to); err != nil {
				if runEnded(ctx, err) {
					return nil
				}
				d.relayFailure(lim, to, err)
			}
		}
	}
}
