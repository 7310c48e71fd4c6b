package udp

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ListenBusyPoll is Listen for a socket that a busy-polling loop reads
// (driver.Runner.Poll from a spinning clock): the socket is not in the Go
// runtime's network poller. The poller watches its sockets with epoll and
// every datagram that arrives, and every one the kernel frees after
// sending, wakes a thread waiting in epoll_wait, which finds nobody to
// run: on a two-core machine that thread ran on the polling loop's core,
// twice per round trip, and doubled an MMIO read in one run of three.
// Here a goroutine that waits for the socket (WaitReadable, RecvBatch,
// a full send buffer) blocks in ppoll(2) on its own thread, and a loop
// that polls it wakes nobody.
func ListenBusyPoll(local, peer netip.AddrPort) (*Conn, error) {
	rs, err := openRawSock(local)
	if err != nil {
		return nil, fmt.Errorf("udp: listen %v: %w", local, err)
	}
	conn := &Conn{raw: rs}
	if err := conn.sys.initRC(rs); err != nil {
		rs.close()
		return nil, fmt.Errorf("udp: listen %v: %w", local, err)
	}
	conn.SetPeer(peer)
	return conn, nil
}

// rawSock is a non-blocking UDP socket outside the runtime's poller. It
// implements syscall.RawConn: Read and Write wait in ppoll(2) for the
// socket or for Close, which wakes them through an eventfd and closes the
// descriptors only once no call uses them.
type rawSock struct {
	fd, wake int
	local    netip.AddrPort
	closed   atomic.Bool
	use      sync.RWMutex // held shared by every call on fd; Close takes it
	once     sync.Once
}

func openRawSock(local netip.AddrPort) (*rawSock, error) {
	family := unix.AF_INET6
	if local.Addr().Unmap().Is4() {
		family = unix.AF_INET
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	fail := func(what string, err error) (*rawSock, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var sa unix.Sockaddr
	if family == unix.AF_INET {
		sa = &unix.SockaddrInet4{Port: int(local.Port()), Addr: local.Addr().Unmap().As4()}
	} else {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return fail("IPV6_V6ONLY", err)
		}
		sa = &unix.SockaddrInet6{Port: int(local.Port()), Addr: local.Addr().As16()}
	}
	// As Listen: room for bursts (the kernel caps it at rmem_max).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return fail("eventfd", err)
	}
	rs := &rawSock{fd: fd, wake: wake}
	switch a := bound.(type) {
	case *unix.SockaddrInet4:
		rs.local = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		rs.local = netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return rs, nil
}

// Control runs f on the descriptor.
func (s *rawSock) Control(f func(fd uintptr)) error {
	s.use.RLock()
	defer s.use.RUnlock()
	if s.closed.Load() {
		return net.ErrClosed
	}
	f(uintptr(s.fd))
	return nil
}

// Read calls f until it reports done, waiting for the socket to be
// readable in between.
func (s *rawSock) Read(f func(fd uintptr) bool) error { return s.loop(f, unix.POLLIN) }

// Write calls f until it reports done, waiting for the socket to be
// writable in between.
func (s *rawSock) Write(f func(fd uintptr) bool) error { return s.loop(f, unix.POLLOUT) }

func (s *rawSock) loop(f func(fd uintptr) bool, ev int16) error {
	s.use.RLock()
	defer s.use.RUnlock()
	fds := [2]unix.PollFd{{Fd: int32(s.fd), Events: ev}, {Fd: int32(s.wake), Events: unix.POLLIN}}
	for {
		if s.closed.Load() {
			return net.ErrClosed
		}
		if f(uintptr(s.fd)) {
			return nil
		}
		// Blocks this goroutine's thread (the runtime hands its
		// processor to others meanwhile).
		_, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 2, 0, 0, 0, 0)
		if e != 0 && e != unix.EINTR {
			return e
		}
	}
}

// close wakes every waiting call, waits for the calls to end and closes
// the descriptors.
func (s *rawSock) close() error {
	err := net.ErrClosed
	s.once.Do(func() {
		s.closed.Store(true)
		one := [8]byte{1}
		_, _ = unix.Write(s.wake, one[:])
		s.use.Lock()
		err = unix.Close(s.fd)
		unix.Close(s.wake)
		s.use.Unlock()
	})
	return err
}

// sendRaw is Send on a rawSock: one sendto(2) to the peer's prepared
// sockaddr (cheaper than a sendmmsg of one: no message headers to fill or
// to walk), waiting in ppoll while the send buffer is full.
func (c *Conn) sendRaw(frame []byte) error {
	c.txMu.Lock()
	defer c.txMu.Unlock()
	c.sys.one.frame = frame
	err := c.raw.Write(c.sys.one.fn)
	c.sys.one.frame = nil
	if err == nil {
		err = c.sys.one.err
	}
	return err
}

// recvRaw is Recv on a rawSock: a recvmmsg of one.
func (c *Conn) recvRaw(buf []byte) (int, error) {
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	bufs, sizes := [1][]byte{buf}, [1]int{}
	for {
		n, err := c.sys.recvBatch(c, bufs[:], sizes[:])
		if err != nil {
			return 0, wrapErr("receive", err)
		}
		if n > 0 {
			return sizes[0], nil
		}
	}
}
