package vmm

import (
	"fmt"
	"sort"
	"sync"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"golang.org/x/sys/unix"
)

// ErrOutsideRAM is a DMA access that does not lie wholly inside one region
// of the guest's RAM: the device gets Unsupported Request, and no byte of
// guest memory is touched.
var ErrOutsideRAM = fmt.Errorf("vmm: address outside guest RAM: %w", nettlp.ErrOutOfRange)

// RAMRegion is one slice of guest RAM: guest-physical GPA..GPA+len(Mem).
type RAMRegion struct {
	GPA uint64
	Mem []byte
}

// GuestRAM is the guest's memory as the VMM shared it, mapped into this
// process. The VMM replaces the map whenever the guest's memory layout
// changes (Replace); accesses in flight finish on the map they started on.
// It is safe for concurrent use.
type GuestRAM struct {
	mu      sync.RWMutex
	regions []RAMRegion // sorted by GPA, non-overlapping
	unmap   func()
}

// Replace installs a new map. unmap, if not nil, releases it when the next
// Replace or Close retires it.
func (g *GuestRAM) Replace(regions []RAMRegion, unmap func()) error {
	rs := append([]RAMRegion(nil), regions...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].GPA < rs[j].GPA })
	for i := 1; i < len(rs); i++ {
		if prev := rs[i-1]; prev.GPA+uint64(len(prev.Mem)) > rs[i].GPA {
			return fmt.Errorf("vmm: guest RAM regions at %#x and %#x overlap", prev.GPA, rs[i].GPA)
		}
	}
	g.mu.Lock()
	old := g.unmap
	g.regions, g.unmap = rs, unmap
	g.mu.Unlock()
	if old != nil {
		old()
	}
	return nil
}

// Close unmaps the current map.
func (g *GuestRAM) Close() error { return g.Replace(nil, nil) }

// Size returns the bytes of guest RAM mapped.
func (g *GuestRAM) Size() uint64 {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var n uint64
	for _, r := range g.regions {
		n += uint64(len(r.Mem))
	}
	return n
}

// span returns the bytes at [addr, addr+n) if they lie in one region.
// Called with g.mu held.
func (g *GuestRAM) span(addr uint64, n int) ([]byte, error) {
	i := sort.Search(len(g.regions), func(i int) bool { return g.regions[i].GPA+uint64(len(g.regions[i].Mem)) > addr })
	if i < len(g.regions) {
		r := g.regions[i]
		if addr >= r.GPA && addr+uint64(n) >= addr && addr+uint64(n) <= r.GPA+uint64(len(r.Mem)) {
			off := addr - r.GPA
			return r.Mem[off : off+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("%w: %d bytes at %#x", ErrOutsideRAM, n, addr)
}

// ReadAt copies guest memory at guest-physical addr into p.
func (g *GuestRAM) ReadAt(p []byte, addr uint64) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	b, err := g.span(addr, len(p))
	if err != nil {
		return err
	}
	copy(p, b)
	return nil
}

// WriteAt copies p into guest memory at guest-physical addr.
func (g *GuestRAM) WriteAt(p []byte, addr uint64) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	b, err := g.span(addr, len(p))
	if err != nil {
		return err
	}
	copy(b, p)
	return nil
}

// MapFD maps size bytes at offset of a memfd the VMM sent, shared and
// writable, as the region at gpa. The caller closes fd afterwards (the
// mapping keeps the memory alive) and calls the returned unmap when the
// region is retired.
func MapFD(fd int, gpa, size uint64, offset int64) (RAMRegion, func(), error) {
	if size == 0 || size > 1<<46 || offset < 0 {
		return RAMRegion{}, nil, fmt.Errorf("vmm: region at %#x: size %#x offset %#x out of range", gpa, size, offset)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return RAMRegion{}, nil, fmt.Errorf("vmm: region at %#x: fstat: %w", gpa, err)
	}
	if uint64(st.Size) < uint64(offset)+size {
		return RAMRegion{}, nil, fmt.Errorf("vmm: region at %#x: %#x bytes at offset %#x, but the file holds %#x", gpa, size, offset, st.Size)
	}
	mem, err := unix.Mmap(fd, offset, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return RAMRegion{}, nil, fmt.Errorf("vmm: region at %#x: mmap: %w", gpa, err)
	}
	return RAMRegion{GPA: gpa, Mem: mem}, func() { _ = unix.Munmap(mem) }, nil
}
