package e2ebench

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/udp"
)

// network is where the two ends live: it opens the bridge pair's
// transports and runs the echo baseline between the same two endpoints.
type network interface {
	name() string
	// bridges opens the pair's sockets; busyPoll: for runners that a
	// spinning clock polls (udp.ListenBusyPoll).
	bridges(busyPoll bool) (host, gpu driver.Transport, err error)
	// echo opens the echo baseline between the same two endpoints as
	// the bridges, through the same switch.
	echo() (*echoPath, error)
	// busyEcho is echo between two busy-polling sockets.
	busyEcho() (*echoPath, error)
	// raw opens two plain sockets at the bridges' endpoints, the host's
	// sending to the GPU's on the bridges' path, and the front every
	// datagram needs there (a dxpu header of the bridges' pair, so that
	// a switch forwards it). Open it when the bridges are closed.
	raw() (host, gpu *udp.Conn, prefix []byte, err error)
	close()
}

// loopbackNet puts both ends on 127.0.0.1.
type loopbackNet struct{}

func (loopbackNet) name() string { return "loopback" }
func (loopbackNet) close()       {}

func (loopbackNet) bridges(busyPoll bool) (driver.Transport, driver.Transport, error) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	listen := listenFor(busyPoll)
	hc, err := listen(lo, netip.AddrPort{})
	if err != nil {
		return nil, nil, fmt.Errorf("e2ebench: host-side socket: %w", err)
	}
	gc, err := listen(lo, hc.LocalAddr())
	if err != nil {
		hc.Close()
		return nil, nil, fmt.Errorf("e2ebench: GPU-side socket: %w", err)
	}
	hc.SetPeer(gc.LocalAddr())
	return hc, gc, nil
}

// listenFor returns the constructor of a bridge's socket.
func listenFor(busyPoll bool) func(local, peer netip.AddrPort) (*udp.Conn, error) {
	if busyPoll {
		return udp.ListenBusyPoll
	}
	return udp.Listen
}

func (l loopbackNet) raw() (*udp.Conn, *udp.Conn, []byte, error) {
	hc, gc, err := l.bridges(false)
	if err != nil {
		return nil, nil, nil, err
	}
	return hc.(*udp.Conn), gc.(*udp.Conn), nil, nil
}

func (loopbackNet) echo() (*echoPath, error) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	sc, err := net.ListenUDP("udp", lo)
	if err != nil {
		return nil, fmt.Errorf("e2ebench: echo server: %w", err)
	}
	cc, err := net.ListenUDP("udp", lo)
	if err != nil {
		sc.Close()
		return nil, fmt.Errorf("e2ebench: echo client: %w", err)
	}
	return plainEcho(cc, sc, sc.LocalAddr().(*net.UDPAddr).AddrPort(), nil), nil
}

func (loopbackNet) busyEcho() (*echoPath, error) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	sc, err := udp.ListenBusyPoll(lo, netip.AddrPort{})
	if err != nil {
		return nil, fmt.Errorf("e2ebench: busy-poll echo server: %w", err)
	}
	cc, err := udp.ListenBusyPoll(lo, sc.LocalAddr())
	if err != nil {
		sc.Close()
		return nil, fmt.Errorf("e2ebench: busy-poll echo client: %w", err)
	}
	sc.SetPeer(cc.LocalAddr())
	return busyEcho(cc, sc, nil), nil
}
