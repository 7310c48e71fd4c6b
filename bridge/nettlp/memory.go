package nettlp

import (
	"errors"
	"fmt"
	"sync"
)

// ErrOutOfRange is returned by a Memory for an access that touches an
// address it does not back; the target answers such reads with UR and
// drops such writes.
var ErrOutOfRange = errors.New("nettlp: address out of range")

// Memory is the host memory a Target serves: physical addresses, byte
// granular. Implementations must be safe for concurrent use (a target
// serves from one goroutine, but others may share the memory). An access that is not
// wholly backed fails with an error wrapping ErrOutOfRange and changes
// nothing.
type Memory interface {
	ReadAt(p []byte, addr uint64) error
	WriteAt(p []byte, addr uint64) error
}

// pageSize is the allocation unit of SparseMemory.
const pageSize = 4096

// SparseMemory is a Memory backing [Base, Base+Size) with pages allocated on
// first write; unwritten bytes read as Fill(addr) (zero when Fill is nil).
// It suits a large emulated address space of which a test or a tool touches
// little.
type SparseMemory struct {
	base, size uint64
	fill       func(addr uint64) byte

	mu    sync.RWMutex
	pages map[uint64]*[pageSize]byte
}

// NewSparseMemory returns a memory backing [base, base+size). fill, if not
// nil, gives the content of never-written bytes.
func NewSparseMemory(base, size uint64, fill func(addr uint64) byte) (*SparseMemory, error) {
	if size == 0 {
		return nil, fmt.Errorf("nettlp: memory size 0")
	}
	if base+size < base {
		return nil, fmt.Errorf("nettlp: memory [%#x, +%#x) wraps the 64-bit address space", base, size)
	}
	return &SparseMemory{base: base, size: size, fill: fill, pages: make(map[uint64]*[pageSize]byte)}, nil
}

// Base and Size describe the backed range.
func (m *SparseMemory) Base() uint64 { return m.base }
func (m *SparseMemory) Size() uint64 { return m.size }

// Pages returns how many 4 KiB pages have been allocated by writes.
func (m *SparseMemory) Pages() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.pages)
}

func (m *SparseMemory) check(addr uint64, n int) error {
	end := addr + uint64(n)
	if addr < m.base || end < addr || end > m.base+m.size {
		return fmt.Errorf("%w: [%#x, +%d) outside [%#x, %#x)", ErrOutOfRange, addr, n, m.base, m.base+m.size)
	}
	return nil
}

// ReadAt implements Memory.
func (m *SparseMemory) ReadAt(p []byte, addr uint64) error {
	if err := m.check(addr, len(p)); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for len(p) > 0 {
		off := addr % pageSize
		n := min(uint64(len(p)), pageSize-off)
		if pg := m.pages[addr-off]; pg != nil {
			copy(p[:n], pg[off:])
		} else if m.fill == nil {
			clear(p[:n])
		} else {
			for i := range p[:n] {
				p[i] = m.fill(addr + uint64(i))
			}
		}
		p, addr = p[n:], addr+n
	}
	return nil
}

// WriteAt implements Memory.
func (m *SparseMemory) WriteAt(p []byte, addr uint64) error {
	if err := m.check(addr, len(p)); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(p) > 0 {
		off := addr % pageSize
		n := min(uint64(len(p)), pageSize-off)
		pg := m.pages[addr-off]
		if pg == nil {
			pg = new([pageSize]byte)
			if m.fill != nil {
				for i := range pg {
					pg[i] = m.fill(addr - off + uint64(i))
				}
			}
			m.pages[addr-off] = pg
		}
		copy(pg[off:], p[:n])
		p, addr = p[n:], addr+n
	}
	return nil
}

// AddrMemory is a memory addressed first and without errors, the shape of
// the emulator's sparse memory (emu/pcie.Memory satisfies it).
type AddrMemory interface {
	Read(addr uint64, dst []byte)
	Write(addr uint64, src []byte)
}

// Bounded makes a Memory of m that backs [base, base+size). lock, if not
// nil, is held around every access: pass the lock that guards m elsewhere
// when m is not safe for concurrent use (a Target calls from one goroutine
// per tag port).
func Bounded(m AddrMemory, base, size uint64, lock sync.Locker) (Memory, error) {
	if m == nil || size == 0 || base+size < base {
		return nil, fmt.Errorf("%w: bounded memory [%#x, +%#x) over %v", ErrConfig, base, size, m)
	}
	if lock == nil {
		lock = noLock{}
	}
	return &bounded{m: m, base: base, size: size, lock: lock}, nil
}

type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

type bounded struct {
	m          AddrMemory
	base, size uint64
	lock       sync.Locker
}

func (b *bounded) check(addr uint64, n int) error {
	end := addr + uint64(n)
	if addr < b.base || end < addr || end > b.base+b.size {
		return fmt.Errorf("%w: [%#x, +%d) outside [%#x, %#x)", ErrOutOfRange, addr, n, b.base, b.base+b.size)
	}
	return nil
}

func (b *bounded) ReadAt(p []byte, addr uint64) error {
	if err := b.check(addr, len(p)); err != nil {
		return err
	}
	b.lock.Lock()
	defer b.lock.Unlock()
	b.m.Read(addr, p)
	return nil
}

func (b *bounded) WriteAt(p []byte, addr uint64) error {
	if err := b.check(addr, len(p)); err != nil {
		return err
	}
	b.lock.Lock()
	defer b.lock.Unlock()
	b.m.Write(addr, p)
	return nil
}
