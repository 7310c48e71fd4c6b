package gpu

import (
	"encoding/binary"
	"fmt"

	"github.com/dxpu/dxpu/tlp"
)

// FaultReason says what stopped a channel.
type FaultReason uint8

// Channel faults. A channel runs its commands in ring order up to the
// fault, then stops: nothing after it runs, however many doorbells follow.
const (
	FaultNone FaultReason = iota
	// FaultRingFetch: the read of GPFIFO entries failed.
	FaultRingFetch
	// FaultSegmentFetch: the read of a pushbuffer segment failed.
	FaultSegmentFetch
	// FaultSegmentSize: a GPFIFO entry asks for more than MaxSegmentBytes.
	FaultSegmentSize
	// FaultDecode: a pushbuffer command is malformed.
	FaultDecode
	// FaultCopyRead: a DMA read of a host-to-device copy failed (its
	// destination is then partly unwritten).
	FaultCopyRead
	// FaultCommandRange: a copy or memset longer than the GPU's memory.
	FaultCommandRange
)

// ChannelFault is why a channel stopped: what failed, where (a host bus
// address, or a VRAM offset with VRAM), and for a failed read the
// completion status that failed it (SC for a completion without data).
type ChannelFault struct {
	Reason FaultReason
	Status tlp.Status
	VRAM   bool
	Addr   uint64
}

// NotifierBytes is the size of a channel's error notifier: the record the
// GPU posts to the host address in ChNotifyLo/Hi when the channel stops.
// Little-endian: u32 the fault word (ChFault's value: reason in bits 7:0,
// completion status in bits 15:8, bit 16 set when the address is a VRAM
// offset), u32 zero, u64 the address. The fault word is never 0.
const NotifierBytes = 16

// Word returns the fault word of ChFault and of the notifier.
func (f ChannelFault) Word() uint32 {
	w := uint32(f.Reason) | uint32(f.Status)<<8
	if f.VRAM {
		w |= 1 << 16
	}
	return w
}

// FaultFromWord rebuilds a fault from its word and address.
func FaultFromWord(w uint32, addr uint64) ChannelFault {
	return ChannelFault{Reason: FaultReason(w), Status: tlp.Status(w >> 8), VRAM: w&(1<<16) != 0, Addr: addr}
}

// AppendNotifier encodes f as the notifier record.
func AppendNotifier(dst []byte, f ChannelFault) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, f.Word())
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	return binary.LittleEndian.AppendUint64(dst, f.Addr)
}

// DecodeNotifier decodes a notifier record (NotifierBytes long); Reason is
// FaultNone while the channel runs.
func DecodeNotifier(b []byte) ChannelFault {
	if len(b) < NotifierBytes {
		return ChannelFault{}
	}
	return FaultFromWord(binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint64(b[8:]))
}

func (f ChannelFault) String() string {
	at := fmt.Sprintf("%#x", f.Addr)
	if f.VRAM {
		at = fmt.Sprintf("VRAM offset %#x", f.Addr)
	}
	switch f.Reason {
	case FaultNone:
		return "no fault"
	case FaultRingFetch:
		return fmt.Sprintf("GPFIFO fetch at %s: %s", at, statusText(f.Status))
	case FaultSegmentFetch:
		return fmt.Sprintf("pushbuffer fetch at %s: %s", at, statusText(f.Status))
	case FaultSegmentSize:
		return fmt.Sprintf("GPFIFO entry for a pushbuffer segment at %s longer than %d bytes", at, MaxSegmentBytes)
	case FaultDecode:
		return fmt.Sprintf("malformed pushbuffer command at %s", at)
	case FaultCopyRead:
		return fmt.Sprintf("copy's DMA read at %s: %s", at, statusText(f.Status))
	case FaultCommandRange:
		return fmt.Sprintf("copy or memset at %s longer than the GPU's memory", at)
	}
	return fmt.Sprintf("fault %d at %s", uint8(f.Reason), at)
}

func statusText(s tlp.Status) string {
	switch s {
	case tlp.StatusSC:
		return "completion without data"
	case tlp.StatusUR:
		return "unsupported request"
	case tlp.StatusCA:
		return "completer abort"
	case tlp.StatusCRS:
		return "configuration retry status"
	}
	return fmt.Sprintf("completion status %d", uint8(s))
}
