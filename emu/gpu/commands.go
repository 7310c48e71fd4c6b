package gpu

import (
	"encoding/binary"
	"fmt"
)

// Opcode is the first byte of a pushbuffer command header.
type Opcode uint8

// Pushbuffer opcodes.
const (
	OpNop        Opcode = 0x00
	OpKernel     Opcode = 0x01
	OpCopy       Opcode = 0x02
	OpMemset     Opcode = 0x03
	OpSemRelease Opcode = 0x04
	OpSemAcquire Opcode = 0x05
	// OpWait idles the channel for Duration ns: no engine, no overhead. A
	// replay uses it for gaps the trace shows on the GPU side.
	OpWait Opcode = 0x06
)

// Copy directions.
const (
	DirH2D uint32 = 1
	DirD2H uint32 = 2
	DirD2D uint32 = 3
)

// Semaphore flags.
const (
	SemHost uint32 = 1 << 0 // the semaphore lives in host memory (else VRAM)
	SemMSI  uint32 = 1 << 1 // raise MSI after the release is posted
	// SemTime writes the GPU's clock (ns, 8 bytes) after the value, as an
	// event record does.
	SemTime uint32 = 1 << 2
)

// Command is one decoded pushbuffer command.
type Command struct {
	Op Opcode
	// Kernel: Duration in ns. Memset: Duration in ns (0: at VRAM speed).
	// Copy: Duration is the least time the copy takes, in ns (what the host
	// side allows: a pageable copy's staging); the DMA may take longer.
	Duration uint64
	Src, Dst uint64 // copy; memset uses Dst
	Len      uint64 // copy, memset
	Dir      uint32 // copy
	Value    uint64 // memset byte, semaphore value
	Addr     uint64 // semaphore
	Flags    uint32 // semaphore
	// Marker tags kernels, copies and memsets for the tracer (a profiler's
	// correlation ID); 0 when unused.
	Marker uint32
}

// argWords is the number of 32-bit argument words each opcode carries.
var argWords = map[Opcode]int{OpNop: 0, OpKernel: 3, OpCopy: 10, OpMemset: 8, OpSemRelease: 5, OpSemAcquire: 5, OpWait: 2}

// AppendCommand encodes c at the end of dst.
func AppendCommand(dst []byte, c Command) []byte {
	n := argWords[c.Op]
	dst = binary.LittleEndian.AppendUint32(dst, uint32(c.Op)<<24|uint32(n))
	le64 := func(v uint64) { dst = binary.LittleEndian.AppendUint64(dst, v) }
	le32 := func(v uint32) { dst = binary.LittleEndian.AppendUint32(dst, v) }
	switch c.Op {
	case OpKernel:
		le64(c.Duration)
		le32(c.Marker)
	case OpWait:
		le64(c.Duration)
	case OpCopy:
		le64(c.Src)
		le64(c.Dst)
		le64(c.Len)
		le32(c.Dir)
		le64(c.Duration)
		le32(c.Marker)
	case OpMemset:
		le64(c.Dst)
		le64(c.Len)
		le32(uint32(c.Value))
		le64(c.Duration)
		le32(c.Marker)
	case OpSemRelease, OpSemAcquire:
		le64(c.Addr)
		le64(c.Value)
		le32(c.Flags)
	}
	return dst
}

// DecodeCommands decodes a pushbuffer segment. It returns the commands
// decoded so far and an error naming the offset of the first bad header.
func DecodeCommands(b []byte, out []Command) ([]Command, error) {
	off := 0
	for off < len(b) {
		if len(b)-off < 4 {
			return out, fmt.Errorf("gpu: pushbuffer offset %d: %d trailing bytes, want a 4-byte header", off, len(b)-off)
		}
		h := binary.LittleEndian.Uint32(b[off:])
		op := Opcode(h >> 24)
		n := int(h & 0xffff)
		want, ok := argWords[op]
		if !ok {
			return out, fmt.Errorf("gpu: pushbuffer offset %d: unknown opcode 0x%02x", off, uint8(op))
		}
		if n != want {
			return out, fmt.Errorf("gpu: pushbuffer offset %d: opcode 0x%02x with %d argument words, want %d", off, uint8(op), n, want)
		}
		if len(b)-off-4 < 4*n {
			return out, fmt.Errorf("gpu: pushbuffer offset %d: opcode 0x%02x truncated: %d argument bytes of %d", off, uint8(op), len(b)-off-4, 4*n)
		}
		a := b[off+4 : off+4+4*n]
		u64 := func(i int) uint64 { return binary.LittleEndian.Uint64(a[i:]) }
		u32 := func(i int) uint32 { return binary.LittleEndian.Uint32(a[i:]) }
		c := Command{Op: op}
		switch op {
		case OpKernel:
			c.Duration, c.Marker = u64(0), u32(8)
		case OpWait:
			c.Duration = u64(0)
		case OpCopy:
			c.Src, c.Dst, c.Len, c.Dir, c.Duration, c.Marker = u64(0), u64(8), u64(16), u32(24), u64(28), u32(36)
			if c.Dir < DirH2D || c.Dir > DirD2D {
				return out, fmt.Errorf("gpu: pushbuffer offset %d: copy direction %d, want 1..3", off, c.Dir)
			}
		case OpMemset:
			c.Dst, c.Len, c.Value, c.Duration, c.Marker = u64(0), u64(8), uint64(u32(16)&0xff), u64(20), u32(28)
		case OpSemRelease, OpSemAcquire:
			c.Addr, c.Value, c.Flags = u64(0), u64(8), u32(16)
		}
		out = append(out, c)
		off += 4 + 4*n
	}
	return out, nil
}

// GPFIFO entries are 16 bytes, little-endian: the pushbuffer segment's
// address (8 bytes), its length in bytes (4), and 4 bytes of flags
// (GPEntryVRAM; the other bits are reserved, 0).
const GPEntrySize = 16

// GPEntryVRAM in a GPFIFO entry's flags says the segment's address is an
// offset in the GPU's memory, fetched locally, not a host bus address.
const GPEntryVRAM uint32 = 1 << 0

// MaxSegmentBytes bounds one pushbuffer segment: a GPFIFO entry asking for
// more is a corrupt ring, refused rather than fetched.
const MaxSegmentBytes = 8 << 20

// AppendGPEntry encodes one GPFIFO entry for a segment in host memory.
func AppendGPEntry(dst []byte, addr uint64, n uint32) []byte {
	return AppendGPEntryFlags(dst, addr, n, 0)
}

// AppendGPEntryFlags encodes one GPFIFO entry with the given flags.
func AppendGPEntryFlags(dst []byte, addr uint64, n, flags uint32) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, addr)
	dst = binary.LittleEndian.AppendUint32(dst, n)
	return binary.LittleEndian.AppendUint32(dst, flags)
}
