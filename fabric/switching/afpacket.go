package switching

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/mmsg"
	"github.com/dxpu/dxpu/bridge/ratelog"
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
// back from the packet auxdata before the decision. Frames move in batches:
// a recvmmsg per port, a sendmmsg per run of frames to one egress port.
type PacketDriver struct {
	fwd      *Forwarder
	SlowPath SlowPathFunc
	// Log takes the failed transmissions, at most a line a second with
	// the count (nil: slog.Default()). Set it before Run.
	Log      *slog.Logger
	ports    []*packetPort
	byIndex  map[uint32]*packetPort
	closeOne sync.Once
	txFailed atomic.Uint64
}

type packetPort struct {
	Port
	sock *PacketSocket
	// largest is the most frames one receive took (written by the
	// port's loop; tests read it once Run returned).
	largest int
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

// TransmitFailures returns how many forwarded frames a port's socket
// failed to send, ENOBUFS (a full queue: dropped as a NIC would) aside.
func (d *PacketDriver) TransmitFailures() uint64 { return d.txFailed.Load() }

// Run forwards until ctx ends, one goroutine per port.
func (d *PacketDriver) Run(ctx context.Context) error {
	log := d.Log
	if log == nil {
		log = slog.Default()
	}
	lim := ratelog.New(log, time.Second, nil)
	lctx, cancel := context.WithCancel(ctx)
	flushed := make(chan struct{})
	go func() { lim.Run(lctx); close(flushed) }()
	defer func() { cancel(); <-flushed }()
	var wg sync.WaitGroup
	errc := make(chan error, len(d.ports))
	for _, p := range d.ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.loop(ctx, p, lim); err != nil {
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
	return reinsertTag(buf, off, end, s.oob[:s.msg.Controllen]), end, nil
}

// reinsertTag puts back in front of the frame buf[off:end] the tag the
// control messages oob say was stripped, and returns where the frame now
// starts (off, or VLANTagLen earlier).
func reinsertTag(buf []byte, off, end int, oob []byte) int {
	if tci, ok := vlanFromCmsg(oob); ok && end-off >= encap.EthTypeOffset {
		copy(buf[off-encap.VLANTagLen:], buf[off:off+encap.EthTypeOffset])
		off -= encap.VLANTagLen
		tag := encap.VLAN(buf[off+encap.EthTypeOffset:])
		tag.SetTPID(encap.EtherTypeVLAN)
		tag.SetTCI(tci)
	}
	return off
}

// WriteFrame transmits a whole Ethernet frame.
func (s *PacketSocket) WriteFrame(b []byte) error {
	_, err := unix.Write(s.fd, b)
	return err
}

// Close closes the socket.
func (s *PacketSocket) Close() error { return unix.Close(s.fd) }

func (d *PacketDriver) loop(ctx context.Context, p *packetPort, lim *ratelog.Limiter) error {
	b := newPacketBatch()
	for ctx.Err() == nil {
		n, err := b.read(p.sock)
		if err != nil {
			if errors.Is(err, ErrTimeout) {
				continue
			}
			if ctx.Err() != nil || errors.Is(err, unix.EBADF) {
				return nil
			}
			return fmt.Errorf("switch: reading %s: %w", p.Name, err)
		}
		p.largest = max(p.largest, n)
		k := 0
		for i := range n {
			buf := b.bufs[i]
			end := packetHeadroom + min(int(b.rx[i].Len), len(buf)-packetHeadroom)
			off := reinsertTag(buf, packetHeadroom, end, b.control(i))
			res := d.fwd.Forward(buf[:end], off, p.Index)
			if res.Verdict == VerdictSlowPath {
				// Slow path, inline: observe, then forward CONTROL
				// messages (the bridges' handshake) like data.
				if d.SlowPath != nil {
					d.SlowPath(p.Name, buf[res.Off:end])
				}
				res = d.fwd.ForwardControl(buf[:end], off, p.Index)
			}
			if res.Verdict != VerdictForward {
				continue
			}
			out := d.byIndex[res.Egress]
			if out == nil {
				continue
			}
			b.queue(k, out, buf[res.Off:end])
			k++
		}
		d.transmit(b, k, lim)
	}
	return nil
}

// packetBatchLen is the most frames one recvmmsg or sendmmsg moves.
const packetBatchLen = 32

// packetOOBWords holds a PACKET_AUXDATA control message in uint64s (for
// the cmsghdr's alignment).
const packetOOBWords = (unix.SizeofCmsghdr + int(unsafe.Sizeof(auxdata{})) + 7) / 8

// packetBatch is one port loop's mmsghdr arrays, buffers and control
// buffers, made once: a batch of frames costs one recvmmsg(2), one
// sendmmsg(2) per run of frames to the same egress port, and no
// allocation. Each frame has its own buffer, with the headroom to put a
// stripped tag back and to push one, and its own control buffer for the
// PACKET_AUXDATA that says which tag was stripped.
type packetBatch struct {
	bufs  [packetBatchLen][]byte
	rx    [packetBatchLen]unix.Mmsghdr
	rxIov [packetBatchLen]unix.Iovec
	oob   [packetBatchLen][packetOOBWords]uint64

	tx    [packetBatchLen]unix.Mmsghdr
	txIov [packetBatchLen]unix.Iovec
	txOut [packetBatchLen]*packetPort

	recv, send mmsg.Call // on the ports' blocking descriptors
}

func newPacketBatch() *packetBatch {
	b := &packetBatch{}
	const bufLen = packetHeadroom + 65536
	mem := make([]byte, packetBatchLen*bufLen)
	for i := range b.bufs {
		b.bufs[i] = mem[i*bufLen : (i+1)*bufLen : (i+1)*bufLen]
		b.rxIov[i].Base = &b.bufs[i][packetHeadroom]
		b.rxIov[i].SetLen(bufLen - packetHeadroom)
		h := &b.rx[i].Hdr
		h.Iov = &b.rxIov[i]
		h.SetIovlen(1)
		h = &b.tx[i].Hdr
		h.Iov = &b.txIov[i]
		h.SetIovlen(1)
	}
	b.recv.Init(unix.SYS_RECVMMSG, &b.rx[0], unix.MSG_WAITFORONE)
	b.send.Init(unix.SYS_SENDMMSG, &b.tx[0], 0)
	return b
}

// read waits up to the socket's read timeout for a frame, then takes
// those already queued after it (MSG_WAITFORONE), up to packetBatchLen.
func (b *packetBatch) read(s *PacketSocket) (int, error) {
	for i := range b.rx {
		h := &b.rx[i].Hdr
		h.Control = (*byte)(unsafe.Pointer(&b.oob[i][0]))
		h.SetControllen(packetOOBWords * 8)
		h.Flags = 0
		b.rx[i].Len = 0
	}
	b.recv.N = packetBatchLen
	if !b.recv.Fn(uintptr(s.fd)) {
		return 0, ErrTimeout // EAGAIN: the read timeout ran out
	}
	return b.recv.Done, b.recv.Err
}

// control returns frame i's control messages as the kernel left them.
func (b *packetBatch) control(i int) []byte {
	oob := unsafe.Slice((*byte)(unsafe.Pointer(&b.oob[i][0])), packetOOBWords*8)
	return oob[:min(int(b.rx[i].Hdr.Controllen), len(oob))]
}

// queue makes frame message k of the next transmit, out of port out.
func (b *packetBatch) queue(k int, out *packetPort, frame []byte) {
	b.txIov[k].Base = unsafe.SliceData(frame)
	b.txIov[k].SetLen(len(frame))
	b.tx[k].Len = 0
	b.txOut[k] = out
}

// transmit sends messages 0..k-1 in order, one sendmmsg per run of them to
// the same port. sendmmsg stops at the first message that fails,
// reporting the error only when it is the first one: that one is counted
// (ENOBUFS aside: a full queue drops, as a NIC would) and skipped, and the
// rest go on.
func (d *PacketDriver) transmit(b *packetBatch, k int, lim *ratelog.Limiter) {
	for start := 0; start < k; {
		out := b.txOut[start]
		run := 1
		for start+run < k && b.txOut[start+run] == out {
			run++
		}
		b.send.Hdrs, b.send.N = &b.tx[start], run
		sent := b.send.Fn(uintptr(out.sock.fd))
		err := b.send.Err
		if !sent {
			err = unix.EAGAIN // a full send buffer on a blocking socket's timeout
		}
		if err != nil || b.send.Done == 0 {
			if err != unix.ENOBUFS && err != unix.EBADF { // EBADF: closed, Run is ending
				d.txFailed.Add(1)
				lim.Log(slog.LevelWarn, "switch: transmit failed", 1, "switch: transmit failed", "port", out.Name, "err", os.NewSyscallError("sendmmsg", err))
			}
			start++
			continue
		}
		start += b.send.Done
	}
	for i := range k {
		b.txOut[i] = nil
	}
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
