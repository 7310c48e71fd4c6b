package afpacket

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/mmsg"
	"github.com/dxpu/dxpu/tlp/encap"
)

// MaxBatch is the most frames one SendBatch or receive system call moves.
const MaxBatch = 64

// batch holds the mmsghdr arrays of sendmmsg(2) and recvmmsg(2), built
// once with the Conn, so that a batch of frames costs one system call and
// no allocation: the packet library's ReadFrom and WriteTo cost a system
// call per frame and allocate an address for each. The syscall closures
// are built once too and read their arguments from the struct.
type batch struct {
	rc   syscall.RawConn
	peer unix.RawSockaddrLinklayer

	txMu  sync.Mutex
	tx    [MaxBatch]unix.Mmsghdr
	txIov [MaxBatch]unix.Iovec
	send  mmsg.Call

	rxMu   sync.Mutex
	rx     [MaxBatch]unix.Mmsghdr
	rxIov  [MaxBatch]unix.Iovec
	rxName [MaxBatch]unix.RawSockaddrLinklayer
	recv   mmsg.Call
	// tryRecv never waits (MSG_DONTWAIT), made through RawConn.Control:
	// that takes no read lock, so it runs while another goroutine waits
	// in WaitReadable.
	tryRecv mmsg.Call
	peek    *mmsg.Peek // WaitReadable's
}

func (c *Conn) initBatch() error {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return fmt.Errorf("afpacket: %s: %w", c.ifi.Name, err)
	}
	b := &c.b
	b.rc = rc
	b.peer = unix.RawSockaddrLinklayer{Family: unix.AF_PACKET, Protocol: htons(encap.EtherType),
		Ifindex: int32(c.ifi.Index), Halen: uint8(len(c.peer.HardwareAddr))}
	copy(b.peer.Addr[:], c.peer.HardwareAddr)
	for i := range b.tx {
		h := &b.tx[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.peer))
		h.Namelen = uint32(unsafe.Sizeof(b.peer))
		h.Iov = &b.txIov[i]
		h.SetIovlen(1)
	}
	b.send.Init(unix.SYS_SENDMMSG, &b.tx[0], 0)
	b.recv.Init(unix.SYS_RECVMMSG, &b.rx[0], 0)
	b.tryRecv.Init(unix.SYS_RECVMMSG, &b.rx[0], unix.MSG_DONTWAIT)
	b.peek = mmsg.NewPeek()
	return nil
}

// htons returns v as it lies in a sockaddr's protocol field.
func htons(v uint16) uint16 {
	var b [2]byte
	b[0], b[1] = byte(v>>8), byte(v)
	return *(*uint16)(unsafe.Pointer(&b[0]))
}

// SendBatch transmits frames to the peer in order, up to MaxBatch per
// sendmmsg(2), and returns how many went out; on an error frames[n]
// failed and the ones after it were not tried (driver.BatchSender).
func (c *Conn) SendBatch(frames [][]byte) (int, error) {
	b := &c.b
	b.txMu.Lock()
	defer b.txMu.Unlock()
	sent := 0
	for sent < len(frames) {
		part := frames[sent:min(len(frames), sent+MaxBatch)]
		for i, f := range part {
			iov := &b.txIov[i]
			iov.Base = nil
			if len(f) > 0 {
				iov.Base = &f[0]
			}
			iov.SetLen(len(f))
			b.tx[i].Len = 0
		}
		b.send.N = len(part)
		err := b.rc.Write(b.send.Fn)
		for i := range part {
			b.txIov[i].Base = nil // keep no reference to the caller's frames
		}
		if err == nil {
			err = b.send.Err
		}
		if err != nil {
			return sent, fmt.Errorf("afpacket: send on %s: %w", c.ifi.Name, err)
		}
		sent += b.send.Done
	}
	return sent, nil
}

// RecvBatch blocks for at least one frame from the peer, then takes the
// frames already queued, up to len(bufs) and MaxBatch, into bufs and
// their lengths into sizes (driver.BatchReceiver). Frames from another
// source are dropped and counted.
func (c *Conn) RecvBatch(bufs [][]byte, sizes []int) (int, error) {
	bufs, err := checkBufs(bufs, sizes)
	if err != nil {
		return 0, err
	}
	b := &c.b
	b.rxMu.Lock()
	defer b.rxMu.Unlock()
	for {
		b.prepareRecv(bufs)
		b.recv.N = len(bufs)
		if err := b.rc.Read(b.recv.Fn); err != nil {
			return 0, fmt.Errorf("afpacket: receive on %s: %w", c.ifi.Name, err)
		}
		n, err := c.received(&b.recv, bufs, sizes)
		if err != nil || n > 0 {
			return n, err
		}
	}
}

// TryRecvBatch is RecvBatch that never waits: it takes the frames already
// queued, and returns 0 when there are none or when another goroutine is
// receiving on c at the moment (driver.Poller). Any goroutine may call it,
// also while one waits in WaitReadable.
func (c *Conn) TryRecvBatch(bufs [][]byte, sizes []int) (int, error) {
	bufs, err := checkBufs(bufs, sizes)
	if err != nil {
		return 0, err
	}
	b := &c.b
	if !b.rxMu.TryLock() {
		return 0, nil
	}
	defer b.rxMu.Unlock()
	b.prepareRecv(bufs)
	b.tryRecv.N = len(bufs)
	if err := b.rc.Control(b.tryRecv.Ctl); err != nil {
		return 0, fmt.Errorf("afpacket: receive on %s: %w", c.ifi.Name, err)
	}
	return c.received(&b.tryRecv, bufs, sizes)
}

// WaitReadable blocks until a frame is queued (from any source) or c is
// closed; it takes nothing (driver.Poller). Once it waited it returns
// when a frame came without looking again, so the TryRecvBatch that
// follows may find that another goroutine took it. Call it from one
// goroutine at a time.
func (c *Conn) WaitReadable() error {
	if err := c.b.rc.Read(c.b.peek.Fn); err != nil {
		return fmt.Errorf("afpacket: receive on %s: %w", c.ifi.Name, err)
	}
	return nil
}

func checkBufs(bufs [][]byte, sizes []int) ([][]byte, error) {
	if len(sizes) < len(bufs) {
		return nil, fmt.Errorf("afpacket: receive: %d sizes for %d buffers", len(sizes), len(bufs))
	}
	bufs = bufs[:min(len(bufs), MaxBatch)]
	if len(bufs) == 0 {
		return nil, errors.New("afpacket: receive: no buffers")
	}
	return bufs, nil
}

func (b *batch) prepareRecv(bufs [][]byte) {
	for i, buf := range bufs {
		iov := &b.rxIov[i]
		iov.Base = nil
		if len(buf) > 0 {
			iov.Base = &buf[0]
		}
		iov.SetLen(len(buf))
		h := &b.rx[i]
		h.Hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&b.rxName[i])), Namelen: uint32(unsafe.Sizeof(b.rxName[i])), Iov: iov}
		h.Hdr.SetIovlen(1)
		h.Len = 0
	}
}

// received keeps what call took from the peer, moved to the front of
// bufs, and counts the rest as foreign.
func (c *Conn) received(call *mmsg.Call, bufs [][]byte, sizes []int) (int, error) {
	b := &c.b
	defer func() {
		for i := range bufs {
			b.rxIov[i].Base = nil
		}
	}()
	if call.Err != nil {
		return 0, fmt.Errorf("afpacket: receive on %s: %w", c.ifi.Name, call.Err)
	}
	got := 0
	for i := 0; i < call.Done; i++ {
		if !b.fromPeer(&b.rxName[i]) {
			c.Foreign.Add(1)
			continue
		}
		n := min(int(b.rx[i].Len), len(bufs[i]))
		if got != i {
			copy(bufs[got], bufs[i][:n])
		}
		sizes[got] = n
		got++
	}
	return got, nil
}

func (b *batch) fromPeer(sa *unix.RawSockaddrLinklayer) bool {
	if sa.Halen != b.peer.Halen || int(sa.Halen) > len(sa.Addr) {
		return false
	}
	// Only the first Halen bytes are the address: the kernel leaves the
	// rest of sll_addr as it was.
	return bytes.Equal(sa.Addr[:sa.Halen], b.peer.Addr[:sa.Halen])
}
