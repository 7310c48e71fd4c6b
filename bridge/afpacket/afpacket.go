// Package afpacket carries dxpu frames directly in Ethernet frames
// (EtherType 0x88B5, the dxpu header right after the Ethernet header) over
// an AF_PACKET socket bound to one interface, with
// github.com/mdlayher/packet; it implements driver.Transport. It needs
// CAP_NET_RAW.
package afpacket

import (
	"bytes"
	"fmt"
	"net"

	"github.com/mdlayher/packet"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Conn exchanges dxpu frames with one peer MAC address on one interface.
// Frames from other sources are ignored. The kernel writes and strips the
// Ethernet header (a SOCK_DGRAM packet socket); frames shorter than the
// Ethernet minimum arrive padded, which the dxpu body length makes
// harmless.
type Conn struct {
	c    *packet.Conn
	ifi  *net.Interface
	peer *packet.Addr
	// Foreign counts frames dropped for coming from another address.
	Foreign uint64
}

// Listen opens the socket on interface ifname towards peer.
func Listen(ifname string, peer net.HardwareAddr) (*Conn, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket: interface %q: %w", ifname, err)
	}
	if len(peer) != 6 {
		return nil, fmt.Errorf("afpacket: peer address %v: want a 6-byte MAC", peer)
	}
	c, err := packet.Listen(ifi, packet.Datagram, encap.EtherType, nil)
	if err != nil {
		return nil, fmt.Errorf("afpacket: listen on %s: %w", ifname, err)
	}
	return &Conn{c: c, ifi: ifi, peer: &packet.Addr{HardwareAddr: peer}}, nil
}

// MTU returns the interface MTU: the largest dxpu frame this link carries.
func (c *Conn) MTU() int { return c.ifi.MTU }

// Send transmits one frame to the peer.
func (c *Conn) Send(frame []byte) error {
	_, err := c.c.WriteTo(frame, c.peer)
	return err
}

// Recv returns the next frame from the peer.
func (c *Conn) Recv(buf []byte) (int, error) {
	for {
		n, from, err := c.c.ReadFrom(buf)
		if err != nil {
			return 0, fmt.Errorf("afpacket: receive: %w", err)
		}
		if a, ok := from.(*packet.Addr); !ok || !bytes.Equal(a.HardwareAddr, c.peer.HardwareAddr) {
			c.Foreign++
			continue
		}
		return n, nil
	}
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }
