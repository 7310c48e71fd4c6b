//go:build !linux

package nettlp

import "net"

// clientRecv without recvmmsg: one Read per datagram.
type clientRecv struct{}

func (r *clientRecv) init(*net.UDPConn) {}

func (r *clientRecv) pending() bool { return false }

func (r *clientRecv) recv(c *net.UDPConn, one []byte) ([]byte, error) {
	n, err := c.Read(one)
	return one[:n], err
}
