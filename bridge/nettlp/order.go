package nettlp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// head is the one datagram of a socket received but not yet executed.
type head struct {
	held bool
	ts   int64 // kernel receive time, ns (CLOCK_REALTIME)
	n    int
	from netip.AddrPort
	buf  []byte

	// recvmsg arguments, built once: receiving allocates nothing.
	msg  unix.Msghdr
	iov  unix.Iovec
	name unix.RawSockaddrInet4
	oob  []byte
}

// sched executes the datagrams of all tag sockets in kernel arrival
// order. It holds at most one datagram per socket; the held datagram with
// the smallest receive timestamp runs once every socket without a held
// datagram has been seen empty after that timestamp: anything that
// arrives later is stamped later. (The kernel stamps a datagram before it
// queues it, so two sent within that gap, nanoseconds, could still cross.)
type sched struct {
	t     *Target
	fds   []int // dups of the sockets' fds, valid whatever Close does
	heads []head
	ports []portState
	pfds  []unix.PollFd
	idx   []int // socket of each pfds entry
	zero  unix.Timespec

	// The idle wait: an epoll set of all sockets, waited on through Go's
	// netpoller (a blocking poll(2) costs a thread hand-off per datagram).
	ep    *os.File
	erc   syscall.RawConn
	evs   [1]unix.EpollEvent
	ready func(fd uintptr) bool
	stop  atomic.Bool
}

func (t *Target) newSched() (*sched, error) {
	n := t.tr.Tags()
	s := &sched{t: t, heads: make([]head, n), ports: make([]portState, n),
		pfds: make([]unix.PollFd, 0, n), idx: make([]int, 0, n)}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("nettlp: epoll: %w", err)
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("nettlp: epoll: %w", err)
	}
	s.ep = os.NewFile(uintptr(epfd), "nettlp-epoll")
	if s.erc, err = s.ep.SyscallConn(); err != nil {
		s.close()
		return nil, fmt.Errorf("nettlp: epoll: %w", err)
	}
	s.ready = func(fd uintptr) bool {
		n, err := unix.EpollWait(int(fd), s.evs[:], 0)
		return n > 0 || (err != nil && err != unix.EINTR) || s.stop.Load()
	}
	for i := range n {
		c, err := NewCompleter(t.cfg.Completer, t.mem, HeaderLen, &t.stats)
		if err != nil {
			s.close()
			return nil, err
		}
		p := &s.ports[i]
		p.c = c
		p.emit = func(frame []byte) error {
			if err := t.tr.Send(i, p.src, frame); err != nil {
				t.stats.SendErrors.Add(1)
				p.sendErr = err
				return err
			}
			return nil
		}
		fd, err := dupFD(t.tr, i)
		if err != nil {
			s.close()
			return nil, err
		}
		s.fds = append(s.fds, fd)
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
			s.close()
			return nil, fmt.Errorf("nettlp: epoll: %w", err)
		}
		h := &s.heads[i]
		h.buf = make([]byte, MaxDatagram)
		h.oob = make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))
		h.iov.Base = &h.buf[0]
		h.iov.SetLen(len(h.buf))
		h.msg.Name = (*byte)(unsafe.Pointer(&h.name))
		h.msg.Iov = &h.iov
		h.msg.Iovlen = 1
		h.msg.Control = &h.oob[0]
	}
	return s, nil
}

// awaitArrivalStamps waits (a second at most) until the kernel stamps
// datagrams as they arrive. The first SO_TIMESTAMPNS socket turns arrival
// stamping on through a deferred work item; until it runs, a datagram is
// stamped when it is read, and stamps taken then say nothing of the order
// of arrival. A probe datagram to itself shows when the stamping is on: its
// stamp precedes the read.
func awaitArrivalStamps(addr netip.Addr) {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr, 0)))
	if err != nil {
		return
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		return
	}
	var serr error
	if rc.Control(func(f uintptr) { serr = unix.SetsockoptInt(int(f), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) }) != nil || serr != nil {
		return
	}
	to := c.LocalAddr().(*net.UDPAddr).AddrPort()
	b, oob := make([]byte, 8), make([]byte, unix.CmsgSpace(16))
	for range 1000 {
		if _, err := c.WriteToUDPAddrPort(b, to); err != nil {
			return
		}
		before := time.Now().UnixNano()
		if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
			return
		}
		_, oobn, _, _, err := c.ReadMsgUDPAddrPort(b, oob)
		if err != nil {
			return
		}
		if ts, ok := stampOf(oob[:oobn]); ok && ts < before {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// stampOf returns the SCM_TIMESTAMPNS stamp in oob, in ns.
func stampOf(oob []byte) (int64, bool) {
	if len(oob) < unix.CmsgSpace(16) {
		return 0, false
	}
	c := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
	if c.Level != unix.SOL_SOCKET || c.Type != unix.SCM_TIMESTAMPNS {
		return 0, false
	}
	d := oob[unix.CmsgLen(0):]
	return int64(binary.NativeEndian.Uint64(d))*1e9 + int64(binary.NativeEndian.Uint64(d[8:])), true
}

// dupFD returns a duplicate of socket i's descriptor with receive
// timestamps on.
func dupFD(tr *Transport, i int) (int, error) {
	rc, err := tr.Conn(i).SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("nettlp: tag port %#x: %w", Port(uint16(i)), err)
	}
	fd := -1
	var oerr error
	if cerr := rc.Control(func(f uintptr) {
		if oerr = unix.SetsockoptInt(int(f), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1); oerr != nil {
			return
		}
		fd, oerr = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0)
	}); cerr != nil {
		oerr = cerr
	}
	if oerr != nil {
		return -1, fmt.Errorf("nettlp: tag port %#x: timestamps: %w", Port(uint16(i)), oerr)
	}
	return fd, nil
}

func (s *sched) close() {
	for _, fd := range s.fds {
		unix.Close(fd)
	}
	s.fds = nil
	if s.ep != nil {
		s.ep.Close()
	}
}

// wake ends an idle wait for good (ctx done or the target closed).
func (s *sched) wake() {
	s.stop.Store(true)
	if s.ep != nil {
		_ = s.ep.SetReadDeadline(time.Unix(1, 0))
	}
}

func (s *sched) run(ctx context.Context) error {
	defer context.AfterFunc(ctx, s.wake)()
	for {
		if ctx.Err() != nil || s.t.tr.closed.Load() || s.stop.Load() {
			return nil
		}
		if !s.holding() {
			if err := s.erc.Read(s.ready); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("nettlp: wait on the tag ports: %w", err)
			}
		}
		// Every socket seen empty by the poll below stays empty until
		// after now: its next datagram is stamped later than now.
		now := time.Now().UnixNano()
		s.pfds, s.idx = s.pfds[:0], s.idx[:0]
		for i := range s.heads {
			if s.heads[i].held {
				continue
			}
			s.pfds = append(s.pfds, unix.PollFd{Fd: int32(s.fds[i]), Events: unix.POLLIN})
			s.idx = append(s.idx, i)
		}
		if len(s.pfds) > 0 {
			if _, err := unix.Ppoll(s.pfds, &s.zero, nil); err != nil && err != unix.EINTR {
				return fmt.Errorf("nettlp: poll the tag ports: %w", err)
			}
			for k, p := range s.pfds {
				if p.Revents == 0 {
					continue
				}
				if err := s.recv(s.idx[k]); err != nil {
					if s.t.tr.closed.Load() {
						return nil
					}
					return err
				}
			}
		}
		best := -1
		for i := range s.heads {
			if h := &s.heads[i]; h.held && (best < 0 || h.ts < s.heads[best].ts) {
				best = i
			}
		}
		if best < 0 || s.heads[best].ts > now {
			continue // not yet provably first: look again
		}
		h := &s.heads[best]
		h.held = false
		s.t.serve(best, &s.ports[best], h.buf[:h.n], h.from)
	}
}

// holding reports whether any socket's datagram is held.
func (s *sched) holding() bool {
	for i := range s.heads {
		if s.heads[i].held {
			return true
		}
	}
	return false
}

// recv takes socket i's next datagram, if any, as its head.
func (s *sched) recv(i int) error {
	h := &s.heads[i]
	h.msg.Namelen = uint32(unsafe.Sizeof(h.name))
	h.msg.SetControllen(len(h.oob))
	h.msg.Flags = 0
	for {
		n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(s.fds[i]), uintptr(unsafe.Pointer(&h.msg)), unix.MSG_DONTWAIT)
		switch errno {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return nil
		default:
			return fmt.Errorf("nettlp: receive on tag port %#x: %w", Port(uint16(i)), errno)
		}
		h.n = min(int(n), len(h.buf))
		break
	}
	port := (*[2]byte)(unsafe.Pointer(&h.name.Port))
	h.from = netip.AddrPortFrom(netip.AddrFrom4(h.name.Addr), binary.BigEndian.Uint16(port[:]))
	h.ts = time.Now().UnixNano() // no stamp: now is no earlier than the kernel's
	if ts, ok := stampOf(h.oob[:min(int(h.msg.Controllen), len(h.oob))]); ok {
		h.ts = ts
	}
	h.held = true
	return nil
}
