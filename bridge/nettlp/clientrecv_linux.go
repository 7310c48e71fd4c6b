package nettlp

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/mmsg"
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
	recv1      mmsg.Call // recvmmsg without waiting; RawConn.Read waits
	have, next int       // datagrams the last call took, the next to hand out
	calls      int       // recvmmsg calls that took datagrams (tests)
}

func (r *clientRecv) init(c *net.UDPConn) {
	r.rc, _ = c.SyscallConn() // nil: recv falls back to Read
	r.recv1.Init(unix.SYS_RECVMMSG, &r.hdrs[0], unix.MSG_DONTWAIT)
	r.recv1.N = clientBatch
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
		for r.have == 0 { // a call that took nothing takes again
			if err := r.rc.Read(r.recv1.Fn); err != nil {
				return nil, err
			}
			if r.recv1.Err != nil {
				// As c.Read words it: "read udp A->B: connection refused".
				return nil, &net.OpError{Op: "read", Net: "udp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: os.NewSyscallError("recvmmsg", r.recv1.Err)}
			}
			r.have = r.recv1.Done
		}
		r.calls++
	}
	d := r.bufs[r.next][:r.hdrs[r.next].Len]
	r.next++
	return d, nil
}
