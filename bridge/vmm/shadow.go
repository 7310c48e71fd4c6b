package vmm

import (
	"fmt"
	"math/bits"
)

// Config-space offsets the shadow owns.
const (
	regBAR0   = 0x10
	regBAR5   = 0x24
	regROM    = 0x30
	numBARs   = 6
	barMemPF  = 1 << 3 // prefetchable
	cmdMemory = 1 << 1 // Command register: Memory Space Enable
)

// BAR is one base address register as the guest sees it, and where the
// remote function's real BAR lives.
type BAR struct {
	// Size of the guest's window in bytes: a power of two of at least
	// 4 KiB, at most 1 GiB (a 32-bit memory BAR, what QEMU's proxy device
	// can size); 0 means the guest sees no BAR here.
	Size uint64
	// Device is the address of the window's first byte on the device:
	// its BAR's base as programmed on the GPU side, plus an offset when the
	// guest gets a window onto part of a larger BAR.
	Device uint64
	// Prefetchable sets bit 3 of the register.
	Prefetchable bool
}

// shadow holds the guest's BAR registers: the guest sizes and places its
// BARs here, and the remote function's own BARs stay where the GPU side
// programmed them. Accesses to the guest's windows are translated.
type shadow struct {
	bars [numBARs]BAR
	regs [numBARs]uint32
	rom  uint32
}

func newShadow(bars [numBARs]BAR) (*shadow, error) {
	s := &shadow{bars: bars}
	for i, b := range bars {
		if b.Size == 0 {
			continue
		}
		if b.Size < 4096 || b.Size > 1<<30 || bits.OnesCount64(b.Size) != 1 {
			return nil, fmt.Errorf("%w: BAR%d size %#x: want a power of two from 4 KiB to 1 GiB", ErrConfig, i, b.Size)
		}
		if b.Device%4 != 0 {
			return nil, fmt.Errorf("%w: BAR%d device address %#x is not DW-aligned", ErrConfig, i, b.Device)
		}
		s.regs[i] = s.flags(i)
	}
	return s, nil
}

func (s *shadow) flags(i int) uint32 {
	if s.bars[i].Prefetchable {
		return barMemPF
	}
	return 0
}

// owns reports whether config offset off (a DW register) is the shadow's.
func owns(off uint32) bool {
	reg := off &^ 3
	return (reg >= regBAR0 && reg <= regBAR5) || reg == regROM
}

// read returns the DW register at reg.
func (s *shadow) read(reg uint32) uint32 {
	if reg == regROM {
		return s.rom
	}
	return s.regs[(reg-regBAR0)/4]
}

// write merges the enabled bytes of v into the register at reg, keeping
// the size mask and the type bits, as a BAR does.
func (s *shadow) write(reg uint32, be uint8, v uint32) {
	if reg == regROM {
		return // no expansion ROM: reads as 0
	}
	i := (reg - regBAR0) / 4
	b := s.bars[i]
	if b.Size == 0 {
		return
	}
	old := s.regs[i]
	for k := range 4 {
		if be&(1<<k) != 0 {
			m := uint32(0xff) << (8 * k)
			old = old&^m | v&m
		}
	}
	s.regs[i] = old&^uint32(b.Size-1) | s.flags(int(i))
}

// decode finds the guest BAR holding guest-physical addr and n bytes from
// it, and returns the device address they stand for.
func (s *shadow) decode(addr uint64, n int) (int, uint64, bool) {
	for i, b := range s.bars {
		if b.Size == 0 {
			continue
		}
		base := uint64(s.regs[i] &^ 0xf)
		if base == 0 {
			continue // not placed yet
		}
		if addr >= base && addr+uint64(n) <= base+b.Size {
			return i, b.Device + (addr - base), true
		}
	}
	return 0, 0, false
}
