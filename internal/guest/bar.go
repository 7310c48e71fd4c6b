package guest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrDeviceGone is a device whose registers read all ones: removed, its
// link down, or its completions timing out (the host bridge answers every
// such read with all ones, as a root complex does).
var ErrDeviceGone = errors.New("guest: device gone (register reads all ones)")

// BAR is a memory BAR mapped into this process.
type BAR struct {
	mem []byte
}

// MapBAR maps BAR i of function bdf through sysfs `resource<i>`.
func MapBAR(root, bdf string, i int) (*BAR, error) {
	path := filepath.Join(root, bdf, fmt.Sprintf("resource%d", i))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_SYNC, 0)
	if err != nil {
		return nil, fmt.Errorf("guest: %s BAR%d: %w", bdf, i, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("guest: %s BAR%d: %w", bdf, i, err)
	}
	if st.Size() < 4096 {
		return nil, fmt.Errorf("guest: %s BAR%d is %d bytes: not assigned", bdf, i, st.Size())
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("guest: mapping %s BAR%d: %w", bdf, i, err)
	}
	return &BAR{mem: mem}, nil
}

// Size returns the BAR's size in bytes.
func (b *BAR) Size() uint64 { return uint64(len(b.mem)) }

// Close unmaps the BAR.
func (b *BAR) Close() error { return unix.Munmap(b.mem) }

func (b *BAR) reg(off uint64) (*uint32, error) {
	if off%4 != 0 || off+4 > uint64(len(b.mem)) {
		return nil, fmt.Errorf("guest: register offset %#x outside the %#x-byte BAR or unaligned", off, len(b.mem))
	}
	return (*uint32)(unsafe.Pointer(&b.mem[off])), nil
}

// Read32 loads the register at off. The atomic load is one plain MOV on
// x86 that the compiler may neither drop nor merge: each call is one MMIO
// read on the bus.
func (b *BAR) Read32(off uint64) (uint32, error) {
	p, err := b.reg(off)
	if err != nil {
		return 0, err
	}
	return atomic.LoadUint32(p), nil
}

// Write32 stores v to the register at off with a plain store (an atomic
// store would be a locked XCHG, which MMIO does not need).
func (b *BAR) Write32(off uint64, v uint32) error {
	p, err := b.reg(off)
	if err != nil {
		return err
	}
	*p = v
	return nil
}
