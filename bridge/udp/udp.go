// Package udp carries dxpu frames in UDP datagrams (the dxpu header is the
// UDP payload), for routed networks; it implements driver.Transport and,
// on Linux, the batch interfaces driver.BatchSender and
// driver.BatchReceiver with sendmmsg(2) and recvmmsg(2): one system call
// moves up to a batch of datagrams, and no call allocates; also
// driver.Poller (TryRecvBatch, WaitReadable), so that a busy-polling loop
// can take frames from the socket without waking the runner's goroutine.
//
// Where the kernel offers it, a batch's runs of equal-sized frames go out
// as one message that the kernel segments (UDP_SEGMENT); a socket whose
// kernel refuses it sends a datagram per frame. A receiver that asks for
// it (EnableGRO, then TryRecvSegments) takes such a run as one message
// and cuts it apart itself (UDP_GRO).
package udp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// MaxBatch is the most datagrams one SendBatch or RecvBatch system call
// moves; longer batches are split.
const MaxBatch = 64

// MaxPayload is the most an IPv4 UDP datagram carries (65535 less the IPv4
// and UDP headers): the largest frame over UDP.
const MaxPayload = 65507

// Conn is a UDP socket bound to a local address that exchanges frames with
// one peer. Datagrams from other sources are dropped and counted
// (ForeignDropped). Send and SendBatch
// may be called from several goroutines; Recv and RecvBatch from one at a
// time.
type Conn struct {
	c    *net.UDPConn
	raw  *rawSock // in place of c: a socket of ListenBusyPoll
	one  [1][]byte
	peer netip.AddrPort
	// Foreign counts datagrams dropped for coming from another address
	// than the peer's (ForeignDropped reads it; driver.Runner exports it
	// as bridge.Counters.DroppedForeignSource). Atomic: the receiving
	// goroutine counts while a metrics scrape reads.
	Foreign atomic.Uint64

	// anySource: a Mux's socket, which takes frames from every source
	// (each pair's bridge checks its own).
	anySource bool

	txMu sync.Mutex
	rxMu sync.Mutex
	sys  sysConn // platform batch state (mmsghdr arrays on Linux)
}

// Listen binds local (port 0 picks one) and sends to peer.
func Listen(local, peer netip.AddrPort) (*Conn, error) {
	c, err := listenPlain(local, peer)
	if err != nil {
		return nil, fmt.Errorf("udp: %w", err)
	}
	return c, nil
}

// listenPlain is Listen without the package's prefix on its error.
func listenPlain(local, peer netip.AddrPort) (*Conn, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(local))
	if err != nil {
		return nil, listenError(local, err)
	}
	return newConn(c, local, peer)
}

// listenError names the address as given (net's error names it again,
// and a wildcard [::] as 0.0.0.0), then why: "listen [::]:8855: bind:
// address already in use". errors.Is still finds the errno.
func listenError(local netip.AddrPort, err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	return fmt.Errorf("listen %v: %w", local, err)
}

// newConn makes a Conn of a bound socket (closed on an error).
func newConn(c *net.UDPConn, local, peer netip.AddrPort) (*Conn, error) {
	_ = c.SetReadBuffer(8 << 20)
	_ = c.SetWriteBuffer(8 << 20)
	conn := &Conn{c: c}
	if err := conn.sys.init(c); err != nil {
		c.Close()
		return nil, fmt.Errorf("udp: listen %v: %w", local, err)
	}
	conn.SetPeer(peer)
	return conn, nil
}

// LocalAddr returns the bound address.
func (c *Conn) LocalAddr() netip.AddrPort {
	if c.raw != nil {
		return c.raw.local
	}
	return c.c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// SetPeer changes the peer (before traffic starts).
func (c *Conn) SetPeer(p netip.AddrPort) {
	c.peer = p
	c.sys.setPeer(p)
}

// Send transmits one frame to the peer.
func (c *Conn) Send(frame []byte) error {
	if c.raw != nil {
		return c.sendRaw(frame)
	}
	_, err := c.c.WriteToUDPAddrPort(frame, c.peer)
	return err
}

// SendBatch transmits frames to the peer in order, up to MaxBatch per
// system call, and returns how many went out. On an error the frame at
// index n failed and the ones after it were not tried.
func (c *Conn) SendBatch(frames [][]byte) (int, error) {
	if len(frames) == 1 {
		// sendto is a little cheaper than a sendmmsg of one.
		if err := c.Send(frames[0]); err != nil {
			return 0, wrapErr("send", err)
		}
		return 1, nil
	}
	c.txMu.Lock()
	defer c.txMu.Unlock()
	sent := 0
	for sent < len(frames) {
		n, err := c.sys.sendBatch(c, frames[sent:min(len(frames), sent+MaxBatch)])
		sent += n
		if err != nil {
			return sent, wrapErr("send", err)
		}
	}
	return sent, nil
}

// Recv returns the next frame from the peer.
func (c *Conn) Recv(buf []byte) (int, error) {
	if c.raw != nil {
		return c.recvRaw(buf)
	}
	for {
		n, from, err := c.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return 0, wrapErr("receive", err)
		}
		if !c.fromPeer(from) {
			c.Foreign.Add(1)
			continue
		}
		return n, nil
	}
}

// RecvBatch blocks until at least one frame from the peer is queued, then
// takes as many as are queued, up to len(bufs) and MaxBatch, into bufs
// and their lengths into sizes (which must be as long as bufs). It returns
// how many frames it took. A datagram longer than its buffer is cut to it.
func (c *Conn) RecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if len(sizes) < len(bufs) {
		return 0, fmt.Errorf("udp: receive: %d sizes for %d buffers", len(sizes), len(bufs))
	}
	bufs = bufs[:min(len(bufs), MaxBatch)]
	if len(bufs) == 0 {
		return 0, errors.New("udp: receive: no buffers")
	}
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	for {
		n, err := c.sys.recvBatch(c, bufs, sizes)
		if err != nil {
			return 0, wrapErr("receive", err)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// ForeignDropped returns how many datagrams c dropped for coming from an
// address other than the peer's; any goroutine may call it.
func (c *Conn) ForeignDropped() uint64 { return c.Foreign.Load() }

func (c *Conn) fromPeer(from netip.AddrPort) bool {
	if c.anySource {
		return true
	}
	return from.Addr().Unmap() == c.peer.Addr().Unmap() && from.Port() == c.peer.Port()
}

func wrapErr(op string, err error) error {
	if errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("udp: %w", net.ErrClosed)
	}
	return fmt.Errorf("udp: %s: %w", op, err)
}

// Close closes the socket.
func (c *Conn) Close() error {
	if c.raw != nil {
		return c.raw.close()
	}
	return c.c.Close()
}

// NoOffload makes c send every datagram in a message of its own, as a
// plain socket does (no UDP segmentation offload): the raw baselines
// measure what the network carries without the bridges' batching.
func (c *Conn) NoOffload() {
	c.txMu.Lock()
	defer c.txMu.Unlock()
	c.sys.noOffload()
}
