package guest

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/dxpu/dxpu/emu/gpudrv"
)

// Host is a gpudrv.Host on Linux: BAR0 mapped through sysfs, DMA memory in
// pinned hugepages. Register addresses are offsets into BAR0 (open
// channels with bar0 = 0); memory addresses are bus addresses.
type Host struct {
	bar   *BAR
	pages map[uint64]hostPage // bus address >> 21 -> the page's bytes
	arena *DMA                // small allocations (rings, pushbuffers, semaphores)
	next  uint64
}

type hostPage struct {
	mem []byte
}

var _ gpudrv.Host = (*Host)(nil)

// NewHost drives the GPU whose BAR0 is bar, with arenaBytes of hugepage
// memory for the driver's own structures.
func NewHost(bar *BAR, arenaBytes uint64) (*Host, error) {
	a, err := AllocDMA(arenaBytes)
	if err != nil {
		return nil, err
	}
	h := &Host{bar: bar, pages: map[uint64]hostPage{}, arena: a}
	h.Register(a)
	return h, nil
}

// Register makes d reachable by WriteMem and ReadMem.
func (h *Host) Register(d *DMA) {
	for i, b := range d.bus {
		h.pages[b/HugePage] = hostPage{mem: d.mem[uint64(i)*HugePage : uint64(i+1)*HugePage]}
	}
}

// Alloc hands out zeroed memory from the arena; n must fit in what is left
// of the current hugepage (every allocation is physically contiguous).
func (h *Host) Alloc(n, align uint64) (uint64, error) {
	if align == 0 || align&(align-1) != 0 || n == 0 || n > HugePage {
		return 0, fmt.Errorf("guest: Alloc(%d, align %d)", n, align)
	}
	off := (h.next + align - 1) &^ (align - 1)
	if off/HugePage != (off+n-1)/HugePage {
		off = (off + HugePage - 1) &^ (HugePage - 1) // start on the next page
	}
	if off+n > h.arena.Len() {
		return 0, fmt.Errorf("guest: DMA arena of %d bytes exhausted (%d more wanted)", h.arena.Len(), n)
	}
	h.next = off + n
	return h.arena.Bus(off), nil
}

func (h *Host) span(addr uint64, n int) ([]byte, error) {
	p, ok := h.pages[addr/HugePage]
	off := addr % HugePage
	if !ok || off+uint64(n) > HugePage {
		return nil, fmt.Errorf("guest: %d bytes at bus address %#x are not in one DMA page of this host", n, addr)
	}
	return p.mem[off : off+uint64(n)], nil
}

// WriteMem stores p at bus address addr.
func (h *Host) WriteMem(addr uint64, p []byte) error {
	b, err := h.span(addr, len(p))
	if err != nil {
		return err
	}
	copy(b, p)
	return nil
}

// ReadMem loads len(p) bytes at bus address addr. An aligned 8-byte read
// (a semaphore the GPU writes by DMA) is one atomic load, so polling it
// always reads memory.
func (h *Host) ReadMem(addr uint64, p []byte) error {
	b, err := h.span(addr, len(p))
	if err != nil {
		return err
	}
	if len(p) == 8 && addr%8 == 0 {
		binary.LittleEndian.PutUint64(p, atomic.LoadUint64((*uint64)(unsafe.Pointer(&b[0]))))
		return nil
	}
	copy(p, b)
	return nil
}

// MMIOWrite32 stores v to the BAR0 register at offset addr.
func (h *Host) MMIOWrite32(addr uint64, v uint32) error { return h.bar.Write32(addr, v) }

// Close releases the arena.
func (h *Host) Close() error { return h.arena.Close() }
