package udp

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/mmsg"
)

// sysConn holds the mmsghdr arrays of sendmmsg(2) and recvmmsg(2), built
// once with the Conn, so that a batch costs one system call and no
// allocation. The syscall closures are built once too and read their
// arguments from the struct (RawConn.Read/Write take a func value).
type sysConn struct {
	rc     syscall.RawConn
	family int

	peer4   unix.RawSockaddrInet4
	peer6   unix.RawSockaddrInet6
	peerPtr *byte
	peerLen uint32
	// The peer as recvmmsg reports it, to filter without parsing.
	peerAddr4  [4]byte
	peerAddr16 [16]byte
	peerPort   uint16 // network byte order, as in the sockaddr

	tx    [MaxBatch]unix.Mmsghdr
	txIov [MaxBatch]unix.Iovec
	send  mmsg.Call
	one   sendtoCall
	// gso: a run of equal-sized frames (the last may be shorter) goes
	// out as one message with a UDP_SEGMENT control message, and the
	// kernel cuts it into datagrams below the socket layer (on loopback,
	// not until the receiving socket, unless that socket has gro): one
	// pass through the stack instead of one per frame. Probed at init,
	// cleared for good on the first send the kernel refuses (see
	// gsoRefused).
	gso bool
	// gro: UDP_GRO is on (EnableGRO): a run of datagrams of one size
	// from one source may arrive as one message, its segment size in a
	// control message (rxCtl), which TryRecvSegments reports so that the
	// caller cuts the frames apart where they lie, without a copy.
	// (Cutting them into the caller's buffers, one frame each, with a
	// copy measured slower than no GRO.)
	gro   bool
	rxCtl [MaxBatch][groCtlWords]uint64
	// coalesced counts the messages received with more than one frame.
	coalesced atomic.Uint64
	// txCtl holds each message's control message (cmsghdr and segment
	// size; uint64 for the cmsghdr's alignment); txMsgFrames the frames
	// each message carries.
	txCtl       [MaxBatch][gsoCtlWords]uint64
	txMsgFrames [MaxBatch]int
	// segmented counts the frames that went out in a segmented message.
	segmented uint64

	rx     [MaxBatch]unix.Mmsghdr
	rxIov  [MaxBatch]unix.Iovec
	rxName [MaxBatch]unix.RawSockaddrInet6
	recv   mmsg.Call
	// tryRecv is recv that never waits (MSG_DONTWAIT), made through
	// RawConn.Control: that holds the descriptor open but takes no read
	// lock, so it runs while another goroutine waits in WaitReadable.
	tryRecv mmsg.Call
	// peek reports whether a datagram is queued, without taking it
	// (mmsg.Peek: after a wake-up, without looking again).
	peek *mmsg.Peek
}

// sendtoCall is one sendto(2) of frame to the peer, shaped like mmsg.Call.
type sendtoCall struct {
	s     *sysConn
	frame []byte
	err   error
	fn    func(fd uintptr) bool
}

func (o *sendtoCall) call(fd uintptr) bool {
	s := o.s
	var p unsafe.Pointer
	if len(o.frame) > 0 {
		p = unsafe.Pointer(&o.frame[0])
	}
	for {
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, fd, uintptr(p), uintptr(len(o.frame)), 0, uintptr(unsafe.Pointer(s.peerPtr)), uintptr(s.peerLen))
		switch e {
		case 0:
			o.err = nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			o.err = e
		}
		return true
	}
}

func (s *sysConn) init(c *net.UDPConn) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return s.initRC(rc)
}

// initRC is init for a socket given by its syscall.RawConn (a Conn's, or
// a rawSock of ListenBusyPoll).
func (s *sysConn) initRC(rc syscall.RawConn) error {
	s.rc = rc
	var serr error
	if err := rc.Control(func(fd uintptr) {
		s.family, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_DOMAIN: %w", serr)
	}
	s.gso = offloadOK(rc, unix.UDP_SEGMENT)
	s.send.Init(unix.SYS_SENDMMSG, &s.tx[0], 0)
	s.one.s = s
	s.one.fn = s.one.call
	s.recv.Init(unix.SYS_RECVMMSG, &s.rx[0], 0)
	s.tryRecv.Init(unix.SYS_RECVMMSG, &s.rx[0], unix.MSG_DONTWAIT)
	s.peek = mmsg.NewPeek()
	return nil
}

// bigEndian16 returns v as it lies in a sockaddr's port field.
func bigEndian16(v uint16) uint16 {
	var b [2]byte
	b[0], b[1] = byte(v>>8), byte(v)
	return *(*uint16)(unsafe.Pointer(&b[0]))
}

func (s *sysConn) setPeer(p netip.AddrPort) {
	a := p.Addr()
	s.peerPort = bigEndian16(p.Port())
	s.peerPtr, s.peerLen = nil, 0
	switch {
	case s.family == unix.AF_INET && a.Unmap().Is4():
		s.peerAddr4 = a.Unmap().As4()
		s.peer4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Port: s.peerPort, Addr: s.peerAddr4}
		s.peerPtr, s.peerLen = (*byte)(unsafe.Pointer(&s.peer4)), uint32(unsafe.Sizeof(s.peer4))
	case s.family == unix.AF_INET6 && a.IsValid():
		s.peerAddr16 = a.As16() // an IPv4 peer as ::ffff:a.b.c.d
		s.peer6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Port: s.peerPort, Addr: s.peerAddr16}
		if z := a.Zone(); z != "" {
			if i, err := strconv.Atoi(z); err == nil {
				s.peer6.Scope_id = uint32(i)
			} else if ifi, err := net.InterfaceByName(z); err == nil {
				s.peer6.Scope_id = uint32(ifi.Index)
			}
		}
		s.peerPtr, s.peerLen = (*byte)(unsafe.Pointer(&s.peer6)), uint32(unsafe.Sizeof(s.peer6))
	}
	// Otherwise (no peer yet, or an IPv6 peer on an IPv4 socket) the
	// message has no address and sendmmsg fails with EDESTADDRREQ.
}

func (s *sysConn) sendBatch(_ *Conn, frames [][]byte) (int, error) {
	for {
		gso := s.gso
		s.send.N = s.fillTx(frames, gso)
		err := s.rc.Write(s.send.Fn)
		for i := range frames {
			s.txIov[i].Base = nil // keep no reference to the caller's frames
		}
		if err != nil {
			return 0, err
		}
		if s.send.Err != nil && gso && s.txMsgFrames[0] > 1 && gsoRefused(s.send.Err) {
			// The first message failed (sendmmsg reports an error only
			// when nothing went out) and it was a segmented one: send
			// every frame on its own from now on.
			s.gso = false
			continue
		}
		n := 0
		for _, k := range s.txMsgFrames[:s.send.Done] {
			n += k
			if k > 1 {
				s.segmented += uint64(k)
			}
		}
		return n, s.send.Err
	}
}

// gsoMaxBytes bounds a segmented message: the largest UDP payload of an
// IPv4 datagram (the kernel refuses a larger one).
const gsoMaxBytes = MaxPayload

// gsoCtlWords is a UDP_SEGMENT control message (a cmsghdr and a uint16,
// padded) in uint64s.
const gsoCtlWords = (unix.SizeofCmsghdr + 8 + 7) / 8

// fillTx points the send headers at frames and returns how many messages
// they make: one per frame, or with gso one per run of equal-sized frames
// (the last may be shorter), as the kernel's UDP_SEGMENT takes them.
func (s *sysConn) fillTx(frames [][]byte, gso bool) int {
	for i, f := range frames {
		iov := &s.txIov[i]
		iov.Base = nil
		if len(f) > 0 {
			iov.Base = &f[0]
		}
		iov.SetLen(len(f))
	}
	m := 0
	for i := 0; i < len(frames); m++ {
		k, seg := 1, len(frames[i])
		if gso && seg > 0 {
			total := seg
			for i+k < len(frames) {
				l := len(frames[i+k])
				if l > seg || l == 0 || total+l > gsoMaxBytes {
					break
				}
				total += l
				k++
				if l < seg {
					break // a shorter frame ends the message
				}
			}
		}
		h := &s.tx[m]
		h.Hdr = unix.Msghdr{Name: s.peerPtr, Namelen: s.peerLen, Iov: &s.txIov[i]}
		h.Hdr.SetIovlen(k)
		h.Len = 0
		if k > 1 {
			ctl := &s.txCtl[m]
			c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
			c.Level, c.Type = unix.SOL_UDP, unix.UDP_SEGMENT
			c.SetLen(unix.CmsgLen(2))
			*(*uint16)(unsafe.Pointer(uintptr(unsafe.Pointer(&ctl[0])) + uintptr(unix.CmsgLen(0)))) = uint16(seg)
			h.Hdr.Control = (*byte)(unsafe.Pointer(&ctl[0]))
			h.Hdr.SetControllen(unix.CmsgSpace(2))
		}
		s.txMsgFrames[m] = k
		i += k
	}
	return m
}

// gsoRefused reports whether a send failed for its UDP_SEGMENT: the kernel
// refuses segmentation on a socket without UDP checksums (EINVAL), on an
// IPsec path or a device without checksum offload (EIO), for a segment
// above the path MTU (EMSGSIZE, EINVAL before Linux 5.x), or knows nothing
// of it (ENOPROTOOPT, EOPNOTSUPP).
func gsoRefused(err error) bool {
	switch err {
	case unix.EINVAL, unix.EIO, unix.EMSGSIZE, unix.ENOPROTOOPT, unix.EOPNOTSUPP:
		return true
	}
	return false
}

// offloadOK asks the kernel whether the socket knows the UDP-level option
// opt (UDP_SEGMENT), reading it only (set on the socket it would segment
// every send).
func offloadOK(rc syscall.RawConn, opt int) bool {
	if offloadRefuse != nil && offloadRefuse(opt) {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		_, err := unix.GetsockoptInt(int(fd), unix.SOL_UDP, opt)
		ok = err == nil
	})
	return ok
}

// offloadRefuse, set by tests, plays a kernel that refuses opt.
var offloadRefuse func(opt int) bool

func (s *sysConn) recvBatch(c *Conn, bufs [][]byte, sizes []int) (int, error) {
	s.prepareRecv(bufs)
	s.recv.N = len(bufs)
	if err := s.rc.Read(s.recv.Fn); err != nil {
		return 0, err
	}
	return s.received(c, &s.recv, bufs, sizes)
}

// tryRecvBatch is recvBatch that returns 0 at once when nothing is
// queued.
func (s *sysConn) tryRecvBatch(c *Conn, bufs [][]byte, sizes []int) (int, error) {
	s.prepareRecv(bufs)
	s.tryRecv.N = len(bufs)
	if err := s.rc.Control(s.tryRecv.Ctl); err != nil {
		return 0, err
	}
	return s.received(c, &s.tryRecv, bufs, sizes)
}

// waitReadable parks until a datagram is queued.
func (s *sysConn) waitReadable() error { return s.rc.Read(s.peek.Fn) }

// groCtlWords holds a UDP_GRO control message (a cmsghdr and an int) in
// uint64s, with room for one more (a kernel may add others).
const groCtlWords = 2 * ((unix.SizeofCmsghdr + 4 + 7) / 8)

// enableGRO turns UDP_GRO on; false where the kernel refuses it.
func (s *sysConn) enableGRO() bool {
	if offloadRefuse != nil && offloadRefuse(unix.UDP_GRO) {
		return false
	}
	var serr error
	if err := s.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1)
	}); err != nil || serr != nil {
		return false
	}
	s.gro = true
	return true
}

// tryRecvSegments is tryRecvBatch that reports each message's segment
// size in segs.
func (s *sysConn) tryRecvSegments(c *Conn, bufs [][]byte, sizes, segs []int) (int, error) {
	s.prepareRecv(bufs)
	s.tryRecv.N = len(bufs)
	if err := s.rc.Control(s.tryRecv.Ctl); err != nil {
		return 0, err
	}
	return s.receivedSegments(c, &s.tryRecv, bufs, sizes, segs)
}

// receivedSegments is received for tryRecvSegments: segs[i] is the size
// of the frames in bufs[i][:sizes[i]] (the last may be shorter), the
// whole message when it is one datagram. With segs nil it is received.
func (s *sysConn) receivedSegments(c *Conn, call *mmsg.Call, bufs [][]byte, sizes, segs []int) (int, error) {
	if call.Err != nil {
		return 0, call.Err
	}
	got := 0
	for i := 0; i < call.Done; i++ {
		if !c.anySource && !s.fromPeer(&s.rxName[i]) {
			c.Foreign.Add(1)
			continue
		}
		n := min(int(s.rx[i].Len), len(bufs[i]))
		if got != i {
			copy(bufs[got], bufs[i][:n])
		}
		sizes[got] = n
		if segs != nil {
			seg := s.segSize(&s.rx[i].Hdr)
			if seg <= 0 || seg >= n {
				seg = n
			} else {
				s.coalesced.Add(1)
			}
			segs[got] = seg
		}
		got++
	}
	for i := range bufs {
		s.rxIov[i].Base = nil
	}
	return got, nil
}

// segSize returns the UDP_GRO segment size of a received message, or 0
// when it has none (one datagram).
func (s *sysConn) segSize(h *unix.Msghdr) int {
	if h.Controllen == 0 || h.Control == nil {
		return 0
	}
	ctl := unsafe.Slice(h.Control, h.Controllen)
	for len(ctl) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctl[0]))
		l := int(c.Len)
		if l < unix.SizeofCmsghdr || l > len(ctl) {
			return 0
		}
		if c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && l >= unix.CmsgLen(4) {
			return int(*(*int32)(unsafe.Pointer(&ctl[unix.CmsgLen(0)])))
		}
		sp := unix.CmsgSpace(l - unix.CmsgLen(0))
		if sp >= len(ctl) {
			return 0
		}
		ctl = ctl[sp:]
	}
	return 0
}

// prepareRecv points the receive headers at bufs.
func (s *sysConn) prepareRecv(bufs [][]byte) {
	for i, b := range bufs {
		iov := &s.rxIov[i]
		iov.Base = nil
		if len(b) > 0 {
			iov.Base = &b[0]
		}
		iov.SetLen(len(b))
		h := &s.rx[i]
		h.Hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&s.rxName[i])), Namelen: uint32(unsafe.Sizeof(s.rxName[i])), Iov: iov}
		h.Hdr.SetIovlen(1)
		if s.gro {
			h.Hdr.Control = (*byte)(unsafe.Pointer(&s.rxCtl[i][0]))
			h.Hdr.SetControllen(groCtlWords * 8)
		}
		h.Len = 0
	}
}

// received filters what call took into bufs: frames from the peer only,
// moved to the front.
func (s *sysConn) received(c *Conn, call *mmsg.Call, bufs [][]byte, sizes []int) (int, error) {
	return s.receivedSegments(c, call, bufs, sizes, nil)
}

func (s *sysConn) fromPeer(name *unix.RawSockaddrInet6) bool {
	switch name.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(name))
		return s.family == unix.AF_INET && sa.Port == s.peerPort && sa.Addr == s.peerAddr4 && s.peerLen > 0
	case unix.AF_INET6:
		return s.family == unix.AF_INET6 && name.Port == s.peerPort && name.Addr == s.peerAddr16 && s.peerLen > 0
	}
	return false
}

func (s *sysConn) noOffload() {
	s.gso = false
	if s.gro {
		_ = s.rc.Control(func(fd uintptr) {
			_ = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 0)
		})
		s.gro = false
	}
}
