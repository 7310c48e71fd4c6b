// Package afpacket carries dxpu frames directly in Ethernet frames
// (EtherType 0x88B5, the dxpu header right after the Ethernet header) over
// an AF_PACKET socket bound to one interface, with
// github.com/mdlayher/packet; it implements driver.Transport. It needs
// CAP_NET_RAW.
//
// On Linux a runner moves frames in batches (driver.BatchSender,
// BatchReceiver and Poller): up to MaxBatch frames per sendmmsg(2) or
// recvmmsg(2), the peer's address and the message headers built once, so
// the hot path costs a system call per batch and allocates nothing. With
// 1500-byte frames a bridge pair over a veth pair used about half the CPU
// per TLP that a system call per frame did (BenchmarkPairOverVeth).
package afpacket

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/mdlayher/packet"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Conn exchanges dxpu frames with one peer MAC address on one interface.
// Frames from other sources are dropped and counted (ForeignDropped). The
// kernel writes and strips the Ethernet header (a SOCK_DGRAM packet
// socket); frames shorter than the Ethernet minimum arrive padded, which
// the dxpu body length makes harmless.
type Conn struct {
	c    *packet.Conn
	ifi  *net.Interface
	peer *packet.Addr
	// Foreign counts frames dropped for coming from another address than
	// the peer's (ForeignDropped reads it; driver.Runner exports it as
	// bridge.Counters.DroppedForeignSource). Atomic: the receiving
	// goroutine counts while a metrics scrape reads.
	Foreign atomic.Uint64

	raw *packet.Conn // SendTagged's (ListenTagging)
	b   batch        // SendBatch's and the receives' system calls
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
	conn := &Conn{c: c, ifi: ifi, peer: &packet.Addr{HardwareAddr: peer}}
	if err := conn.initBatch(); err != nil {
		c.Close()
		return nil, err
	}
	return conn, nil
}

// ListenTagging is Listen with SendTagged: it opens a second socket
// (SOCK_RAW, bound to no EtherType: it receives nothing), here, in the
// caller's network namespace.
func ListenTagging(ifname string, peer net.HardwareAddr) (*Conn, error) {
	c, err := Listen(ifname, peer)
	if err != nil {
		return nil, err
	}
	if c.raw, err = packet.Listen(c.ifi, packet.Raw, 0, nil); err != nil {
		c.c.Close()
		return nil, fmt.Errorf("afpacket: raw socket on %s: %w", ifname, err)
	}
	return c, nil
}

// MTU returns the interface MTU: the largest dxpu frame this link carries.
func (c *Conn) MTU() int { return c.ifi.MTU }

// Send transmits one frame to the peer.
func (c *Conn) Send(frame []byte) error {
	_, err := c.c.WriteTo(frame, c.peer)
	return err
}

// SendTagged transmits one frame to the peer behind VLAN tags, outermost
// first, each TPID<<16 | TCI: a checker's way to see that the peer takes
// tagged frames (FRM-1). It writes the whole Ethernet header itself on
// the second socket of ListenTagging; not for the hot path.
func (c *Conn) SendTagged(frame []byte, tags ...uint32) error {
	if c.raw == nil {
		return fmt.Errorf("afpacket: %s: tagged frames need ListenTagging", c.ifi.Name)
	}
	b := make([]byte, 0, 14+4*len(tags)+len(frame))
	b = append(b, c.peer.HardwareAddr...)
	b = append(b, c.ifi.HardwareAddr...)
	for _, t := range tags {
		b = binary.BigEndian.AppendUint32(b, t)
	}
	b = binary.BigEndian.AppendUint16(b, encap.EtherType)
	_, err := c.raw.WriteTo(append(b, frame...), c.peer)
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
			c.Foreign.Add(1)
			continue
		}
		return n, nil
	}
}

// ForeignDropped returns how many frames c dropped for coming from an
// address other than the peer's; any goroutine may call it.
func (c *Conn) ForeignDropped() uint64 { return c.Foreign.Load() }

// Close closes the sockets.
func (c *Conn) Close() error {
	if c.raw != nil {
		c.raw.Close()
	}
	return c.c.Close()
}
