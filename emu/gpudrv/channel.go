package gpudrv

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dxpu/dxpu/emu/gpu"
)

// Host is what the driver needs from the CPU it runs on.
type Host interface {
	// Alloc returns the bus address of n bytes of zeroed, DMA-able host
	// memory, physically contiguous and aligned to align.
	Alloc(n, align uint64) (uint64, error)
	// WriteMem stores p at bus address addr (CPU stores: no PCIe traffic).
	WriteMem(addr uint64, p []byte) error
	// ReadMem loads len(p) bytes at bus address addr.
	ReadMem(addr uint64, p []byte) error
	// MMIOWrite32 is a posted 32-bit store to a device register.
	MMIOWrite32(addr uint64, v uint32) error
}

// Errors callers match.
var (
	ErrRingFull = errors.New("gpudrv: GPFIFO ring full")
	ErrConfig   = errors.New("gpudrv: bad channel configuration")
)

// ChannelConfig sizes a channel.
type ChannelConfig struct {
	// Entries is the GPFIFO ring's size (default 256).
	Entries int
	// PushbufferBytes is the pushbuffer's size (default 64 KiB).
	PushbufferBytes uint64
	// SemFlags are added to the tracking semaphore release's flags
	// (gpu.SemMSI to be woken by an interrupt).
	SemFlags uint32
}

// Channel is one GPFIFO channel of a GPU.
type Channel struct {
	h       Host
	bar0    uint64
	ch      int
	entries uint32
	pbBytes uint64
	flags   uint32
	gpBase  uint64
	pbBase  uint64
	sem     uint64
	put     uint32
	pbOff   uint64
	seq     uint64
	buf     []byte
}

// OpenChannel sets up channel ch of the GPU whose BAR0 is at bar0: it
// allocates the ring, the pushbuffer and the semaphore in host memory and
// programs the channel's registers.
func OpenChannel(h Host, bar0 uint64, ch int, cfg ChannelConfig) (*Channel, error) {
	if cfg.Entries == 0 {
		cfg.Entries = 256
	}
	if cfg.PushbufferBytes == 0 {
		cfg.PushbufferBytes = 64 << 10
	}
	if ch < 0 || ch >= gpu.MaxChannels || cfg.Entries < 2 || cfg.Entries > 1<<16 || cfg.PushbufferBytes < 4096 {
		return nil, fmt.Errorf("%w: channel %d, %d entries, %d-byte pushbuffer", ErrConfig, ch, cfg.Entries, cfg.PushbufferBytes)
	}
	c := &Channel{h: h, bar0: bar0, ch: ch, entries: uint32(cfg.Entries), pbBytes: cfg.PushbufferBytes, flags: gpu.SemHost | cfg.SemFlags}
	var err error
	if c.gpBase, err = h.Alloc(uint64(c.entries)*gpu.GPEntrySize, 4096); err != nil {
		return nil, fmt.Errorf("gpudrv: channel %d ring: %w", ch, err)
	}
	if c.pbBase, err = h.Alloc(c.pbBytes, 4096); err != nil {
		return nil, fmt.Errorf("gpudrv: channel %d pushbuffer: %w", ch, err)
	}
	if c.sem, err = h.Alloc(64, 64); err != nil {
		return nil, fmt.Errorf("gpudrv: channel %d semaphore: %w", ch, err)
	}
	for _, w := range []struct {
		reg uint64
		v   uint32
	}{{gpu.ChGPBaseLo, uint32(c.gpBase)}, {gpu.ChGPBaseHi, uint32(c.gpBase >> 32)}, {gpu.ChGPEntries, c.entries}} {
		if err := h.MMIOWrite32(bar0+gpu.ChannelReg(ch, w.reg), w.v); err != nil {
			return nil, fmt.Errorf("gpudrv: channel %d setup: %w", ch, err)
		}
	}
	return c, nil
}

// Index returns the channel's number.
func (c *Channel) Index() int { return c.ch }

// Semaphore returns the host address the GPU releases sequence numbers to.
func (c *Channel) Semaphore() uint64 { return c.sem }

// Submitted returns the last sequence number submitted.
func (c *Channel) Submitted() uint64 { return c.seq }

// Completed returns the last sequence number the GPU released.
func (c *Channel) Completed() (uint64, error) {
	var b [8]byte
	if err := c.h.ReadMem(c.sem, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// Submit writes cmds and the tracking semaphore release into the
// pushbuffer, appends a GPFIFO entry and rings the doorbell. It returns the
// sequence number the GPU releases when the work is done. completed is the
// last sequence number the caller saw released (it bounds the ring).
func (c *Channel) Submit(completed uint64, cmds ...gpu.Command) (uint64, error) {
	if c.seq-completed >= uint64(c.entries)-1 {
		return 0, ErrRingFull
	}
	b := c.buf[:0]
	for _, cmd := range cmds {
		b = gpu.AppendCommand(b, cmd)
	}
	b = gpu.AppendCommand(b, gpu.Command{Op: gpu.OpSemRelease, Addr: c.sem, Value: c.seq + 1, Flags: c.flags})
	c.buf = b
	if uint64(len(b)) > c.pbBytes {
		return 0, fmt.Errorf("%w: a %d-byte submission exceeds the %d-byte pushbuffer", ErrConfig, len(b), c.pbBytes)
	}
	if c.pbOff+uint64(len(b)) > c.pbBytes {
		c.pbOff = 0
	}
	addr := c.pbBase + c.pbOff
	c.pbOff += uint64(len(b)+63) &^ 63
	if err := c.h.WriteMem(addr, b); err != nil {
		return 0, err
	}
	var e [gpu.GPEntrySize]byte
	gpu.AppendGPEntry(e[:0], addr, uint32(len(b)))
	if err := c.h.WriteMem(c.gpBase+uint64(c.put)*gpu.GPEntrySize, e[:]); err != nil {
		return 0, err
	}
	c.seq++
	c.put = (c.put + 1) % c.entries
	if err := c.h.MMIOWrite32(c.bar0+gpu.ChannelReg(c.ch, gpu.ChGPPut), c.put); err != nil {
		return c.seq, err
	}
	return c.seq, nil
}
