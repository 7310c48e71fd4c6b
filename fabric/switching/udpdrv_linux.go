package switching

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/mmsg"
	"github.com/dxpu/dxpu/bridge/ratelog"
)

const (
	// udpBatch is the most datagrams one recvmmsg or sendmmsg moves.
	udpBatch = 32
	// udpBufLen holds any UDP payload, as the per-datagram loop's buffer.
	udpBufLen = 65536
)

// errNoFamily: a destination the socket's address family cannot reach (an
// IPv6 one on an IPv4 socket).
var errNoFamily = errors.New("destination not reachable from the socket's address family")

// udpBatcher holds the mmsghdr arrays of recvmmsg(2) and sendmmsg(2) with
// their buffers and socket addresses, built once per Run: a batch costs
// one system call each way and no allocation. The syscall closures are
// built once too and read their arguments from the struct (RawConn.Read
// and Write take a func value).
type udpBatcher struct {
	rc     syscall.RawConn
	family int

	bufs   [udpBatch][]byte
	rx     [udpBatch]unix.Mmsghdr
	rxIov  [udpBatch]unix.Iovec
	rxName [udpBatch]unix.RawSockaddrInet6 // room for an IPv4 one too
	recv   mmsg.Call

	tx     [udpBatch]unix.Mmsghdr
	txIov  [udpBatch]unix.Iovec
	txName [udpBatch]unix.RawSockaddrInet6
	txTo   [udpBatch]netip.AddrPort // for the failure log
	send   mmsg.Call

	// The zone of the last IPv6 source with a scope, as net names it.
	scope uint32
	zone  string
}

func newUDPBatcher(c *net.UDPConn) (*udpBatcher, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := &udpBatcher{rc: rc}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		b.family, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, fmt.Errorf("SO_DOMAIN: %w", serr)
	}
	mem := make([]byte, udpBatch*udpBufLen)
	for i := range b.bufs {
		b.bufs[i] = mem[i*udpBufLen : (i+1)*udpBufLen : (i+1)*udpBufLen]
		b.rxIov[i].Base = &b.bufs[i][0]
		b.rxIov[i].SetLen(udpBufLen)
		h := &b.rx[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.rxName[i]))
		h.Iov = &b.rxIov[i]
		h.SetIovlen(1)
		h = &b.tx[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.txName[i]))
		h.Iov = &b.txIov[i]
		h.SetIovlen(1)
	}
	b.recv.Init(unix.SYS_RECVMMSG, &b.rx[0], 0)
	b.send.Init(unix.SYS_SENDMMSG, &b.tx[0], 0)
	return b, nil
}

// receive waits for at least one datagram and takes those queued, up to
// udpBatch; an error is the socket's (closed included).
func (b *udpBatcher) receive() (int, error) {
	for i := range b.rx {
		b.rx[i].Hdr.Namelen = uint32(unsafe.Sizeof(b.rxName[i]))
		b.rx[i].Len = 0
	}
	b.recv.N = udpBatch
	if err := b.rc.Read(b.recv.Fn); err != nil {
		return 0, err
	}
	return b.recv.Done, b.recv.Err
}

// port reads a sockaddr's port field (network byte order).
func sockaddrPort(p *uint16) uint16 {
	b := (*[2]byte)(unsafe.Pointer(p))
	return uint16(b[0])<<8 | uint16(b[1])
}

func setSockaddrPort(p *uint16, v uint16) {
	b := (*[2]byte)(unsafe.Pointer(p))
	b[0], b[1] = byte(v>>8), byte(v)
}

// from returns datagram i's source as ReadFromUDPAddrPort does: an IPv4
// source on an IPv6 socket as ::ffff:a.b.c.d, a scope as its zone.
func (b *udpBatcher) from(i int) netip.AddrPort {
	sa := &b.rxName[i]
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), sockaddrPort(&sa4.Port))
	case unix.AF_INET6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.Scope_id != 0 {
			if sa.Scope_id != b.scope || b.zone == "" {
				b.scope, b.zone = sa.Scope_id, zoneName(sa.Scope_id)
			}
			a = a.WithZone(b.zone)
		}
		return netip.AddrPortFrom(a, sockaddrPort(&sa.Port))
	}
	return netip.AddrPort{}
}

func zoneName(scope uint32) string {
	if ifi, err := net.InterfaceByIndex(int(scope)); err == nil {
		return ifi.Name
	}
	return strconv.FormatUint(uint64(scope), 10)
}

// queue adds payload, sent to to, as message k of the next send; false
// when the socket's family cannot reach to. The forwarder's destinations
// are IPv4 and carry no zone.
func (b *udpBatcher) queue(k int, payload []byte, to netip.AddrPort) bool {
	a := to.Addr()
	h := &b.tx[k]
	switch {
	case b.family == unix.AF_INET && a.Unmap().Is4():
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&b.txName[k]))
		*sa4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		setSockaddrPort(&sa4.Port, to.Port())
		h.Hdr.Namelen = unix.SizeofSockaddrInet4
	case b.family == unix.AF_INET6 && a.IsValid():
		b.txName[k] = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
		setSockaddrPort(&b.txName[k].Port, to.Port())
		h.Hdr.Namelen = unix.SizeofSockaddrInet6
	default:
		return false
	}
	b.txIov[k].Base = unsafe.SliceData(payload)
	b.txIov[k].SetLen(len(payload))
	h.Len = 0
	b.txTo[k] = to
	return true
}

// run relays a batch at a time: recvmmsg, the forwarder's decision for
// each datagram in order, one sendmmsg for those forwarded, each message
// to its own destination.
func (d *UDPDriver) run(ctx context.Context, lim *ratelog.Limiter) error {
	b, err := newUDPBatcher(d.conn)
	if err != nil {
		if runEnded(ctx, err) {
			return nil
		}
		return fmt.Errorf("switch: UDP socket %v: %w", d.conn.LocalAddr(), err)
	}
	for {
		n, err := b.receive()
		if err != nil {
			if runEnded(ctx, err) {
				return nil
			}
			return fmt.Errorf("switch: UDP read on %v: %w", d.conn.LocalAddr(), err)
		}
		d.largest, d.receives = max(d.largest, n), d.receives+1
		k := 0
		for i := range n {
			payload := b.bufs[i][:min(int(b.rx[i].Len), udpBufLen)]
			from := b.from(i)
			to, res := d.fwd.ForwardDatagram(payload, from, UDPIndex)
			if res.Verdict == VerdictSlowPath {
				if d.SlowPath != nil {
					d.SlowPath(from, payload)
				}
				to, res = d.fwd.ForwardDatagramControl(payload, from, UDPIndex)
			}
			if res.Verdict != VerdictForward {
				continue
			}
			if !b.queue(k, payload, to) {
				d.relayFailure(lim, to, errNoFamily)
				continue
			}
			k++
		}
		if err := d.sendQueued(b, k, lim); err != nil {
			if runEnded(ctx, err) {
				return nil
			}
			return fmt.Errorf("switch: UDP send on %v: %w", d.conn.LocalAddr(), err)
		}
	}
}

// sendQueued sends messages 0..k-1 in order. sendmmsg stops at the first
// message that fails, reporting the error only when it is the first one:
// that one is counted and skipped, and the rest go on.
func (d *UDPDriver) sendQueued(b *udpBatcher, k int, lim *ratelog.Limiter) error {
	for start := 0; start < k; {
		b.send.Hdrs, b.send.N = &b.tx[start], k-start
		if err := b.rc.Write(b.send.Fn); err != nil {
			return err // the socket's: closed
		}
		if b.send.Err != nil || b.send.Done <= 0 {
			err := b.send.Err
			if err == nil {
				err = errors.New("sent nothing")
			}
			d.relayFailure(lim, b.txTo[start], os.NewSyscallError("sendmmsg", err))
			start++
			continue
		}
		start += b.send.Done
	}
	return nil
}
