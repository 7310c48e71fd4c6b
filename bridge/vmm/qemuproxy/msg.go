package qemuproxy

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Cmd is a message's command, the header's first field.
type Cmd int32

// The commands of QEMU's mpqemu link.
const (
	SyncSysmem  Cmd = 0
	Ret         Cmd = 1
	CfgWrite    Cmd = 2
	CfgRead     Cmd = 3
	BarWrite    Cmd = 4
	BarRead     Cmd = 5
	SetIRQFD    Cmd = 6
	DeviceReset Cmd = 7
)

var cmdNames = [...]string{"SYNC_SYSMEM", "RET", "PCI_CFGWRITE", "PCI_CFGREAD", "BAR_WRITE", "BAR_READ", "SET_IRQFD", "DEVICE_RESET"}

func (c Cmd) String() string {
	if c >= 0 && int(c) < len(cmdNames) {
		return cmdNames[c]
	}
	return fmt.Sprintf("cmd(%d)", int32(c))
}

// Sizes of the wire structures.
const (
	HeaderLen  = 16
	cfgLen     = 12
	barLen     = 24
	sysmemLen  = 192
	retLen     = 8
	MaxRegions = 8 // REMOTE_MAX_FDS
	// MaxFDs is the most descriptors one message may carry.
	MaxFDs = MaxRegions
	// ConfigSpaceLen is the extended config space a PCI_CFGREAD may address.
	ConfigSpaceLen = 4096
)

// Errors callers match; each is wrapped in a *MsgError naming the field.
var (
	ErrCommand = errors.New("unknown command")
	ErrSize    = errors.New("payload size does not fit the command")
	ErrField   = errors.New("field out of range")
	ErrFDs     = errors.New("wrong number of file descriptors")
)

// MsgError is a malformed message: which command, which field at which
// payload offset, and the rule it breaks.
type MsgError struct {
	Cmd    Cmd
	Field  string
	Offset int // byte offset of the field in the header (Cmd, size) or payload
	Value  uint64
	Err    error
}

func (e *MsgError) Error() string {
	return fmt.Sprintf("qemuproxy: %v: %s at offset %d = %d: %v", e.Cmd, e.Field, e.Offset, e.Value, e.Err)
}

func (e *MsgError) Unwrap() error { return e.Err }

// CfgAccess is a PCI_CFGREAD or PCI_CFGWRITE: Len bytes at config offset
// Addr; Val is the value written (little-endian in its low Len bytes).
type CfgAccess struct {
	Addr uint32
	Val  uint32
	Len  int32
}

// BarAccess is a BAR_READ or BAR_WRITE: Size bytes at guest-physical
// address Addr (the BAR's base plus the offset); Memory is false for I/O
// port space.
type BarAccess struct {
	Addr   uint64
	Val    uint64
	Size   uint32
	Memory bool
}

// Region is one slice of guest RAM: guest-physical GPA..GPA+Size, found at
// Offset in the region's memfd.
type Region struct {
	GPA    uint64
	Size   uint64
	Offset int64
}

// Msg is one decoded message. FDs are the descriptors that came with it;
// the receiver owns them and must close every one it does not keep.
type Msg struct {
	Cmd     Cmd
	Cfg     CfgAccess // PCI_CFGREAD, PCI_CFGWRITE
	Bar     BarAccess // BAR_READ, BAR_WRITE
	Regions []Region  // SYNC_SYSMEM, one per FD
	Value   uint64    // RET
	FDs     []int
}

// payloadLen returns the payload size a command must carry.
func payloadLen(c Cmd) (int, bool) {
	switch c {
	case SyncSysmem:
		return sysmemLen, true
	case Ret:
		return retLen, true
	case CfgWrite, CfgRead:
		return cfgLen, true
	case BarWrite, BarRead:
		return barLen, true
	case SetIRQFD, DeviceReset:
		return 0, true
	}
	return 0, false
}

// ParseHeader reads a message header: the command and the payload size
// that follows. A size that does not match the command is refused here,
// before anything is read or allocated for the payload.
func ParseHeader(h []byte) (Cmd, int, error) {
	if len(h) < HeaderLen {
		return 0, 0, &MsgError{Field: "header", Offset: len(h), Value: uint64(len(h)), Err: ErrSize}
	}
	c := Cmd(int32(binary.LittleEndian.Uint32(h[0:])))
	want, ok := payloadLen(c)
	if !ok {
		return c, 0, &MsgError{Cmd: c, Field: "cmd", Offset: 0, Value: uint64(uint32(c)), Err: ErrCommand}
	}
	size := binary.LittleEndian.Uint64(h[8:])
	if size != uint64(want) {
		return c, 0, &MsgError{Cmd: c, Field: "size", Offset: 8, Value: size, Err: ErrSize}
	}
	return c, want, nil
}

// ParsePayload decodes the payload p of command c that came with nfds
// descriptors, checking every field. The returned Msg's FDs are nil: the
// caller attaches the descriptors it received.
func ParsePayload(c Cmd, p []byte, nfds int) (Msg, error) {
	m := Msg{Cmd: c}
	want, ok := payloadLen(c)
	if !ok {
		return m, &MsgError{Cmd: c, Field: "cmd", Value: uint64(uint32(c)), Err: ErrCommand}
	}
	if len(p) != want {
		return m, &MsgError{Cmd: c, Field: "size", Offset: 8, Value: uint64(len(p)), Err: ErrSize}
	}
	wantFDs := 0
	switch c {
	case SetIRQFD:
		wantFDs = 2
	case SyncSysmem:
		wantFDs = -1 // checked below against the regions
	}
	if wantFDs >= 0 && nfds != wantFDs {
		return m, &MsgError{Cmd: c, Field: "fds", Value: uint64(nfds), Err: ErrFDs}
	}
	le := binary.LittleEndian
	switch c {
	case Ret:
		m.Value = le.Uint64(p)
	case CfgRead, CfgWrite:
		m.Cfg = CfgAccess{Addr: le.Uint32(p[0:]), Val: le.Uint32(p[4:]), Len: int32(le.Uint32(p[8:]))}
		if l := m.Cfg.Len; l != 1 && l != 2 && l != 4 {
			return m, &MsgError{Cmd: c, Field: "len", Offset: 8, Value: uint64(uint32(l)), Err: ErrField}
		}
		if uint64(m.Cfg.Addr)+uint64(m.Cfg.Len) > ConfigSpaceLen || m.Cfg.Addr%uint32(m.Cfg.Len) != 0 {
			return m, &MsgError{Cmd: c, Field: "addr", Offset: 0, Value: uint64(m.Cfg.Addr), Err: ErrField}
		}
	case BarRead, BarWrite:
		m.Bar = BarAccess{Addr: le.Uint64(p[0:]), Val: le.Uint64(p[8:]), Size: le.Uint32(p[16:]), Memory: p[20] != 0}
		if s := m.Bar.Size; s != 1 && s != 2 && s != 4 && s != 8 {
			return m, &MsgError{Cmd: c, Field: "size", Offset: 16, Value: uint64(s), Err: ErrField}
		}
		if p[20] > 1 {
			return m, &MsgError{Cmd: c, Field: "memory", Offset: 20, Value: uint64(p[20]), Err: ErrField}
		}
		if m.Bar.Addr+uint64(m.Bar.Size) < m.Bar.Addr {
			return m, &MsgError{Cmd: c, Field: "addr", Offset: 0, Value: m.Bar.Addr, Err: ErrField}
		}
	case SyncSysmem:
		if nfds < 1 || nfds > MaxRegions {
			return m, &MsgError{Cmd: c, Field: "fds", Value: uint64(nfds), Err: ErrFDs}
		}
		m.Regions = make([]Region, nfds)
		for i := range nfds {
			r := Region{GPA: le.Uint64(p[8*i:]), Size: le.Uint64(p[64+8*i:]), Offset: int64(le.Uint64(p[128+8*i:]))}
			if r.Size == 0 || r.GPA+r.Size < r.GPA {
				return m, &MsgError{Cmd: c, Field: fmt.Sprintf("sizes[%d]", i), Offset: 64 + 8*i, Value: r.Size, Err: ErrField}
			}
			if r.Offset < 0 {
				return m, &MsgError{Cmd: c, Field: fmt.Sprintf("offsets[%d]", i), Offset: 128 + 8*i, Value: uint64(r.Offset), Err: ErrField}
			}
			for j, o := range m.Regions[:i] {
				if r.GPA < o.GPA+o.Size && o.GPA < r.GPA+r.Size {
					return m, &MsgError{Cmd: c, Field: fmt.Sprintf("gpas[%d] overlaps gpas[%d]", i, j), Offset: 8 * i, Value: r.GPA, Err: ErrField}
				}
			}
			m.Regions[i] = r
		}
	}
	return m, nil
}

// AppendMsg appends m's header and payload (not its descriptors) to dst:
// the VMM's side, for tests and tools that play QEMU.
func AppendMsg(dst []byte, m Msg) []byte {
	n, _ := payloadLen(m.Cmd)
	le := binary.LittleEndian
	dst = le.AppendUint32(dst, uint32(m.Cmd))
	dst = le.AppendUint32(dst, 0)
	dst = le.AppendUint64(dst, uint64(n))
	switch m.Cmd {
	case Ret:
		dst = le.AppendUint64(dst, m.Value)
	case CfgRead, CfgWrite:
		dst = le.AppendUint32(dst, m.Cfg.Addr)
		dst = le.AppendUint32(dst, m.Cfg.Val)
		dst = le.AppendUint32(dst, uint32(m.Cfg.Len))
	case BarRead, BarWrite:
		dst = le.AppendUint64(dst, m.Bar.Addr)
		dst = le.AppendUint64(dst, m.Bar.Val)
		dst = le.AppendUint32(dst, m.Bar.Size)
		mem := byte(0)
		if m.Bar.Memory {
			mem = 1
		}
		dst = append(dst, mem, 0, 0, 0)
	case SyncSysmem:
		var p [sysmemLen]byte
		for i, r := range m.Regions {
			if i >= MaxRegions {
				break
			}
			le.PutUint64(p[8*i:], r.GPA)
			le.PutUint64(p[64+8*i:], r.Size)
			le.PutUint64(p[128+8*i:], uint64(r.Offset))
		}
		dst = append(dst, p[:]...)
	}
	return dst
}

// AppendRet appends a RET carrying v: the answer to a request.
func AppendRet(dst []byte, v uint64) []byte {
	return AppendMsg(dst, Msg{Cmd: Ret, Value: v})
}
