package afxdp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/tlp/encap"
)

// FrameSize is the size of one UMEM frame: a page, the most an aligned
// UMEM takes without multi-buffer frames.
const FrameSize = 4096

// MaxQueues bounds Config.Queue (the XSKMAP's size).
const MaxQueues = 64

// ethHeader is the Ethernet header Send writes: destination, source,
// EtherType.
const ethHeader = 14

// Config places and sizes the socket. The zero value is the default.
type Config struct {
	// Queue is the RX queue the socket binds (default 0). On a NIC with
	// several queues, steer dxpu frames to it (ethtool -N IFACE
	// flow-type ether proto 0x88b5 action QUEUE); frames on other queues
	// go to the kernel stack.
	Queue uint32
	// Frames is the UMEM size in frames, half for receiving and half for
	// sending: a power of two, at least 4 (default 4096, 16 MiB).
	Frames uint32
	// Copy binds in copy mode without trying zero-copy first.
	Copy bool
	// Generic attaches the XDP program in generic (SKB) mode without
	// trying the driver's native mode first.
	Generic bool
}

func (c *Config) defaults() error {
	if c.Frames == 0 {
		c.Frames = 4096
	}
	if c.Frames < 4 || c.Frames&(c.Frames-1) != 0 {
		return fmt.Errorf("afxdp: %d UMEM frames: want a power of two, at least 4", c.Frames)
	}
	if c.Queue >= MaxQueues {
		return fmt.Errorf("afxdp: queue %d: want below %d", c.Queue, MaxQueues)
	}
	return nil
}

// Stats counts what the socket dropped, and why.
type Stats struct {
	// Foreign: frames from another MAC address than the peer's.
	Foreign uint64 `json:"foreign_frames"`
	// Malformed: frames too short for their Ethernet header or tags, or
	// not dxpu frames.
	Malformed uint64 `json:"malformed_frames"`
	// Oversize: frames larger than the receive buffer they were for.
	Oversize uint64 `json:"oversize_frames"`
	// BadDescriptors: RX or completion ring entries outside their UMEM
	// frames (a kernel or ring bug: never seen).
	BadDescriptors uint64 `json:"bad_descriptors"`
	// TXFull: frames not sent because every TX frame stayed in flight.
	TXFull uint64 `json:"tx_full_frames"`
}

// Conn exchanges dxpu frames with one peer MAC address on one interface
// over an AF_XDP socket; it implements driver.Transport, BatchSender,
// BatchReceiver and Poller. Send and Recv may run on different
// goroutines; Close unblocks both.
type Conn struct {
	ifi  *net.Interface
	peer [6]byte
	hdr  [ethHeader]byte // Send's Ethernet header
	mtu  int
	mode string

	fd        int
	file      *os.File        // fd in Go's netpoller, where Recv waits
	rc        syscall.RawConn // file's
	umem      []byte
	rxFrames  uint32 // frames [0, rxFrames) receive, the rest send
	fill, rx  ring
	comp, tx  ring
	objs      xskRedirectObjects
	xdp       link.Link
	txFree    []uint64           // TX frames on no ring, cap = the TX frame count
	txProd    uint32             // TX ring entries posted, published by kick
	readFn    func(uintptr) bool // take on rxBufs and rxSizes, for rc.Read
	readyFn   func(uintptr) bool // whether the RX ring holds a frame, for rc.Read
	rxBufs    [][]byte
	rxSizes   []int
	rxN       int
	one       [1][]byte // Recv's buffer, as a batch
	oneSize   [1]int
	life      sync.RWMutex // shared by every ring operation, exclusive for Close's unmapping
	closed    atomic.Bool
	rxMu      sync.Mutex
	txMu      sync.Mutex
	foreign   atomic.Uint64
	malformed atomic.Uint64
	oversize  atomic.Uint64
	badDesc   atomic.Uint64
	txFull    atomic.Uint64
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("afxdp: connection closed")

// ErrNoFrame means every TX frame stayed in flight for about a second
// (the link does not drain): the frame was not sent.
var ErrNoFrame = errors.New("afxdp: every TX frame in flight")

// Listen opens an AF_XDP socket on interface ifname (in the calling
// thread's network namespace) towards peer, loads the redirect program
// and attaches it to the interface. It needs CAP_NET_ADMIN, CAP_NET_RAW
// and CAP_BPF (root), and the interface to itself: one Conn per
// interface, and no other XDP program.
func Listen(ifname string, peer net.HardwareAddr, cfg Config) (_ *Conn, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("afxdp: interface %q: %w", ifname, err)
	}
	if len(peer) != 6 {
		return nil, fmt.Errorf("afxdp: peer address %v: want a 6-byte MAC", peer)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("afxdp: interface %s has no Ethernet address", ifname)
	}
	c := &Conn{ifi: ifi, fd: -1, rxFrames: cfg.Frames / 2}
	copy(c.peer[:], peer)
	copy(c.hdr[0:6], peer)
	copy(c.hdr[6:12], ifi.HardwareAddr)
	binary.BigEndian.PutUint16(c.hdr[12:], encap.EtherType)
	// Copy mode receives into a frame after XDP_PACKET_HEADROOM; keep room
	// for the header and two VLAN tags a switch may add.
	c.mtu = min(ifi.MTU, FrameSize-unix.XDP_PACKET_HEADROOM-ethHeader-8)
	defer func() {
		if err != nil {
			c.teardown()
		}
	}()
	if err := loadXskRedirectObjects(&c.objs, nil); err != nil {
		return nil, fmt.Errorf("afxdp: load the XDP program: %w", err)
	}
	if err := c.open(ifname, cfg); err != nil {
		return nil, err
	}
	if err := c.objs.Xsks.Put(cfg.Queue, uint32(c.fd)); err != nil {
		return nil, fmt.Errorf("afxdp: socket into the XSKMAP: %w", err)
	}
	xdpMode, err := c.attach(cfg.Generic)
	if err != nil {
		return nil, err
	}
	c.mode = xdpMode + " XDP, " + c.mode
	return c, nil
}

// open makes the socket, its UMEM and rings, fills the fill ring and binds
// the socket: zero-copy first unless cfg.Copy, else copy mode.
func (c *Conn) open(ifname string, cfg Config) error {
	var err error
	if c.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0); err != nil {
		return fmt.Errorf("afxdp: socket: %w", err)
	}
	size := int(cfg.Frames) * FrameSize
	if c.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return fmt.Errorf("afxdp: UMEM of %d bytes: %w", size, err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&c.umem[0]))), Len: uint64(size), Size: FrameSize}
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(c.fd), unix.SOL_XDP, unix.XDP_UMEM_REG,
		uintptr(unsafe.Pointer(&reg)), unsafe.Sizeof(reg), 0); e != 0 {
		return fmt.Errorf("afxdp: XDP_UMEM_REG: %w", e)
	}
	// Each ring holds all the frames of its direction, so a producer
	// never finds it full.
	half := int(c.rxFrames)
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(c.fd, unix.SOL_XDP, opt, half); err != nil {
			return fmt.Errorf("afxdp: ring size option %d: %w", opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	offLen := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(c.fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&offLen)), 0); e != 0 {
		return fmt.Errorf("afxdp: XDP_MMAP_OFFSETS: %w", e)
	}
	desc := uint64(unsafe.Sizeof(unix.XDPDesc{}))
	for _, r := range []struct {
		r     *ring
		off   unix.XDPRingOffset
		pgoff int64
		entry uint64
	}{
		{&c.fill, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, 8},
		{&c.comp, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, 8},
		{&c.rx, off.Rx, unix.XDP_PGOFF_RX_RING, desc},
		{&c.tx, off.Tx, unix.XDP_PGOFF_TX_RING, desc},
	} {
		if err := r.r.mmap(c.fd, r.off, r.pgoff, c.rxFrames, r.entry); err != nil {
			return err
		}
	}
	for i := uint32(0); i < c.rxFrames; i++ {
		*c.fill.addr(i) = uint64(i) * FrameSize
	}
	c.fill.publishProducer(c.rxFrames)
	c.txFree = make([]uint64, 0, cfg.Frames-c.rxFrames)
	for i := c.rxFrames; i < cfg.Frames; i++ {
		c.txFree = append(c.txFree, uint64(i)*FrameSize)
	}
	c.txProd = c.tx.loadProducer()
	sa := &unix.SockaddrXDP{Flags: unix.XDP_ZEROCOPY, Ifindex: uint32(c.ifi.Index), QueueID: cfg.Queue}
	c.mode = "zero-copy"
	zcErr := errors.New("not tried (Config.Copy)")
	if !cfg.Copy {
		zcErr = unix.Bind(c.fd, sa)
	}
	if zcErr != nil {
		sa.Flags, c.mode = unix.XDP_COPY, "copy"
		if err := unix.Bind(c.fd, sa); err != nil {
			return fmt.Errorf("afxdp: bind to %s queue %d: zero-copy: %v; copy mode: %w", ifname, cfg.Queue, zcErr, err)
		}
	}
	// Recv waits in Go's netpoller (epoll), like the other transports'
	// sockets: a frame wakes a parked goroutine, not a thread blocked in
	// poll(2), and Close's deadline wakes it too.
	if err := unix.SetNonblock(c.fd, true); err != nil {
		return fmt.Errorf("afxdp: non-blocking socket: %w", err)
	}
	c.file = os.NewFile(uintptr(c.fd), "afxdp:"+ifname)
	if err := c.file.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("afxdp: socket not pollable: %w", err)
	}
	if c.rc, err = c.file.SyscallConn(); err != nil {
		return fmt.Errorf("afxdp: socket: %w", err)
	}
	c.readFn = func(uintptr) bool {
		c.rxN = c.take(c.rxBufs, c.rxSizes)
		return c.rxN > 0 || c.closed.Load()
	}
	c.readyFn = func(uintptr) bool {
		return c.rx.loadProducer() != c.rx.loadConsumer() || c.closed.Load()
	}
	return nil
}

// attach attaches the redirect program, in native mode unless generic
// says otherwise or the driver refuses, and returns the mode.
func (c *Conn) attach(generic bool) (string, error) {
	prog, idx := c.objs.DxpuXskRedirect, c.ifi.Index
	var native error = errors.New("not tried (Config.Generic)")
	if !generic {
		if c.xdp, native = link.AttachXDP(link.XDPOptions{Program: prog, Interface: idx, Flags: link.XDPDriverMode}); native == nil {
			return "native", nil
		}
		if errors.Is(native, unix.EBUSY) || errors.Is(native, unix.EEXIST) {
			return "", fmt.Errorf("afxdp: %s already has an XDP program: %w", c.ifi.Name, native)
		}
	}
	var err error
	if c.xdp, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: idx, Flags: link.XDPGenericMode}); err != nil {
		return "", fmt.Errorf("afxdp: attach XDP to %s: native mode: %v; generic mode: %w", c.ifi.Name, native, err)
	}
	return "generic", nil
}

// Mode says how frames move: "native XDP, copy" on a veth, "native XDP,
// zero-copy" on a NIC whose driver offers it.
func (c *Conn) Mode() string { return c.mode }

// MTU returns the largest dxpu frame the link carries: the interface MTU,
// at most what fits a UMEM frame.
func (c *Conn) MTU() int { return c.mtu }

// Stats returns the drop counters.
func (c *Conn) Stats() Stats {
	return Stats{Foreign: c.foreign.Load(), Malformed: c.malformed.Load(), Oversize: c.oversize.Load(),
		BadDescriptors: c.badDesc.Load(), TXFull: c.txFull.Load()}
}

// ForeignDropped returns how many frames c dropped for coming from a MAC
// address other than the peer's (Stats.Foreign): driver.Runner exports it
// as bridge.Counters.DroppedForeignSource. Any goroutine may call it.
func (c *Conn) ForeignDropped() uint64 { return c.foreign.Load() }

// Send transmits one frame to the peer.
func (c *Conn) Send(frame []byte) error {
	one := [1][]byte{frame}
	_, err := c.SendBatch(one[:])
	return err
}

// SendBatch copies each frame behind an Ethernet header into a free TX
// frame, posts them on the TX ring and kicks the kernel once. When every
// TX frame is in flight it kicks and waits for completions.
func (c *Conn) SendBatch(frames [][]byte) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return 0, ErrClosed
	}
	c.txMu.Lock()
	defer c.txMu.Unlock()
	for i, f := range frames {
		if len(f) > c.mtu {
			if err := c.kick(); err != nil {
				return i, err
			}
			return i, fmt.Errorf("afxdp: %d-byte frame exceeds the MTU of %d on %s", len(f), c.mtu, c.ifi.Name)
		}
		addr, err := c.txFrame()
		if err != nil {
			if errors.Is(err, ErrNoFrame) {
				c.txFull.Add(1)
			}
			return i, err
		}
		b := c.umem[addr : addr+FrameSize]
		copy(b, c.hdr[:])
		n := copy(b[ethHeader:], f)
		*c.tx.desc(c.txProd) = unix.XDPDesc{Addr: addr, Len: uint32(ethHeader + n)}
		c.txProd++
	}
	return len(frames), c.kick()
}

// txFrame takes a free TX frame, reaping completions first when none is
// free; when all are in flight, it pushes the posted ones out and waits.
func (c *Conn) txFrame() (uint64, error) {
	for try := 0; ; try++ {
		if len(c.txFree) == 0 {
			c.reap()
		}
		if n := len(c.txFree); n > 0 {
			addr := c.txFree[n-1]
			c.txFree = c.txFree[:n-1]
			return addr, nil
		}
		if err := c.kick(); err != nil {
			return 0, err
		}
		switch {
		case c.closed.Load():
			return 0, ErrClosed
		case try < 64:
			runtime.Gosched() // completions come from the peer's softirq
		case try < 64+1000:
			time.Sleep(time.Millisecond) // Close waits for this at most
		default:
			return 0, ErrNoFrame
		}
	}
}

// reap takes the frames the kernel finished sending back from the
// completion ring.
func (c *Conn) reap() {
	cons, prod := c.comp.loadConsumer(), c.comp.loadProducer()
	if cons == prod {
		return
	}
	lo, hi := uint64(c.rxFrames)*FrameSize, uint64(len(c.umem))
	for ; cons != prod; cons++ {
		addr := *c.comp.addr(cons) &^ (FrameSize - 1)
		if addr < lo || addr >= hi || len(c.txFree) == cap(c.txFree) {
			c.badDesc.Add(1)
			continue
		}
		c.txFree = append(c.txFree, addr)
	}
	c.comp.publishConsumer(cons)
}

// kick publishes the posted TX entries and asks the kernel to send them.
// Copy mode sends a bounded batch per call (32 frames) and answers EAGAIN
// while more wait, so it kicks until the ring is drained or the device
// stops taking frames; what is left goes out with the next kick.
func (c *Conn) kick() error {
	c.tx.publishProducer(c.txProd)
	stalled := 0
	for c.tx.loadConsumer() != c.txProd && stalled < 4 {
		before := c.tx.loadConsumer()
		_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(c.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS:
		default:
			return fmt.Errorf("afxdp: kick TX on %s: %w", c.ifi.Name, e)
		}
		if c.tx.loadConsumer() == before {
			stalled++
			runtime.Gosched()
		}
	}
	return nil
}

// Recv returns the next frame from the peer.
func (c *Conn) Recv(buf []byte) (int, error) {
	c.life.RLock()
	defer c.life.RUnlock()
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	c.one[0] = buf
	_, err := c.recv(c.one[:], c.oneSize[:])
	c.one[0] = nil
	if err != nil {
		return 0, err
	}
	return c.oneSize[0], nil
}

// RecvBatch blocks for at least one frame from the peer, then takes the
// frames already on the RX ring, up to len(bufs), copying each one's dxpu
// part (after the Ethernet header and any VLAN tags) into bufs.
func (c *Conn) RecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if len(bufs) == 0 || len(sizes) < len(bufs) {
		return 0, fmt.Errorf("afxdp: receive: %d buffers and %d sizes: want at least one buffer and a size for each", len(bufs), len(sizes))
	}
	c.life.RLock()
	defer c.life.RUnlock()
	c.rxMu.Lock()
	defer c.rxMu.Unlock()
	return c.recv(bufs, sizes)
}

// TryRecvBatch is RecvBatch that never waits: it takes the frames on the
// RX ring, and returns 0 when there are none or when another goroutine is
// receiving at the moment. Any goroutine may call it, also while one waits
// in WaitReadable (driver.Poller: a busy-polling loop takes frames without
// a goroutine switch).
func (c *Conn) TryRecvBatch(bufs [][]byte, sizes []int) (int, error) {
	if len(bufs) == 0 || len(sizes) < len(bufs) {
		return 0, fmt.Errorf("afxdp: receive: %d buffers and %d sizes: want at least one buffer and a size for each", len(bufs), len(sizes))
	}
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return 0, ErrClosed
	}
	if !c.rxMu.TryLock() {
		return 0, nil
	}
	defer c.rxMu.Unlock()
	return c.take(bufs, sizes), nil
}

// WaitReadable blocks until the RX ring holds a frame or c is closed; it
// takes nothing, so the TryRecvBatch that follows may find that another
// goroutine took it. Call it from one goroutine at a time.
func (c *Conn) WaitReadable() error {
	c.life.RLock()
	defer c.life.RUnlock()
	if c.closed.Load() {
		return ErrClosed
	}
	err := c.rc.Read(c.readyFn)
	switch {
	case c.closed.Load():
		return ErrClosed
	case err != nil:
		return fmt.Errorf("afxdp: wait on %s: %w", c.ifi.Name, err)
	}
	return nil
}

// recv takes frames, waiting in the netpoller while the RX ring holds
// none from the peer. Called with life and rxMu held.
func (c *Conn) recv(bufs [][]byte, sizes []int) (int, error) {
	if c.closed.Load() {
		return 0, ErrClosed
	}
	c.rxBufs, c.rxSizes, c.rxN = bufs, sizes, 0
	err := c.rc.Read(c.readFn)
	c.rxBufs, c.rxSizes = nil, nil
	switch {
	case c.rxN > 0:
		return c.rxN, nil
	case c.closed.Load():
		return 0, ErrClosed
	case err != nil:
		return 0, fmt.Errorf("afxdp: receive on %s: %w", c.ifi.Name, err)
	}
	return 0, fmt.Errorf("afxdp: receive on %s: woken with nothing", c.ifi.Name)
}

// take consumes the RX ring: each frame from the peer is copied out, and
// every frame goes straight back to the fill ring (which holds all RX
// frames, so it has room): the kernel never runs out of frames to fill.
func (c *Conn) take(bufs [][]byte, sizes []int) int {
	cons, prod := c.rx.loadConsumer(), c.rx.loadProducer()
	fill := c.fill.loadProducer()
	rxBytes := uint64(c.rxFrames) * FrameSize
	n := 0
	for ; cons != prod && n < len(bufs) && n < len(sizes); cons++ {
		d := *c.rx.desc(cons)
		chunk := d.Addr &^ (FrameSize - 1)
		if chunk >= rxBytes {
			c.badDesc.Add(1) // not an RX frame: never give it to the kernel
			continue
		}
		if end := d.Addr + uint64(d.Len); end > chunk+FrameSize {
			c.badDesc.Add(1)
		} else if k, ok := c.payload(c.umem[d.Addr:end], bufs[n]); ok {
			sizes[n] = k
			n++
		}
		*c.fill.addr(fill) = chunk
		fill++
	}
	c.rx.publishConsumer(cons)
	c.fill.publishProducer(fill)
	return n
}

// payload copies frame's dxpu part into buf and returns its length, or
// counts why it dropped the frame.
func (c *Conn) payload(frame, buf []byte) (int, bool) {
	if len(frame) < ethHeader {
		c.malformed.Add(1)
		return 0, false
	}
	if !bytes.Equal(frame[6:12], c.peer[:]) {
		c.foreign.Add(1)
		return 0, false
	}
	off := 12
	for tags := 0; ; tags++ {
		if off+2 > len(frame) {
			c.malformed.Add(1)
			return 0, false
		}
		t := binary.BigEndian.Uint16(frame[off:])
		if (t == 0x8100 || t == 0x88a8) && tags < 2 {
			off += 4
			continue
		}
		if t != encap.EtherType {
			c.malformed.Add(1)
			return 0, false
		}
		off += 2
		break
	}
	if len(frame)-off > len(buf) {
		c.oversize.Add(1)
		return 0, false
	}
	return copy(buf, frame[off:]), true
}

// Close detaches the program and releases the socket, rings and UMEM,
// once no Send or Recv is inside them.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	_ = c.file.SetReadDeadline(time.Unix(1, 0)) // wakes a waiting Recv
	c.life.Lock()
	defer c.life.Unlock()
	return c.teardown()
}

func (c *Conn) teardown() error {
	var errs []error
	if c.xdp != nil {
		errs = append(errs, c.xdp.Close())
		c.xdp = nil
	}
	errs = append(errs, c.objs.Close())
	for _, r := range []*ring{&c.fill, &c.comp, &c.rx, &c.tx} {
		r.unmap()
	}
	switch {
	case c.file != nil:
		errs = append(errs, c.file.Close())
		c.file, c.fd = nil, -1
	case c.fd >= 0:
		errs = append(errs, unix.Close(c.fd))
		c.fd = -1
	}
	if c.umem != nil {
		errs = append(errs, unix.Munmap(c.umem))
		c.umem = nil
	}
	return errors.Join(errs...)
}
