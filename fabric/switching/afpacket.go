package switching

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/tlp/encap"
)

// SlowPathFunc observes frames the forwarder hands to the slow path
// (CONTROL messages, unknown pairs) with the port they came in on, before
// the drivers forward CONTROL messages with ForwardControl. The frame is
// only valid during the call.
type SlowPathFunc func(port string, frame []byte)

// PacketDriver runs a Forwarder over AF_PACKET sockets, one per port: the
// userspace switch for machines without XDP. AF_PACKET taps frames rather
// than stealing them, so the kernel stack sees them too (harmless for raw
// dxpu EtherType frames; for UDP ones, do not give the ports an address
// the stack would answer for). VLAN tags the NIC strips on receive are put
// back from the packet auxdata before the decision.
type PacketDriver struct {
	fwd      *Forwarder
	SlowPath SlowPathFunc
	ports    []*packetPort
	byIndex  map[uint32]*packetPort
	closeOne sync.Once
}

type packetPort struct {
	Port
	sock *PacketSocket
}

// packetReadTimeout bounds how long a read blocks, so Run notices ctx.
const packetReadTimeout = 100 * time.Millisecond

// NewPacketDriver opens a raw socket on every port (by ifindex).
func NewPacketDriver(fwd *Forwarder, ports map[string]Port) (*PacketDriver, error) {
	d := &PacketDriver{fwd: fwd, byIndex: map[uint32]*packetPort{}}
	for name, p := range ports {
		p.Name = name
		sock, err := OpenPacketSocket(int(p.Index))
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("switch: AF_PACKET socket on %s: %w", name, err)
		}
		pp := &packetPort{Port: p, sock: sock}
		d.ports = append(d.ports, pp)
		d.byIndex[p.Index] = pp
	}
	return d, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func openPacketSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ALL)))
	if err != nil {
		return -1, err
	}
	opts := []struct{ level, opt, val int }{
		{unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1},
		{unix.SOL_PACKET, unix.PACKET_AUXDATA, 1},
		{unix.SOL_SOCKET, unix.SO_RCVBUF, 4 << 20},
		{unix.SOL_SOCKET, unix.SO_SNDBUF, 4 << 20},
	}
	for _, o := range opts {
		if err := unix.SetsockoptInt(fd, o.level, o.opt, o.val); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("setsockopt %d/%d: %w", o.level, o.opt, err)
		}
	}
	tv := unix.NsecToTimeval(packetReadTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Close closes the sockets.
func (d *PacketDriver) Close() error {
	var errs []error
	d.closeOne.Do(func() {
		for _, p := range d.ports {
			errs = append(errs, p.sock.Close())
		}
	})
	return errors.Join(errs...)
}

// Run forwards until ctx ends, one goroutine per port.
func (d *PacketDriver) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errc := make(chan error, len(d.ports))
	for _, p := range d.ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.loop(ctx, p); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	return errors.Join(func() []error {
		var es []error
		for e := range errc {
			es = append(es, e)
		}
		return es
	}()...)
}

// auxdata is struct tpacket_auxdata.
type auxdata struct {
	Status   uint32
	Len      uint32
	Snaplen  uint32
	Mac      uint16
	Net      uint16
	VLANTCI  uint16
	VLANTPID uint16
}

const tpStatusVLANValid = 1 << 4

// packetHeadroom leaves room to re-insert a stripped tag and to push one.
const packetHeadroom = 2 * encap.VLANTagLen

// PacketSocket is a raw AF_PACKET socket bound to one interface that
// returns frames as they were on the wire: with their 802.1Q tag even when
// the NIC (or veth) stripped it into the packet metadata. It does not see
// its own transmissions; reads time out after packetReadTimeout.
type PacketSocket struct {
	fd  int
	msg unix.Msghdr
	iov unix.Iovec
	oob []byte
}

// OpenPacketSocket opens a socket on ifindex (in the calling thread's
// network namespace).
func OpenPacketSocket(ifindex int) (*PacketSocket, error) {
	fd, err := openPacketSocket(ifindex)
	if err != nil {
		return nil, err
	}
	return &PacketSocket{fd: fd, oob: make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(auxdata{}))))}, nil
}

// OpenPacketSender opens a transmit-only raw socket on ifindex: bound to
// protocol 0, the kernel queues nothing on it for reading.
func OpenPacketSender(ifindex int) (*PacketSocket, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: 0, Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &PacketSocket{fd: fd, oob: make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(auxdata{}))))}, nil
}

// ErrTimeout is returned by ReadFrame when no frame came within the read
// timeout.
var ErrTimeout = errors.New("switch: read timeout")

// ReadFrame reads one frame into buf[headroom:] and returns where it lies,
// buf[off:end]; off may be up to 4 bytes before headroom when a stripped
// tag was re-inserted, so headroom must be at least 4. No allocation.
func (s *PacketSocket) ReadFrame(buf []byte, headroom int) (off, end int, err error) {
	if headroom < encap.VLANTagLen || headroom >= len(buf) {
		return 0, 0, fmt.Errorf("switch: ReadFrame needs 4..%d bytes of headroom, got %d", len(buf)-1, headroom)
	}
	s.iov.Base = &buf[headroom]
	s.iov.SetLen(len(buf) - headroom)
	s.msg.Iov = &s.iov
	s.msg.Iovlen = 1
	s.msg.Control = &s.oob[0]
	s.msg.SetControllen(len(s.oob))
	n, _, errno := unix.Syscall(unix.SYS_RECVMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msg)), 0)
	if errno != 0 {
		if errno == unix.EAGAIN || errno == unix.EINTR {
			return 0, 0, ErrTimeout
		}
		return 0, 0, errno
	}
	off, end = headroom, headroom+int(n)
	if tci, ok := vlanFromCmsg(s.oob[:s.msg.Controllen]); ok && end-off >= encap.EthTypeOffset {
		copy(buf[off-encap.VLANTagLen:], buf[off:off+encap.EthTypeOffset])
		off -= encap.VLANTagLen
		tag := encap.VLAN(buf[off+encap.EthTypeOffset:])
		tag.SetTPID(encap.EtherTypeVLAN)
		tag.SetTCI(tci)
	}
	return off, end, nil
}

// WriteFrame transmits a whole Ethernet frame.
func (s *PacketSocket) WriteFrame(b []byte) error {
	_, err := unix.Write(s.fd, b)
	return err
}

// Close closes the socket.
func (s *PacketSocket) Close() error { return unix.Close(s.fd) }

func (d *PacketDriver) loop(ctx context.Context, p *packetPort) error {
	buf := make([]byte, packetHeadroom+65536)
	for ctx.Err() == nil {
		off, end, err := p.sock.ReadFrame(buf, packetHeadroom)
		if err != nil {
			if errors.Is(err, ErrTimeout) {
				continue
			}
			if ctx.Err() != nil || errors.Is(err, unix.EBADF) {
				return nil
			}
			return fmt.Errorf("switch: reading %s: %w", p.Name, err)
		}
		res := d.fwd.Forward(buf[:end], off, p.Index)
		if res.Verdict == VerdictSlowPath {
			// Slow path, inline: observe, then forward CONTROL
			// messages (the bridges' handshake) like data.
			if d.SlowPath != nil {
				d.SlowPath(p.Name, buf[res.Off:end])
			}
			res = d.fwd.ForwardControl(buf[:end], off, p.Index)
		}
		if res.Verdict == VerdictForward {
			out := d.byIndex[res.Egress]
			if out == nil {
				continue
			}
			if err := out.sock.WriteFrame(buf[res.Off:end]); err != nil && !errors.Is(err, unix.ENOBUFS) {
				slog.Debug("switch: transmit failed", "port", out.Name, "err", err)
			}
		}
	}
	return nil
}

// vlanFromCmsg finds PACKET_AUXDATA with a valid VLAN tag in control
// messages (struct cmsghdr: len (word), level i32, type i32, data; each
// message padded to a word).
func vlanFromCmsg(oob []byte) (uint16, bool) {
	ne := binary.NativeEndian
	hdr := unix.SizeofCmsghdr
	auxLen := int(unsafe.Sizeof(auxdata{}))
	for len(oob) >= hdr {
		// 64-bit: len u64, level, type; 32-bit: len u32, level, type.
		var l uint64
		var level, typ int32
		if hdr == 16 {
			l, level, typ = ne.Uint64(oob[0:]), int32(ne.Uint32(oob[8:])), int32(ne.Uint32(oob[12:]))
		} else {
			l, level, typ = uint64(ne.Uint32(oob[0:])), int32(ne.Uint32(oob[4:])), int32(ne.Uint32(oob[8:]))
		}
		if l < uint64(hdr) || l > uint64(len(oob)) {
			return 0, false
		}
		if level == unix.SOL_PACKET && typ == unix.PACKET_AUXDATA && int(l) >= hdr+auxLen {
			a := oob[hdr:]
			if ne.Uint32(a[0:])&tpStatusVLANValid != 0 {
				return ne.Uint16(a[16:]), true
			}
			return 0, false
		}
		align := int(unsafe.Sizeof(uintptr(0)))
		next := (int(l) + align - 1) &^ (align - 1)
		if next > len(oob) {
			return 0, false
		}
		oob = oob[next:]
	}
	return 0, false
}
