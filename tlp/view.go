package tlp

import "encoding/binary"

// View is a zero-copy view of one TLP: header, payload and, when TD is set,
// the 1-DW ECRC digest. Accessors read the bytes in place and never
// allocate. A View returned by Parse has been validated; a View made by a
// plain conversion must be at least HeaderLen bytes long before header
// accessors are used.
type View []byte

// Header sizes in bytes.
const (
	Header3DW = 12
	Header4DW = 16
)

func (v View) dw(i int) uint32 { return binary.BigEndian.Uint32(v[4*i:]) }

// Fmt returns DW0 bits 31:29.
func (v View) Fmt() uint8 { return v[0] >> 5 }

// Type returns DW0 bits 28:24.
func (v View) Type() uint8 { return v[0] & 0x1f }

// Kind returns the TLP kind from Fmt and Type.
func (v View) Kind() Kind { return kindByByte0[v[0]] }

// Is4DW reports whether the header is four DWs long.
func (v View) Is4DW() bool { return v[0]&0x20 != 0 }

// HasData reports whether Fmt says a payload follows the header.
func (v View) HasData() bool { return v[0]&0x40 != 0 }

// HeaderLen returns 12 or 16.
func (v View) HeaderLen() int {
	if v.Is4DW() {
		return Header4DW
	}
	return Header3DW
}

// TC returns the traffic class (DW0 bits 22:20).
func (v View) TC() uint8 { return (v[1] >> 4) & 7 }

// Attr returns the attributes as one 3-bit number: bit 0 NS, bit 1 RO,
// bit 2 IDO.
func (v View) Attr() uint8 { return v[1]&0x04 | (v[2]>>4)&3 }

// Relaxed ordering, ID-based ordering and no-snoop attribute bits.
const (
	AttrNS  uint8 = 1
	AttrRO  uint8 = 2
	AttrIDO uint8 = 4
)

// LN returns the lightweight-notification bit.
func (v View) LN() bool { return v[1]&0x02 != 0 }

// TH returns the TLP-processing-hints bit.
func (v View) TH() bool { return v[1]&0x01 != 0 }

// TD returns the digest bit: a 1-DW ECRC follows the payload.
func (v View) TD() bool { return v[2]&0x80 != 0 }

// EP returns the poisoned bit.
func (v View) EP() bool { return v[2]&0x40 != 0 }

// AT returns the address type (DW0 bits 11:10).
func (v View) AT() uint8 { return (v[2] >> 2) & 3 }

// LengthField returns the raw 10-bit Length field.
func (v View) LengthField() uint16 { return uint16(v[2]&3)<<8 | uint16(v[3]) }

// Length returns the Length in DWs with 0 read as 1024.
func (v View) Length() int {
	n := int(v.LengthField())
	if n == 0 {
		return 1024
	}
	return n
}

// PayloadLen returns the payload size in bytes that Fmt and Length declare
// (0 for TLPs without data).
func (v View) PayloadLen() int {
	if !v.HasData() {
		return 0
	}
	return 4 * v.Length()
}

// WireLen returns header + payload + digest in bytes, as declared.
func (v View) WireLen() int {
	n := v.HeaderLen() + v.PayloadLen()
	if v.TD() {
		n += 4
	}
	return n
}

// Payload returns the payload bytes present in the view (possibly fewer
// than declared if the view is truncated).
func (v View) Payload() []byte {
	h := v.HeaderLen()
	if len(v) <= h {
		return nil
	}
	end := h + v.PayloadLen()
	if end > len(v) {
		end = len(v)
	}
	return v[h:end]
}

// ECRC returns the digest DW; only meaningful when TD is set.
func (v View) ECRC() uint32 {
	off := v.HeaderLen() + v.PayloadLen()
	if off+4 > len(v) {
		return 0
	}
	return binary.BigEndian.Uint32(v[off:])
}

// Tag returns the full 10-bit tag: T9 (DW0 bit 23), T8 (DW0 bit 19) and
// Tag[7:0] (DW1 bits 15:8 of requests, DW2 bits 15:8 of completions).
func (v View) Tag() uint16 {
	hi := uint16(v[1]>>7)<<9 | uint16((v[1]>>3)&1)<<8
	if v.Kind().IsCompletion() {
		return hi | uint16(v[10])
	}
	return hi | uint16(v[6])
}

// SetTag writes the 10-bit tag in place.
func (v View) SetTag(tag uint16) {
	v[1] = v[1]&^0x88 | byte(tag>>9&1)<<7 | byte(tag>>8&1)<<3
	if v.Kind().IsCompletion() {
		v[10] = byte(tag)
	} else {
		v[6] = byte(tag)
	}
}

// RequesterID returns the requester ID (DW1 31:16 of requests, DW2 31:16 of
// completions).
func (v View) RequesterID() ID {
	if v.Kind().IsCompletion() {
		return ID(binary.BigEndian.Uint16(v[8:]))
	}
	return ID(binary.BigEndian.Uint16(v[4:]))
}

// SetRequesterID writes the requester ID in place.
func (v View) SetRequesterID(id ID) {
	if v.Kind().IsCompletion() {
		binary.BigEndian.PutUint16(v[8:], uint16(id))
	} else {
		binary.BigEndian.PutUint16(v[4:], uint16(id))
	}
}

// FirstBE returns the First DW Byte Enables of a request.
func (v View) FirstBE() uint8 { return v[7] & 0xf }

// LastBE returns the Last DW Byte Enables of a request.
func (v View) LastBE() uint8 { return v[7] >> 4 }

// Address returns the address of a memory, IO or atomic request (PH bits
// cleared), or of a message routed by address.
func (v View) Address() uint64 {
	if v.Is4DW() {
		return uint64(v.dw(2))<<32 | uint64(v.dw(3)&^3)
	}
	return uint64(v.dw(2) &^ 3)
}

// SetAddress writes the address in place, keeping PH.
func (v View) SetAddress(addr uint64) {
	if v.Is4DW() {
		binary.BigEndian.PutUint32(v[8:], uint32(addr>>32))
		binary.BigEndian.PutUint32(v[12:], uint32(addr)&^3|v.dw(3)&3)
		return
	}
	binary.BigEndian.PutUint32(v[8:], uint32(addr)&^3|v.dw(2)&3)
}

// PH returns the processing hint (address DW bits 1:0) of a memory request.
func (v View) PH() uint8 {
	if v.Is4DW() {
		return uint8(v.dw(3) & 3)
	}
	return uint8(v.dw(2) & 3)
}

// TargetID returns the target of a config request, or the destination of
// an ID-routed message (DW2 31:16).
func (v View) TargetID() ID { return ID(binary.BigEndian.Uint16(v[8:])) }

// SetTargetID writes the target ID in place.
func (v View) SetTargetID(id ID) { binary.BigEndian.PutUint16(v[8:], uint16(id)) }

// Register returns the byte offset (0..4095) of a config request's register:
// extended register number in DW2 11:8, register number in 7:2.
func (v View) Register() uint16 { return uint16(v.dw(2) & 0xffc) }

// MessageCode returns a message's code (DW1 7:0).
func (v View) MessageCode() uint8 { return v[7] }

// Routing returns a message's routing (Type[2:0]).
func (v View) Routing() Routing { return Routing(v[0] & 7) }

// CompleterID returns a completion's completer ID (DW1 31:16).
func (v View) CompleterID() ID { return ID(binary.BigEndian.Uint16(v[4:])) }

// SetCompleterID writes a completion's completer ID in place.
func (v View) SetCompleterID(id ID) { binary.BigEndian.PutUint16(v[4:], uint16(id)) }

// Status returns a completion's status (DW1 15:13).
func (v View) Status() Status { return Status(v[6] >> 5) }

// BCM returns a completion's Byte Count Modified bit (DW1 bit 12).
func (v View) BCM() bool { return v[6]&0x10 != 0 }

// ByteCountField returns the raw 12-bit Byte Count field of a completion.
func (v View) ByteCountField() uint16 { return uint16(v[6]&0xf)<<8 | uint16(v[7]) }

// ByteCount returns a completion's remaining byte count, 0 read as 4096.
func (v View) ByteCount() int {
	n := int(v.ByteCountField())
	if n == 0 {
		return 4096
	}
	return n
}

// LowerAddress returns a completion's Lower Address (DW2 6:0).
func (v View) LowerAddress() uint8 { return v[11] & 0x7f }
