package udp

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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
	send  mmsgCall
	one   sendtoCall
	// gso: a run of equal-sized frames (the last may be shorter) goes
	// out as one message with a UDP_SEGMENT control message, and the
	// kernel cuts it into datagrams below the socket layer (on loopback
	// and veth, not at all until the receiving socket): one pass through
	// the stack instead of one per frame. Probed at init, cleared for
	// good on the first send the kernel refuses (see gsoRefused).
	gso bool
	// txCtl holds each message's control message (cmsghdr and segment
	// size; uint64 for the cmsghdr's alignment); txMsgFrames the frames
	// each message carries.
	txCtl       [MaxBatch][gsoCtlWords]uint64
	txMsgFrames [MaxBatch]int
	// segmented and coalesced count the frames that went out in a
	// segmented message and came in a coalesced one.
	segmented, coalesced uint64

	rx     [MaxBatch]unix.Mmsghdr
	rxIov  [MaxBatch]unix.Iovec
	rxName [MaxBatch]unix.RawSockaddrInet6
	recv   mmsgCall
	// gro: UDP_GRO is on, so one message may hold several datagrams of
	// the peer's (equal-sized segments, the last may be shorter, the
	// size in a control message): what a UDP_SEGMENT sender sent as one
	// stays one on loopback and veth, one pass through the stack and
	// one socket queue entry. It is turned on by the first receive whose
	// buffers all hold the largest message (groMin), never by Listen: a
	// reader with smaller buffers would see datagrams run together.
	gro, groTried bool
	rxCtl         [MaxBatch][groCtlWords]uint64
	// stash holds the datagrams of coalesced messages that did not fit
	// the caller's buffers (and, for a caller with small buffers, the
	// message it received), served before the next system call.
	stash     []byte
	stashLens []int
	stashHead int
	stashOff  int
	stashBufs [1][]byte
	// tryRecv is recv that never waits (MSG_DONTWAIT), made through
	// RawConn.Control: that holds the descriptor open but takes no read
	// lock, so it runs while another goroutine waits in WaitReadable.
	tryRecv mmsgCall
	// peek reports whether a datagram is queued, without taking it.
	peek     func(fd uintptr) bool
	peekByte [1]byte
}

// mmsgCall is one sendmmsg or recvmmsg over n headers, shaped for
// RawConn.Read/Write: fn is built once (no allocation per batch) and leaves
// its result in done and err.
type mmsgCall struct {
	trap  uintptr
	hdrs  *unix.Mmsghdr
	n     int
	flags uintptr
	done  int
	err   error
	fn    func(fd uintptr) bool
	ctl   func(fd uintptr) // fn for RawConn.Control
}

func (m *mmsgCall) init(trap uintptr, hdrs *unix.Mmsghdr, flags uintptr) {
	m.trap, m.hdrs, m.flags = trap, hdrs, flags
	m.fn = m.call
	m.ctl = func(fd uintptr) {
		if !m.call(fd) {
			m.done, m.err = 0, nil // nothing queued
		}
	}
}

// call makes the system call; false (EAGAIN) asks the runtime poller to
// wait until the socket is ready.
func (m *mmsgCall) call(fd uintptr) bool {
	for {
		n, _, e := unix.Syscall6(m.trap, fd, uintptr(unsafe.Pointer(m.hdrs)), uintptr(m.n), m.flags, 0, 0)
		switch e {
		case 0:
			m.done, m.err = int(n), nil
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			m.done, m.err = 0, e
		}
		return true
	}
}

// sendtoCall is one sendto(2) of frame to the peer, shaped like mmsgCall.
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
	s.gso = offloadOK(rc, unix.UDP_SEGMENT, false)
	s.send.init(unix.SYS_SENDMMSG, &s.tx[0], 0)
	s.one.s = s
	s.one.fn = s.one.call
	s.recv.init(unix.SYS_RECVMMSG, &s.rx[0], 0)
	s.tryRecv.init(unix.SYS_RECVMMSG, &s.rx[0], unix.MSG_DONTWAIT)
	s.peek = func(fd uintptr) bool {
		for {
			_, _, e := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&s.peekByte[0])), 1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			return true // queued, or an error the next receive reports
		}
	}
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
		s.send.n = s.fillTx(frames, gso)
		err := s.rc.Write(s.send.fn)
		for i := range frames {
			s.txIov[i].Base = nil // keep no reference to the caller's frames
		}
		if err != nil {
			return 0, err
		}
		if s.send.err != nil && gso && s.txMsgFrames[0] > 1 && gsoRefused(s.send.err) {
			// The first message failed (sendmmsg reports an error only
			// when nothing went out) and it was a segmented one: send
			// every frame on its own from now on.
			s.gso = false
			continue
		}
		n := 0
		for _, k := range s.txMsgFrames[:s.send.done] {
			n += k
			if k > 1 {
				s.segmented += uint64(k)
			}
		}
		return n, s.send.err
	}
}

// gsoMaxBytes bounds a segmented message: the largest UDP payload of an
// IPv4 datagram (the kernel refuses a larger one).
const gsoMaxBytes = 65507

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
// opt (UDP_SEGMENT, UDP_GRO): set turns it on (UDP_GRO), else it is only
// read (a UDP_SEGMENT set on the socket would segment every send). Any
// refusal leaves the socket as it was and reports false.
func offloadOK(rc syscall.RawConn, opt int, set bool) bool {
	if offloadRefuse != nil && offloadRefuse(opt) {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		if set {
			ok = unix.SetsockoptInt(int(fd), unix.SOL_UDP, opt, 1) == nil
			return
		}
		_, err := unix.GetsockoptInt(int(fd), unix.SOL_UDP, opt)
		ok = err == nil
	})
	return ok
}

// offloadRefuse, set by tests, plays a kernel that refuses opt.
var offloadRefuse func(opt int) bool

func (s *sysConn) recvBatch(c *Conn, bufs [][]byte, sizes []int) (int, error) {
	if n := s.fromStash(bufs, sizes); n > 0 {
		return n, nil
	}
	target := s.rxTarget(bufs)
	s.prepareRecv(target)
	s.recv.n = len(target)
	if err := s.rc.Read(s.recv.fn); err != nil {
		return 0, err
	}
	return s.received(c, &s.recv, target, bufs, sizes)
}

// tryRecvBatch is recvBatch that returns 0 at once when nothing is
// queued.
func (s *sysConn) tryRecvBatch(c *Conn, bufs [][]byte, sizes []int) (int, error) {
	if n := s.fromStash(bufs, sizes); n > 0 {
		return n, nil
	}
	target := s.rxTarget(bufs)
	s.prepareRecv(target)
	s.tryRecv.n = len(target)
	if err := s.rc.Control(s.tryRecv.ctl); err != nil {
		return 0, err
	}
	return s.received(c, &s.tryRecv, target, bufs, sizes)
}

// waitReadable parks until a datagram is queued.
func (s *sysConn) waitReadable() error { return s.rc.Read(s.peek) }

// groMin is the least buffer that holds any message: GRO goes on with the
// first receive whose buffers are all this large.
const groMin = 65535

// groCtlWords is a UDP_GRO control message (a cmsghdr and an int) in
// uint64s.
const groCtlWords = (unix.SizeofCmsghdr + 8 + 7) / 8

func allHold(bufs [][]byte, n int) bool {
	for _, b := range bufs {
		if len(b) < n {
			return false
		}
	}
	return true
}

// rxTarget returns the buffers a receive fills: the caller's, or with
// GRO on and a caller buffer too small for a coalesced message, one stash
// buffer whose datagrams fromStash then hands out. It turns GRO on with
// the first buffers large enough.
func (s *sysConn) rxTarget(bufs [][]byte) [][]byte {
	big := allHold(bufs, groMin)
	if !s.groTried && big {
		s.groTried = true
		s.gro = offloadOK(s.rc, unix.UDP_GRO, true)
	}
	if !s.gro || big {
		return bufs
	}
	if cap(s.stash) < groMin {
		s.stash = make([]byte, 0, groMin)
	}
	s.stashBufs[0] = s.stash[:groMin]
	return s.stashBufs[:]
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
			h.Hdr.SetControllen(unix.CmsgSpace(4))
		}
		h.Len = 0
	}
}

// received filters what call took into target: frames from the peer
// only, moved to the front, and with GRO each message cut into its
// datagrams. target is bufs, or the stash buffer.
func (s *sysConn) received(c *Conn, call *mmsgCall, target, bufs [][]byte, sizes []int) (int, error) {
	if call.err != nil {
		return 0, call.err
	}
	got := 0
	for i := 0; i < call.done; i++ {
		if !s.fromPeer(&s.rxName[i]) {
			c.Foreign++
			continue
		}
		n := min(int(s.rx[i].Len), len(target[i]))
		if got != i {
			copy(target[got], target[i][:n])
			s.rxCtl[got] = s.rxCtl[i]
			s.rx[got].Hdr.Controllen = s.rx[i].Hdr.Controllen
		}
		sizes[got] = n
		got++
	}
	for i := range target {
		s.rxIov[i].Base = nil
	}
	if !s.gro {
		return got, nil
	}
	if &target[0] == &s.stashBufs[0] {
		if got == 1 {
			s.stashLens, s.stashHead, s.stashOff = s.stashLens[:0], 0, 0
			s.stash = s.stash[:0]
			seg := s.segSize(0, sizes[0])
			if seg < sizes[0] {
				s.coalesced += uint64((sizes[0] + seg - 1) / seg)
			}
			s.stashSegs(s.stash[:sizes[0]], seg)
		}
		return s.fromStash(bufs, sizes), nil
	}
	return s.split(got, bufs, sizes), nil
}

// segSize returns the datagram size of received message i of n bytes:
// its UDP_GRO size, or n when it is one datagram.
func (s *sysConn) segSize(i, n int) int {
	h := &s.rx[i].Hdr
	if h.Controllen < uint64(unix.CmsgLen(4)) {
		return n
	}
	c := (*unix.Cmsghdr)(unsafe.Pointer(&s.rxCtl[i][0]))
	if c.Level != unix.SOL_UDP || c.Type != unix.UDP_GRO {
		return n
	}
	seg := int(*(*int32)(unsafe.Pointer(uintptr(unsafe.Pointer(&s.rxCtl[i][0])) + uintptr(unix.CmsgLen(0)))))
	if seg <= 0 || seg >= n {
		return n
	}
	return seg
}

// split cuts the got received messages in bufs into their datagrams, in
// order, one a buffer; those beyond the last buffer go to the stash. It
// returns how many buffers it filled.
func (s *sysConn) split(got int, bufs [][]byte, sizes []int) int {
	total := 0
	var segs [MaxBatch]int
	for i := 0; i < got; i++ {
		segs[i] = s.segSize(i, sizes[i])
		total += (sizes[i] + segs[i] - 1) / segs[i]
	}
	if total == got {
		return got
	}
	s.coalesced += uint64(total)
	// First the datagrams that fit no buffer, in order, before any
	// buffer is overwritten; then the rest, from the back, so that a
	// message is read before a datagram of an earlier one lands on it.
	s.stashLens, s.stashHead, s.stashOff = s.stashLens[:0], 0, 0
	s.stash = s.stash[:0]
	start := 0
	var first [MaxBatch]int
	for i := 0; i < got; i++ {
		first[i] = start
		k := (sizes[i] + segs[i] - 1) / segs[i]
		if start+k > len(bufs) {
			skip := max(len(bufs)-start, 0)
			s.stashSegs(bufs[i][skip*segs[i]:sizes[i]], segs[i])
		}
		start += k
	}
	for i := got - 1; i >= 0; i-- {
		k := (sizes[i] + segs[i] - 1) / segs[i]
		for j := k - 1; j >= 0; j-- {
			g := first[i] + j
			if g >= len(bufs) {
				continue
			}
			a, b := j*segs[i], min((j+1)*segs[i], sizes[i])
			if g != i {
				copy(bufs[g], bufs[i][a:b])
			}
			sizes[g] = b - a
		}
	}
	return min(total, len(bufs))
}

// stashSegs appends the datagrams of b, seg bytes each (the last may be
// shorter), to the stash. The stash grows to the largest overflow once,
// then allocates nothing.
func (s *sysConn) stashSegs(b []byte, seg int) {
	inPlace := len(s.stash) == 0 && len(b) > 0 && cap(s.stash) > 0 && &b[0] == &s.stash[:1][0]
	if !inPlace {
		s.stash = append(s.stash, b...)
	} else {
		s.stash = s.stash[:len(b)]
	}
	for off := 0; off < len(b); off += seg {
		s.stashLens = append(s.stashLens, min(seg, len(b)-off))
	}
}

// fromStash hands out stashed datagrams, up to len(bufs), each cut to
// its buffer, and returns how many.
func (s *sysConn) fromStash(bufs [][]byte, sizes []int) int {
	n := 0
	for n < len(bufs) && s.stashHead < len(s.stashLens) {
		l := s.stashLens[s.stashHead]
		sizes[n] = copy(bufs[n], s.stash[s.stashOff:s.stashOff+l])
		s.stashOff += l
		s.stashHead++
		n++
	}
	if s.stashHead == len(s.stashLens) && s.stashHead > 0 {
		s.stashLens, s.stashHead, s.stashOff = s.stashLens[:0], 0, 0
		s.stash = s.stash[:0]
	}
	return n
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
}

// noGRO keeps UDP_GRO off from now on (once on, it stays: received
// cuts what it coalesced). Called with rxMu held.
func (s *sysConn) noGRO() { s.groTried = true }

func (s *sysConn) groOn() bool { return s.gro }
