package afxdp

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is one mmapped single-producer single-consumer ring: free-running
// u32 producer and consumer indices, masked by size-1, and the entries.
type ring struct {
	mem      []byte
	producer *uint32
	consumer *uint32
	flags    *uint32
	descs    unsafe.Pointer
	mask     uint32
	size     uint32
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
	r.flags = (*uint32)(unsafe.Pointer(&mem[off.Flags]))
	r.descs = unsafe.Pointer(&mem[off.Desc])
	r.mask, r.size = n-1, n
	return nil
}

func (r *ring) unmap() {
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// addr is entry i of a fill or completion ring.
func (r *ring) addr(i uint32) *uint64 { return (*uint64)(unsafe.Add(r.descs, uintptr(i&r.mask)*8)) }

// desc is entry i of an RX or TX ring.
func (r *ring) desc(i uint32) *unix.XDPDesc {
	return (*unix.XDPDesc)(unsafe.Add(r.descs, uintptr(i&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

func (r *ring) loadProducer() uint32 { return atomic.LoadUint32(r.producer) }
func (r *ring) loadConsumer() uint32 { return atomic.LoadUint32(r.consumer) }

// publish makes entries up to i visible to the other side (a release
// store: the entries are written before the index).
func (r *ring) publishProducer(i uint32) { atomic.StoreUint32(r.producer, i) }
func (r *ring) publishConsumer(i uint32) { atomic.StoreUint32(r.consumer, i) }
