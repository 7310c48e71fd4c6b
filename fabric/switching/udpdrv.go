package switching

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
)

// UDPIndex is the port index the UDP socket driver counts under.
const UDPIndex = 1

// UDPDriver runs a Forwarder as a plain UDP socket (mode "udp"): bridges
// send dxpu datagrams to the switch's address, the switch relays them to
// the far endpoint's IP and UDP port. No root, no raw sockets: the demo's
// switch.
type UDPDriver struct {
	fwd      *Forwarder
	conn     *net.UDPConn
	SlowPath func(from netip.AddrPort, payload []byte)
}

// NewUDPDriver listens on addr (host:port; port 0 picks one).
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

// Run relays until ctx ends.
func (d *UDPDriver) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { d.conn.Close() })
	defer stop()
	buf := make([]byte, 65536)
	for {
		n, from, err := d.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("switch: UDP read: %w", err)
		}
		to, res := d.fwd.ForwardDatagram(buf[:n], from, UDPIndex)
		if res.Verdict == VerdictSlowPath {
			if d.SlowPath != nil {
				d.SlowPath(from, buf[:n])
			}
			to, res = d.fwd.ForwardDatagramControl(buf[:n], from, UDPIndex)
		}
		if res.Verdict == VerdictForward {
			if _, err := d.conn.WriteToUDPAddrPort(buf[:n], to); err != nil {
				slog.Debug("switch: UDP relay failed", "to", to, "err", err)
			}
		}
	}
}
