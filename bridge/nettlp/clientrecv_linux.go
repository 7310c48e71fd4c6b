package nettlp

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// clientBatch is how many datagrams one recvmmsg of a Client takes: half
// of a 4 KiB read's 16 CplDs at MPS 256, which the adapter sends in one
// burst.
const clientBatch = 8

// clientRecv takes a Client's completion datagrams up to clientBatch at a
// time (recvmmsg) and hands them out one by one, in arrival order: a
// read's completions come in a burst, and one system call and one wake-up
// per datagram cost the reading process more than the bridges it
// measures (`dxpu bench scale`'s load). What a call took past the read's
// last completion stays for the next read, as it stayed in the socket.
type clientRecv struct {
	rc         syscall.RawConn
	bufs       [][]byte // clientBatch buffers of MaxDatagram, made on first use
	hdrs       [clientBatch]unix.Mmsghdr
	iovs       [clientBatch]unix.Iovec
	have, next int   // datagrams the last call took, the next to hand out
	errno      error // the last call's error
	fn         func(fd uintptr) bool
	calls      int // recvmmsg calls that took datagrams (tests)
}

func (r *clientRecv) init(c *net.UDPConn) {
	r.rc, _ = c.SyscallConn() // nil: recv falls back to Read
	r.fn = r.call
}

// pending reports whether a datagram taken earlier waits.
func (r *clientRecv) pending() bool { return r.next < r.have }

// recv returns the next datagram, waiting for some (up to c's read
// deadline) when none is left; it is valid until the next call.
func (r *clientRecv) recv(c *net.UDPConn, one []byte) ([]byte, error) {
	if r.rc == nil {
		n, err := c.Read(one)
		return one[:n], err
	}
	if r.next == r.have {
		if r.bufs == nil {
			slab := make([]byte, clientBatch*MaxDatagram)
			r.bufs = make([][]byte, clientBatch)
			for i := range r.bufs {
				r.bufs[i] = slab[i*MaxDatagram : (i+1)*MaxDatagram : (i+1)*MaxDatagram]
				r.iovs[i].Base = &r.bufs[i][0]
				r.iovs[i].SetLen(MaxDatagram)
				r.hdrs[i].Hdr.Iov = &r.iovs[i]
				r.hdrs[i].Hdr.SetIovlen(1)
			}
		}
		r.have, r.next = 0, 0
		if err := r.rc.Read(r.fn); err != nil {
			return nil, err
		}
		if r.errno != nil {
			return nil, r.errno
		}
	}
	d := r.bufs[r.next][:r.hdrs[r.next].Len]
	r.next++
	return d, nil
}

// call is one recvmmsg without waiting; false (nothing queued) has
// RawConn.Read wait until the socket is readable or the deadline passes.
func (r *clientRecv) call(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&r.hdrs[0])), clientBatch, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			r.have, r.errno = int(n), nil
			r.calls++
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			r.have, r.errno = 0, e
		}
		return true
	}
}
