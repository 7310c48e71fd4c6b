package nettlp

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batchSys sends a run of datagrams on one tag socket with sendmmsg.
type batchSys struct {
	rcs   []syscall.RawConn // per tag socket
	hdrs  [batchLen]unix.Mmsghdr
	iovs  [batchLen]unix.Iovec
	names [batchLen]unix.RawSockaddrInet4
	// One call's arguments and result, and the call as a func value
	// built once (RawConn.Write takes a func: no allocation per flush).
	at, cnt, done int
	errno         syscall.Errno
	fn            func(fd uintptr) bool
}

func (s *batchSys) init(t *Transport) {
	s.rcs = make([]syscall.RawConn, t.Tags())
	for i := range s.rcs {
		s.rcs[i], _ = t.conns[i].SyscallConn() // a nil one falls back to Send
	}
	for i := range s.hdrs {
		s.hdrs[i].Hdr.Iov = &s.iovs[i]
		s.hdrs[i].Hdr.SetIovlen(1)
		s.hdrs[i].Hdr.Name = (*byte)(unsafe.Pointer(&s.names[i]))
		s.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
	}
	s.fn = s.call
}

func (s *batchSys) call(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&s.hdrs[s.at])), uintptr(s.cnt), 0, 0, 0)
		switch e {
		case 0:
			s.done, s.errno = int(n), 0
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			s.done, s.errno = 0, e
		}
		return true
	}
}

// send sends msgs, all on one tag socket, in order; it returns how many
// left.
func (s *batchSys) send(t *Transport, msgs []batchMsg) (int, error) {
	port := msgs[0].port
	rc := s.rcs[port]
	if rc == nil {
		for i, m := range msgs {
			t.sendCalls.Add(1)
			if err := t.sendNumbered(port, m.dst, m.f); err != nil {
				return i, err
			}
		}
		return len(msgs), nil
	}
	for i, m := range msgs {
		s.iovs[i].Base = &m.f[0]
		s.iovs[i].SetLen(len(m.f))
		s.hdrs[i].Len = 0
		putSockaddr(&s.names[i], m.dst)
	}
	sent := 0
	for sent < len(msgs) {
		s.at, s.cnt = sent, len(msgs)-sent
		t.sendCalls.Add(1)
		if err := rc.Write(s.fn); err != nil {
			return sent, t.sendError(port, msgs[sent].dst, err)
		}
		if s.errno != 0 {
			return sent, t.sendError(port, msgs[sent].dst, s.errno)
		}
		if s.done <= 0 {
			return sent, t.sendError(port, msgs[sent].dst, unix.EIO)
		}
		sent += s.done
	}
	return sent, nil
}

func putSockaddr(sa *unix.RawSockaddrInet4, ap netip.AddrPort) {
	sa.Family = unix.AF_INET
	p := ap.Port()
	b := (*[2]byte)(unsafe.Pointer(&sa.Port)) // network order
	b[0], b[1] = byte(p>>8), byte(p)
	sa.Addr = ap.Addr().As4()
}
