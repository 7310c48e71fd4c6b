//go:build !linux

package udp

import (
	"net"
	"net/netip"
)

// sysConn without sendmmsg/recvmmsg: batches move one datagram per call.
type sysConn struct{}

func (s *sysConn) init(*net.UDPConn) error { return nil }
func (s *sysConn) setPeer(netip.AddrPort)  {}

func (s *sysConn) sendBatch(c *Conn, frames [][]byte) (int, error) {
	for i, f := range frames {
		if _, err := c.c.WriteToUDPAddrPort(f, c.peer); err != nil {
			return i, err
		}
	}
	return len(frames), nil
}

func (s *sysConn) recvBatch(c *Conn, bufs [][]byte, sizes []int) (int, error) {
	n, from, err := c.c.ReadFromUDPAddrPort(bufs[0])
	if err != nil {
		return 0, err
	}
	if !c.fromPeer(from) {
		c.Foreign.Add(1)
		return 0, nil
	}
	sizes[0] = n
	return 1, nil
}

func (s *sysConn) noOffload() {}
