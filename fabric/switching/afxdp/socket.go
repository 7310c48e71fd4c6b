package afxdp

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config sizes a socket. Ring sizes must be powers of two.
type Config struct {
	NumFrames uint32 // UMEM frames (default 4096)
	FrameSize uint32 // bytes per frame, 2048 or 4096 (default 2048)
	RingSize  uint32 // entries per ring (default 1024)
}

func (c *Config) defaults() error {
	if c.NumFrames == 0 {
		c.NumFrames = 4096
	}
	if c.FrameSize == 0 {
		c.FrameSize = 2048
	}
	if c.RingSize == 0 {
		c.RingSize = 1024
	}
	if c.FrameSize != 2048 && c.FrameSize != 4096 {
		return fmt.Errorf("afxdp: frame size %d: want 2048 or 4096", c.FrameSize)
	}
	if c.RingSize&(c.RingSize-1) != 0 || c.NumFrames < 2*c.RingSize {
		return fmt.Errorf("afxdp: ring size %d must be a power of two and at most half of %d frames", c.RingSize, c.NumFrames)
	}
	return nil
}

// ring is one mmapped ring.
type ring struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	descs    unsafe.Pointer
	mask     uint32
	size     uint32
}

func (r *ring) addr(i uint32) *uint64 { return (*uint64)(unsafe.Add(r.descs, uintptr(i&r.mask)*8)) }
func (r *ring) desc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.descs, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// Socket is one AF_XDP socket with its UMEM and rings. Not safe for
// concurrent use: one goroutine drives it.
type Socket struct {
	fd                 int
	cfg                Config
	umem               []byte
	fill, comp, rx, tx ring
	free               []uint64 // UMEM frames owned by us, not on any ring
	txOutstanding      uint32
}

// ErrClosed is returned after Close.
var ErrClosed = errors.New("afxdp: socket closed")

// Open creates a socket bound in copy mode to queue of ifindex (in the
// calling thread's network namespace). An XDP program must then redirect
// frames to it (FD into an XSKMAP).
func Open(ifindex int, queue uint32, cfg Config) (_ *Socket, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("afxdp: socket: %w", err)
	}
	s := &Socket{fd: fd, cfg: cfg}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	size := int(cfg.NumFrames * cfg.FrameSize)
	if s.umem, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE); err != nil {
		return nil, fmt.Errorf("afxdp: UMEM of %d bytes: %w", size, err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(size), Size: cfg.FrameSize}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return nil, fmt.Errorf("afxdp: XDP_UMEM_REG: %w", err)
	}
	for _, opt := range []int{unix.XDP_UMEM_FILL_RING, unix.XDP_UMEM_COMPLETION_RING, unix.XDP_RX_RING, unix.XDP_TX_RING} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, opt, int(cfg.RingSize)); err != nil {
			return nil, fmt.Errorf("afxdp: ring size option %d: %w", opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	offLen := uint32(unsafe.Sizeof(off))
	if _, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&offLen)), 0); e != 0 {
		return nil, fmt.Errorf("afxdp: XDP_MMAP_OFFSETS: %w", e)
	}
	descSize := uint64(unsafe.Sizeof(unix.XDPDesc{}))
	if err := s.fill.mmap(fd, off.Fr, unix.XDP_UMEM_PGOFF_FILL_RING, cfg.RingSize, 8); err != nil {
		return nil, err
	}
	if err := s.comp.mmap(fd, off.Cr, unix.XDP_UMEM_PGOFF_COMPLETION_RING, cfg.RingSize, 8); err != nil {
		return nil, err
	}
	if err := s.rx.mmap(fd, off.Rx, unix.XDP_PGOFF_RX_RING, cfg.RingSize, descSize); err != nil {
		return nil, err
	}
	if err := s.tx.mmap(fd, off.Tx, unix.XDP_PGOFF_TX_RING, cfg.RingSize, descSize); err != nil {
		return nil, err
	}
	// Half the frames feed RX through the fill ring, half are for TX.
	for i := uint32(0); i < cfg.NumFrames; i++ {
		s.free = append(s.free, uint64(i*cfg.FrameSize))
	}
	s.refill()
	if err := unix.Bind(fd, &unix.SockaddrXDP{Flags: unix.XDP_COPY, Ifindex: uint32(ifindex), QueueID: queue}); err != nil {
		return nil, fmt.Errorf("afxdp: bind to ifindex %d queue %d (copy mode): %w", ifindex, queue, err)
	}
	return s, nil
}

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, e := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); e != 0 {
		return e
	}
	return nil
}

func (r *ring) mmap(fd int, off unix.XDPRingOffset, pgoff int64, n uint32, entry uint64) error {
	size := int(off.Desc + uint64(n)*entry)
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("afxdp: mmap of ring at %#x: %w", pgoff, err)
	}
	r.mem = mem
	r.producer = (*uint32)(unsafe.Pointer(&mem[off.Producer]))
	r.consumer = (*uint32)(unsafe.Pointer(&mem[off.Consumer]))
	r.descs = unsafe.Pointer(&mem[off.Desc])
	r.mask, r.size = n-1, n
	return nil
}

// FD returns the socket's descriptor, for an XSKMAP.
func (s *Socket) FD() int { return s.fd }

// Close unmaps and closes everything.
func (s *Socket) Close() error {
	for _, r := range []*ring{&s.fill, &s.comp, &s.rx, &s.tx} {
		if r.mem != nil {
			unix.Munmap(r.mem)
			r.mem = nil
		}
	}
	var err error
	if s.fd >= 0 {
		err = unix.Close(s.fd)
		s.fd = -1
	}
	if s.umem != nil {
		unix.Munmap(s.umem)
		s.umem = nil
	}
	return err
}

// refill gives free frames to the kernel for RX, keeping half of the frames
// for TX.
func (s *Socket) refill() {
	prod := atomic.LoadUint32(s.fill.producer)
	cons := atomic.LoadUint32(s.fill.consumer)
	room := s.fill.size - (prod - cons)
	keep := s.cfg.NumFrames / 4 // frames held back for TX
	n := uint32(0)
	for n < room && uint32(len(s.free)) > keep {
		*s.fill.addr(prod + n) = s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		n++
	}
	if n > 0 {
		atomic.StoreUint32(s.fill.producer, prod+n)
	}
}

// reapCompletions takes finished TX frames back.
func (s *Socket) reapCompletions() {
	prod := atomic.LoadUint32(s.comp.producer)
	cons := atomic.LoadUint32(s.comp.consumer)
	for i := cons; i != prod; i++ {
		s.free = append(s.free, *s.comp.addr(i))
		s.txOutstanding--
	}
	if prod != cons {
		atomic.StoreUint32(s.comp.consumer, prod)
	}
}

// Frame is a received frame: Buf is its UMEM frame, the frame itself is
// Buf[Off:End]; the bytes before Off are headroom the frame may grow into.
type Frame struct {
	Buf      []byte
	Off, End int
	addr     uint64
}

// Receive calls fn for up to max received frames and returns how many it
// handled; frames are released back to the fill ring afterwards (fn must
// not keep them). It does not block.
func (s *Socket) Receive(max int, fn func(f *Frame)) int {
	prod := atomic.LoadUint32(s.rx.producer)
	cons := atomic.LoadUint32(s.rx.consumer)
	n := 0
	var f Frame
	for i := cons; i != prod && n < max; i++ {
		d := s.rx.desc(i)
		chunk := d.Addr &^ uint64(s.cfg.FrameSize-1)
		f.Buf = s.umem[chunk : chunk+uint64(s.cfg.FrameSize)]
		f.Off = int(d.Addr - chunk)
		f.End = f.Off + int(d.Len)
		f.addr = chunk
		if f.End > len(f.Buf) { // a descriptor outside its frame: skip it
			s.free = append(s.free, chunk)
			n++
			continue
		}
		fn(&f)
		s.free = append(s.free, chunk)
		n++
	}
	if n > 0 {
		atomic.StoreUint32(s.rx.consumer, cons+uint32(n))
		s.refill()
	}
	return n
}

// ErrNoFrame means no UMEM frame or TX ring slot was free (the frame was
// not sent: the caller counts a drop).
var ErrNoFrame = errors.New("afxdp: transmit queue full")

// Send copies frame into a free UMEM frame and posts it on the TX ring;
// Flush kicks the kernel.
func (s *Socket) Send(frame []byte) error {
	if s.fd < 0 {
		return ErrClosed
	}
	if len(frame) > int(s.cfg.FrameSize) {
		return fmt.Errorf("afxdp: %d-byte frame exceeds the %d-byte UMEM frame", len(frame), s.cfg.FrameSize)
	}
	s.reapCompletions()
	prod := atomic.LoadUint32(s.tx.producer)
	cons := atomic.LoadUint32(s.tx.consumer)
	if prod-cons >= s.tx.size || len(s.free) == 0 {
		return ErrNoFrame
	}
	addr := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	copy(s.umem[addr:], frame)
	*s.tx.desc(prod) = unix.XDPDesc{Addr: addr, Len: uint32(len(frame))}
	atomic.StoreUint32(s.tx.producer, prod+1)
	s.txOutstanding++
	return nil
}

// Flush asks the kernel to transmit what Send posted.
func (s *Socket) Flush() error {
	if s.fd < 0 {
		return ErrClosed
	}
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	if e != 0 && e != unix.EAGAIN && e != unix.EBUSY && e != unix.ENOBUFS {
		return fmt.Errorf("afxdp: kick TX: %w", e)
	}
	return nil
}

// Wait blocks until frames are ready to Receive or timeout passes (ms).
func (s *Socket) Wait(timeoutMs int) error {
	fds := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
	_, err := unix.Poll(fds, timeoutMs)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("afxdp: poll: %w", err)
	}
	return nil
}
