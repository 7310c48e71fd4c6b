// Package udp carries dxpu frames in UDP datagrams (the dxpu header is the
// UDP payload), for routed networks; it implements driver.Transport.
package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Conn is a UDP socket bound to a local address that exchanges frames with
// one peer. Datagrams from other sources are ignored.
type Conn struct {
	c    *net.UDPConn
	peer netip.AddrPort
	// Foreign counts datagrams dropped for coming from another address.
	Foreign uint64
}

// Listen binds local (port 0 picks one) and sends to peer.
func Listen(local, peer netip.AddrPort) (*Conn, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
	if err != nil {
		return nil, fmt.Errorf("udp: listen %v: %w", local, err)
	}
	_ = c.SetReadBuffer(8 << 20)
	_ = c.SetWriteBuffer(8 << 20)
	return &Conn{c: c, peer: peer}, nil
}

// LocalAddr returns the bound address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.c.LocalAddr().(*net.UDPAddr).AddrPort() }

// SetPeer changes the peer (before traffic starts).
func (c *Conn) SetPeer(p netip.AddrPort) { c.peer = p }

// Send transmits one frame to the peer.
func (c *Conn) Send(frame []byte) error {
	_, err := c.c.WriteToUDPAddrPort(frame, c.peer)
	return err
}

// Recv returns the next frame from the peer.
func (c *Conn) Recv(buf []byte) (int, error) {
	for {
		n, from, err := c.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return 0, fmt.Errorf("udp: %w", net.ErrClosed)
			}
			return 0, fmt.Errorf("udp: receive: %w", err)
		}
		if from.Addr().Unmap() != c.peer.Addr().Unmap() || from.Port() != c.peer.Port() {
			c.Foreign++
			continue
		}
		return n, nil
	}
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }
