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

// BARWriter is a Host that can also post writes of any length to device
// memory behind a BAR (write-combined CPU stores). A channel whose commands
// live in device memory needs it.
type BARWriter interface {
	MMIOWrite(addr uint64, p []byte) error
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
	// Commands places the ring and the pushbuffer (default HostMemory).
	Commands Placement
	// Notifier programs the channel's error notifier: a channel that
	// stops on a fault then posts its record (gpu.NotifierBytes) to
	// Notifier(), next to the tracking semaphore in host memory.
	Notifier bool
	// BAR1 is the bus address of the GPU's VRAM aperture and VRAM the
	// offset in VRAM of DeviceBytes() bytes reserved for this channel's
	// ring and pushbuffer: used with Commands DeviceMemory only.
	BAR1, VRAM uint64
}

func (cfg *ChannelConfig) defaults() {
	if cfg.Entries == 0 {
		cfg.Entries = 256
	}
	if cfg.PushbufferBytes == 0 {
		cfg.PushbufferBytes = 64 << 10
	}
}

// DeviceBytes is how much VRAM a channel with commands in device memory
// needs at cfg.VRAM: the ring, rounded up to 4 KiB, then the pushbuffer.
func (cfg ChannelConfig) DeviceBytes() uint64 {
	cfg.defaults()
	return ringBytes(cfg.Entries) + cfg.PushbufferBytes
}

func ringBytes(entries int) uint64 {
	return (uint64(entries)*gpu.GPEntrySize + 4095) &^ 4095
}

// NotifierOffset is where a channel's error notifier lies from its
// tracking semaphore: in the same 64-byte block of host memory, so a
// channel allocates nothing more for it.
const NotifierOffset = 32

// Channel is one GPFIFO channel of a GPU.
type Channel struct {
	h       Host
	bw      BARWriter // set when the commands are in device memory
	bar0    uint64
	ch      int
	entries uint32
	pbBytes uint64
	flags   uint32
	gpBase  uint64 // ring: a host bus address, or a VRAM offset with bw
	pbBase  uint64 // pushbuffer, likewise
	bar1    uint64
	sem     uint64
	notify  uint64 // error notifier; 0 without one
	put     uint32
	pbOff   uint64
	seq     uint64
	buf     []byte
	// entry holds the GPFIFO entry being written: a field, not a local,
	// because the host interface's methods keep their argument from
	// staying on the stack (a local would be allocated per submission).
	entry [gpu.GPEntrySize]byte
}

// OpenChannel sets up channel ch of the GPU whose BAR0 is at bar0: it
// places the ring and the pushbuffer as cfg.Commands says, allocates the
// semaphore in host memory and programs the channel's registers.
func OpenChannel(h Host, bar0 uint64, ch int, cfg ChannelConfig) (*Channel, error) {
	cfg.defaults()
	if ch < 0 || ch >= gpu.MaxChannels || cfg.Entries < 2 || cfg.Entries > gpu.MaxGPEntries || cfg.PushbufferBytes < 4096 {
		return nil, fmt.Errorf("%w: channel %d, %d entries, %d-byte pushbuffer", ErrConfig, ch, cfg.Entries, cfg.PushbufferBytes)
	}
	c := &Channel{h: h, bar0: bar0, ch: ch, entries: uint32(cfg.Entries), pbBytes: cfg.PushbufferBytes, flags: gpu.SemHost | cfg.SemFlags}
	var err error
	switch cfg.Commands {
	case HostMemory:
		if c.gpBase, err = h.Alloc(uint64(c.entries)*gpu.GPEntrySize, 4096); err != nil {
			return nil, fmt.Errorf("gpudrv: channel %d ring: %w", ch, err)
		}
		if c.pbBase, err = h.Alloc(c.pbBytes, 4096); err != nil {
			return nil, fmt.Errorf("gpudrv: channel %d pushbuffer: %w", ch, err)
		}
	case DeviceMemory:
		bw, ok := h.(BARWriter)
		if !ok {
			return nil, fmt.Errorf("%w: channel %d: commands in device memory need a host that writes through BAR1 (%T does not)", ErrConfig, ch, h)
		}
		if cfg.BAR1 == 0 || cfg.VRAM%4096 != 0 {
			return nil, fmt.Errorf("%w: channel %d: commands in device memory at BAR1 %#x, VRAM offset %#x (want a BAR1 address and a 4 KiB-aligned offset)",
				ErrConfig, ch, cfg.BAR1, cfg.VRAM)
		}
		c.bw, c.bar1 = bw, cfg.BAR1
		c.gpBase, c.pbBase = cfg.VRAM, cfg.VRAM+ringBytes(cfg.Entries)
	default:
		return nil, fmt.Errorf("%w: channel %d: placement %d", ErrConfig, ch, cfg.Commands)
	}
	if c.sem, err = h.Alloc(64, 64); err != nil {
		return nil, fmt.Errorf("gpudrv: channel %d semaphore: %w", ch, err)
	}
	type reg struct {
		off uint64
		v   uint32
	}
	regs := []reg{{gpu.ChGPBaseLo, uint32(c.gpBase)}, {gpu.ChGPBaseHi, uint32(c.gpBase >> 32)}, {gpu.ChGPEntries, c.entries}}
	if c.bw != nil {
		// After GP_BASE_LO, which resets the aperture to host memory.
		regs = append(regs, reg{gpu.ChGPAperture, gpu.ApertureVRAM})
	}
	for _, w := range regs {
		if err := h.MMIOWrite32(bar0+gpu.ChannelReg(ch, w.off), w.v); err != nil {
			return nil, fmt.Errorf("gpudrv: channel %d setup: %w", ch, err)
		}
	}
	if cfg.Notifier {
		c.notify = c.sem + NotifierOffset
		if err := c.writeNotifier(); err != nil {
			return nil, fmt.Errorf("gpudrv: channel %d setup: %w", ch, err)
		}
	}
	return c, nil
}

// writeNotifier programs NOTIFY_LO and NOTIFY_HI: one 64-bit store where
// the host can post one, else two 32-bit stores.
func (c *Channel) writeNotifier() error {
	reg := c.bar0 + gpu.ChannelReg(c.ch, gpu.ChNotifyLo)
	if bw, ok := c.h.(BARWriter); ok {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], c.notify)
		return bw.MMIOWrite(reg, b[:])
	}
	if err := c.h.MMIOWrite32(reg, uint32(c.notify)); err != nil {
		return err
	}
	return c.h.MMIOWrite32(c.bar0+gpu.ChannelReg(c.ch, gpu.ChNotifyHi), uint32(c.notify>>32))
}

// Notifier returns the host address of the channel's error notifier (0
// when ChannelConfig.Notifier was not set).
func (c *Channel) Notifier() uint64 { return c.notify }

// Fault reads the error notifier: FaultNone while the channel runs (or
// when it has no notifier).
func (c *Channel) Fault() (gpu.ChannelFault, error) {
	if c.notify == 0 {
		return gpu.ChannelFault{}, nil
	}
	var b [gpu.NotifierBytes]byte
	if err := c.h.ReadMem(c.notify, b[:]); err != nil {
		return gpu.ChannelFault{}, err
	}
	return gpu.DecodeNotifier(b[:]), nil
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
	if uint64(len(b)) > c.pbBytes || len(b) > gpu.MaxSegmentBytes {
		return 0, fmt.Errorf("%w: a %d-byte submission exceeds the %d-byte pushbuffer or the GPU's %d-byte segment limit",
			ErrConfig, len(b), c.pbBytes, gpu.MaxSegmentBytes)
	}
	if c.pbOff+uint64(len(b)) > c.pbBytes {
		c.pbOff = 0
	}
	addr := c.pbBase + c.pbOff
	c.pbOff += uint64(len(b)+63) &^ 63
	e := &c.entry
	slot := c.gpBase + uint64(c.put)*gpu.GPEntrySize
	if c.bw != nil {
		// Posted writes through BAR1, ordered before the doorbell.
		if err := c.bw.MMIOWrite(c.bar1+addr, b); err != nil {
			return 0, fmt.Errorf("gpudrv: channel %d pushbuffer write: %w", c.ch, err)
		}
		gpu.AppendGPEntryFlags(e[:0], addr, uint32(len(b)), gpu.GPEntryVRAM)
		if err := c.bw.MMIOWrite(c.bar1+slot, e[:]); err != nil {
			return 0, fmt.Errorf("gpudrv: channel %d ring write: %w", c.ch, err)
		}
	} else {
		if err := c.h.WriteMem(addr, b); err != nil {
			return 0, err
		}
		gpu.AppendGPEntry(e[:0], addr, uint32(len(b)))
		if err := c.h.WriteMem(slot, e[:]); err != nil {
			return 0, err
		}
	}
	c.seq++
	c.put = (c.put + 1) % c.entries
	if err := c.h.MMIOWrite32(c.bar0+gpu.ChannelReg(c.ch, gpu.ChGPPut), c.put); err != nil {
		return c.seq, err
	}
	return c.seq, nil
}
