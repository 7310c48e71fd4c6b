package nettlp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRecvBuffer is the receive buffer each tag socket asks for. Posted
// writes are never acknowledged, so a datagram the kernel drops for want
// of buffer is data lost without a trace: ask for a lot.
const DefaultRecvBuffer = 8 << 20

// TransportConfig configures a Transport.
type TransportConfig struct {
	// Local is the address every tag socket binds. It must be a specific
	// IPv4 address: NetTLP peers on one machine need two addresses
	// (127.0.0.1 and 127.0.0.2, say), and replies must leave from the
	// address and port the request went to.
	Local netip.Addr
	// Tags is the number of tag ports, 0x3000 .. 0x3000+Tags-1 (1..16;
	// default 16).
	Tags int
	// RecvBuffer is the receive buffer per socket in bytes (default
	// DefaultRecvBuffer). With CAP_NET_ADMIN it is forced past
	// net.core.rmem_max; without, the kernel caps it there.
	RecvBuffer int
}

// Transport is NetTLP's UDP plumbing: one socket per tag, bound to
// Local:0x3000+tag. Send prefixes each TLP with the NetTLP header, a
// running sequence number per socket and a timestamp.
type Transport struct {
	local  netip.Addr
	conns  []*net.UDPConn
	seq    []atomic.Uint32
	rcvbuf []int
	start  time.Time
	closed atomic.Bool
	// sendCalls counts send system calls (sendto or sendmmsg).
	sendCalls atomic.Uint64
}

// Listen opens the tag sockets.
func Listen(cfg TransportConfig) (*Transport, error) {
	if cfg.Tags == 0 {
		cfg.Tags = MaxTags
	}
	if cfg.Tags < 1 || cfg.Tags > MaxTags {
		return nil, fmt.Errorf("%w: %d tags: want 1..%d", ErrConfig, cfg.Tags, MaxTags)
	}
	if !cfg.Local.Is4() || cfg.Local.IsUnspecified() {
		return nil, fmt.Errorf("%w: local address %v: want a specific IPv4 address (not 0.0.0.0)", ErrConfig, cfg.Local)
	}
	if cfg.RecvBuffer == 0 {
		cfg.RecvBuffer = DefaultRecvBuffer
	}
	t := &Transport{local: cfg.Local, seq: make([]atomic.Uint32, cfg.Tags), rcvbuf: make([]int, cfg.Tags), start: time.Now()}
	for i := 0; i < cfg.Tags; i++ {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cfg.Local, Port(uint16(i)))))
		if err != nil {
			t.Close()
			return nil, fmt.Errorf("nettlp: tag %d: %w", i, err)
		}
		t.conns = append(t.conns, c)
		t.rcvbuf[i] = setRecvBuffer(c, cfg.RecvBuffer)
	}
	return t, nil
}

// setRecvBuffer asks for n bytes of receive buffer, forcing past rmem_max
// where allowed, and returns what the kernel granted (it doubles the
// request for its bookkeeping).
func setRecvBuffer(c *net.UDPConn, n int) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	got := 0
	_ = rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n) != nil {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
		}
		got, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	return got
}

// Local returns the bound address.
func (t *Transport) Local() netip.Addr { return t.local }

// Tags returns the number of tag sockets.
func (t *Transport) Tags() int { return len(t.conns) }

// Conn returns the socket of tag port i (0 <= i < Tags()).
func (t *Transport) Conn(i int) *net.UDPConn { return t.conns[i] }

// RecvBuffer returns the receive buffer the kernel granted socket i.
func (t *Transport) RecvBuffer(i int) int { return t.rcvbuf[i] }

// Timestamp is the value Send puts in the header: nanoseconds since the
// transport opened, modulo 2^32.
func (t *Transport) Timestamp() uint32 { return uint32(time.Since(t.start).Nanoseconds()) }

// Send sends frame from socket i to dst. frame starts with HeaderLen bytes
// of headroom, which Send fills with the next sequence number of socket i
// and a timestamp; the TLP follows.
func (t *Transport) Send(i int, dst netip.AddrPort, frame []byte) error {
	if len(frame) <= HeaderLen {
		return fmt.Errorf("%w: frame of %d bytes holds no TLP after the %d-byte header", ErrShortDatagram, len(frame), HeaderLen)
	}
	Header(frame).Put(uint16(t.seq[i].Add(1)-1), t.Timestamp())
	t.sendCalls.Add(1)
	return t.sendNumbered(i, dst, frame)
}

// sendNumbered sends a frame whose header is filled.
func (t *Transport) sendNumbered(i int, dst netip.AddrPort, frame []byte) error {
	if _, err := t.conns[i].WriteToUDPAddrPort(frame, dst); err != nil {
		return t.sendError(i, dst, err)
	}
	return nil
}

func (t *Transport) sendError(i int, dst netip.AddrPort, err error) error {
	if t.closed.Load() || errors.Is(err, net.ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("nettlp: send on tag port %#x to %v: %w", Port(uint16(i)), dst, err)
}

// SendCalls returns how many send system calls the transport made (one
// per Send, one per run of a Batch where sendmmsg is available).
func (t *Transport) SendCalls() uint64 { return t.sendCalls.Load() }

// Close closes every socket; blocked reads return.
func (t *Transport) Close() error {
	t.closed.Store(true)
	var first error
	for _, c := range t.conns {
		if err := c.Close(); err != nil && first == nil && !errors.Is(err, net.ErrClosed) {
			first = err
		}
	}
	return first
}

// recvLoop reads datagrams from socket i and hands each to fn with its
// source until the socket is closed (nil) or fails (the error). buf is
// reused between calls.
func (t *Transport) recvLoop(i int, fn func(d []byte, src netip.AddrPort)) error {
	buf := make([]byte, MaxDatagram)
	c := t.conns[i]
	for {
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if t.closed.Load() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("nettlp: receive on tag port %#x: %w", Port(uint16(i)), err)
		}
		fn(buf[:n], src)
	}
}
