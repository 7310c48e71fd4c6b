package pcie

import "encoding/binary"

// ConfigSpace is a 4 KiB PCIe configuration space with a write mask and a
// write-one-to-clear mask per byte, which is all a BAR, a command register
// or a status register needs: writing all ones to a BAR reads back its size
// mask because the BAR's low bits are not writable.
type ConfigSpace struct {
	Data  [4096]byte
	WMask [4096]byte
	W1C   [4096]byte
	// OnWrite, when set, runs after a write with the DW offset written.
	OnWrite func(off uint16)
}

// Standard header offsets.
const (
	CfgVendorID      = 0x00
	CfgDeviceID      = 0x02
	CfgCommand       = 0x04
	CfgStatus        = 0x06
	CfgRevision      = 0x08
	CfgClassCode     = 0x09
	CfgHeaderType    = 0x0e
	CfgBAR0          = 0x10
	CfgPrimaryBus    = 0x18 // type 1
	CfgSecondaryBus  = 0x19
	CfgSubordinate   = 0x1a
	CfgMemBase       = 0x20 // type 1
	CfgMemLimit      = 0x22
	CfgPrefBase      = 0x24
	CfgPrefLimit     = 0x26
	CfgPrefBaseUpper = 0x28
	CfgPrefLimUpper  = 0x2c
	CfgSubsystem     = 0x2c // type 0
	CfgCapPtr        = 0x34
	CfgIntLine       = 0x3c
	CfgIntPin        = 0x3d
	CfgBridgeControl = 0x3e

	CmdMemory    = 1 << 1
	CmdBusMaster = 1 << 2

	CapPM     = 0x01
	CapMSI    = 0x05
	CapPCIe   = 0x10
	ExtCapAER = 0x0001
)

// Read32 returns the DW at off (DW aligned).
func (c *ConfigSpace) Read32(off uint16) uint32 {
	off &= 0xffc
	return binary.LittleEndian.Uint32(c.Data[off:])
}

// Write applies a config write of one DW with byte enables be.
func (c *ConfigSpace) Write(off uint16, be uint8, data [4]byte) {
	off &= 0xffc
	for i := uint16(0); i < 4; i++ {
		if be&(1<<i) == 0 {
			continue
		}
		o := off + i
		d := data[i]
		c.Data[o] &^= d & c.W1C[o]
		c.Data[o] = c.Data[o]&^c.WMask[o] | d&c.WMask[o]
	}
	if c.OnWrite != nil {
		c.OnWrite(off)
	}
}

// Set8, Set16, Set32 and Set64 initialize fields (ignoring masks).
func (c *ConfigSpace) Set8(off uint16, v uint8)   { c.Data[off] = v }
func (c *ConfigSpace) Set16(off uint16, v uint16) { binary.LittleEndian.PutUint16(c.Data[off:], v) }
func (c *ConfigSpace) Set32(off uint16, v uint32) { binary.LittleEndian.PutUint32(c.Data[off:], v) }

// Get8, Get16 read fields.
func (c *ConfigSpace) Get8(off uint16) uint8   { return c.Data[off] }
func (c *ConfigSpace) Get16(off uint16) uint16 { return binary.LittleEndian.Uint16(c.Data[off:]) }
func (c *ConfigSpace) Get32(off uint16) uint32 { return binary.LittleEndian.Uint32(c.Data[off:]) }

// Writable marks n bytes at off writable with mask m per byte.
func (c *ConfigSpace) Writable(off uint16, m byte, n int) {
	for i := 0; i < n; i++ {
		c.WMask[int(off)+i] = m
	}
}

// Writable16 and Writable32 set the write mask of a field.
func (c *ConfigSpace) Writable16(off uint16, m uint16) {
	binary.LittleEndian.PutUint16(c.WMask[off:], m)
}
func (c *ConfigSpace) Writable32(off uint16, m uint32) {
	binary.LittleEndian.PutUint32(c.WMask[off:], m)
}

// BAR describes one base address register.
type BAR struct {
	Index    int    // 0..5
	Size     uint64 // power of two
	Is64     bool
	Prefetch bool
}

// DefineBAR installs a memory BAR: its type bits and the write mask that
// makes sizing work.
func (c *ConfigSpace) DefineBAR(b BAR) {
	off := uint16(CfgBAR0 + 4*b.Index)
	var low uint32
	if b.Is64 {
		low |= 0x4
	}
	if b.Prefetch {
		low |= 0x8
	}
	c.Set32(off, low)
	mask := ^(b.Size - 1)
	c.Writable32(off, uint32(mask)&^0xf)
	if b.Is64 {
		c.Set32(off+4, 0)
		c.Writable32(off+4, uint32(mask>>32))
	}
}

// BARAddress returns the address programmed into BAR i (a 64-bit BAR reads
// its upper half from the next register).
func (c *ConfigSpace) BARAddress(i int) uint64 {
	off := uint16(CfgBAR0 + 4*i)
	lo := c.Get32(off)
	a := uint64(lo &^ 0xf)
	if lo&0x6 == 0x4 {
		a |= uint64(c.Get32(off+4)) << 32
	}
	return a
}

// AddCap appends a capability at off with the given ID and links it from
// prev (CfgCapPtr for the first one).
func (c *ConfigSpace) AddCap(prev, off uint16, id uint8) {
	if prev == CfgCapPtr {
		c.Set8(CfgCapPtr, uint8(off))
		c.Set16(CfgStatus, c.Get16(CfgStatus)|1<<4)
	} else {
		c.Set8(prev+1, uint8(off))
	}
	c.Set8(off, id)
	c.Set8(off+1, 0)
}

// FindCap returns the offset of capability id, or 0.
func (c *ConfigSpace) FindCap(id uint8) uint16 {
	if c.Get16(CfgStatus)&(1<<4) == 0 {
		return 0
	}
	off := uint16(c.Get8(CfgCapPtr)) &^ 3
	for n := 0; off != 0 && n < 48; n++ {
		if c.Get8(off) == id {
			return off
		}
		off = uint16(c.Get8(off+1)) &^ 3
	}
	return 0
}

// Bytes returns a copy of the whole space.
func (c *ConfigSpace) Bytes() []byte { return append([]byte(nil), c.Data[:]...) }
