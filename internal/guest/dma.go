package guest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HugePage is the size of the pages DMA memory is made of: each is
// physically contiguous, so a transfer splits at most every 2 MiB.
const HugePage = 2 << 20

// DefaultCopyBytes is the default size of each copy the tool checks
// (`dxpu-guest run --bytes`, `dxpu vm run --bytes`).
const DefaultCopyBytes = 64 << 20

// Files the DMA allocator uses; variables so tests can point them at fakes.
var (
	nrHugepagesFile   = "/proc/sys/vm/nr_hugepages"
	freeHugepagesFile = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
	compactMemoryFile = "/proc/sys/vm/compact_memory"
	pagemapFile       = "/proc/self/pagemap"
)

// ErrNoBusAddress is a pagemap that hides physical addresses (the process
// lacks CAP_SYS_ADMIN) or a page that is not present.
var ErrNoBusAddress = errors.New("guest: no physical address in /proc/self/pagemap")

// DMA is pinned memory made of 2 MiB hugepages with the bus address of
// each: with no IOMMU (a QEMU guest has none) the bus address is the
// physical address pagemap reports.
type DMA struct {
	mem []byte
	bus []uint64 // bus address of each hugepage
}

// AllocDMA pins at least n bytes (rounded up to hugepages), zeroed,
// reserving hugepages in the kernel first if too few are free.
func AllocDMA(n uint64) (*DMA, error) {
	if n == 0 || n > 1<<40 {
		return nil, fmt.Errorf("guest: DMA allocation of %d bytes", n)
	}
	pages := (n + HugePage - 1) / HugePage
	if err := reserveHugepages(pages); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(-1, 0, int(pages*HugePage), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_HUGETLB|unix.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("guest: mapping %d hugepages: %w", pages, err)
	}
	if err := unix.Mlock(mem); err != nil {
		_ = unix.Munmap(mem)
		return nil, fmt.Errorf("guest: pinning %d hugepages: %w", pages, err)
	}
	d := &DMA{mem: mem, bus: make([]uint64, pages)}
	if err := d.translate(); err != nil {
		_ = unix.Munmap(mem)
		return nil, err
	}
	return d, nil
}

// reserveHugepages raises vm.nr_hugepages until need pages are free.
func reserveHugepages(need uint64) error {
	free, err := readUint(freeHugepagesFile)
	if err != nil {
		return err
	}
	if free >= need {
		return nil
	}
	total, err := readUint(nrHugepagesFile)
	if err != nil {
		return err
	}
	want := total + need - free
	// The kernel gives what it finds contiguous; compacting memory between
	// tries may find more (the launcher reserves them at boot, where
	// nothing has fragmented memory yet: this is the fallback).
	for try := 0; try < 3 && free < need; try++ {
		if try > 0 {
			_ = os.WriteFile(compactMemoryFile, []byte("1"), 0)
		}
		if err := os.WriteFile(nrHugepagesFile, []byte(strconv.FormatUint(want, 10)), 0); err != nil {
			return fmt.Errorf("guest: reserving %d hugepages: %w", want, err)
		}
		if free, err = readUint(freeHugepagesFile); err != nil {
			return err
		}
	}
	if free < need {
		return fmt.Errorf("guest: asked the kernel for %d hugepages, %d free, need %d (memory too small or fragmented)", want, free, need)
	}
	return nil
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("guest: %w", err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("guest: %s: %w", path, err)
	}
	return v, nil
}

// translate finds each hugepage's physical address in pagemap.
func (d *DMA) translate() error {
	f, err := os.Open(pagemapFile)
	if err != nil {
		return fmt.Errorf("guest: %w", err)
	}
	defer f.Close()
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(d.mem))))
	var e [8]byte
	for i := range d.bus {
		va := base + uint64(i)*HugePage
		if _, err := f.ReadAt(e[:], int64(va/4096*8)); err != nil {
			return fmt.Errorf("guest: pagemap entry of %#x: %w", va, err)
		}
		pa, err := physFromPagemap(binary.LittleEndian.Uint64(e[:]))
		if err != nil {
			return fmt.Errorf("page at %#x: %w", va, err)
		}
		d.bus[i] = pa
	}
	return nil
}

// physFromPagemap decodes one pagemap entry (Documentation/admin-guide/mm/
// pagemap.rst): bit 63 present, bits 0-54 the page frame number, which
// reads 0 without CAP_SYS_ADMIN.
func physFromPagemap(e uint64) (uint64, error) {
	if e&(1<<63) == 0 {
		return 0, fmt.Errorf("%w: page not present (entry %#x)", ErrNoBusAddress, e)
	}
	pfn := e & (1<<55 - 1)
	if pfn == 0 {
		return 0, fmt.Errorf("%w: frame number hidden (needs CAP_SYS_ADMIN)", ErrNoBusAddress)
	}
	return pfn * 4096, nil
}

// Len returns the bytes allocated.
func (d *DMA) Len() uint64 { return uint64(len(d.mem)) }

// Bytes returns the memory, for the CPU's loads and stores.
func (d *DMA) Bytes() []byte { return d.mem }

// Bus returns the bus address of byte off.
func (d *DMA) Bus(off uint64) uint64 { return d.bus[off/HugePage] + off%HugePage }

// Chunk is a physically contiguous piece of a DMA buffer.
type Chunk struct {
	Off, Bus, Len uint64
}

// Chunks splits [off, off+n) into physically contiguous pieces, merging
// neighbouring hugepages that happen to be adjacent in memory.
func (d *DMA) Chunks(off, n uint64) ([]Chunk, error) {
	if off+n < off || off+n > d.Len() {
		return nil, fmt.Errorf("guest: %d bytes at offset %d outside a %d-byte DMA buffer", n, off, d.Len())
	}
	return chunks(d.bus, off, n), nil
}

func chunks(bus []uint64, off, n uint64) []Chunk {
	var out []Chunk
	for n > 0 {
		k := min(n, HugePage-off%HugePage)
		b := bus[off/HugePage] + off%HugePage
		if l := len(out) - 1; l >= 0 && out[l].Bus+out[l].Len == b {
			out[l].Len += k
		} else {
			out = append(out, Chunk{Off: off, Bus: b, Len: k})
		}
		off, n = off+k, n-k
	}
	return out
}

// Close unpins and unmaps the memory.
func (d *DMA) Close() error { return unix.Munmap(d.mem) }
