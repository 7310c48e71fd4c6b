//go:build !linux

package udp

import (
	"errors"
	"net/netip"
)

// steering is Linux only: elsewhere every pair goes through the mux's
// queues.
type steering struct{}

func listenMuxSocket(local netip.AddrPort, _ bool) (*Conn, *steering, error) {
	c, err := listenPlain(local, netip.AddrPort{})
	return c, nil, err
}

func (*steering) open(uint32, netip.AddrPort) (*Conn, error) { return nil, errNoSteering }

// errNoSteering: the pair goes through the mux's queues.
var errNoSteering = errors.New("udp: mux: no steering")

func (*steering) release(uint32) {}
func (*steering) close()         {}

func (*Conn) unblock() {}

func (*Conn) steeredTry([][]byte, []int) (int, error) { return 0, errNoSteering }
func (*Conn) steeredWait() error                      { return errNoSteering }
