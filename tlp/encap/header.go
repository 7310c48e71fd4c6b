package encap

import "encoding/binary"

// EtherType is the EtherType of dxpu frames on raw Ethernet (IEEE 802
// local experimental EtherType 1).
const EtherType = 0x88B5

// DefaultUDPPort is the UDP destination port of dxpu frames on routed
// networks; configurable per deployment.
const DefaultUDPPort = 8855

// Version is the encapsulation version this package writes.
const Version = 1

// HeaderLen is the size of the fixed dxpu header in bytes.
const HeaderLen = 40

// Offsets of the dxpu header's fields (see the package documentation).
const (
	HeaderVersionFlagsOffset = 0  // version (bits 7:4), flags (bits 3:0)
	HeaderTypeOffset         = 1  // message type
	HeaderPairIDOffset       = 2  // 24-bit pair ID
	HeaderCountOffset        = 5  // N, the number of TLPs
	HeaderBodyLenOffset      = 6  // body length
	HeaderSeqOffset          = 8  // sequence number of the first TLP
	HeaderAckOffset          = 12 // cumulative acknowledgement
	HeaderSackOffset         = 16 // selective-ack bitmap
	HeaderPHOffset           = 20 // PH limit (16 bits)
	HeaderNPHOffset          = 22 // NPH limit (16 bits)
	HeaderCplHOffset         = 24 // CplH limit (16 bits)
	HeaderInfiniteOffset     = 26 // infinite credit mask
	HeaderReservedOffset     = 27 // reserved, 0
	HeaderPDOffset           = 28 // PD limit (32 bits)
	HeaderNPDOffset          = 32 // NPD limit (32 bits)
	HeaderCplDOffset         = 36 // CplD limit (32 bits)
)

// MaxTLPs is the largest number of TLPs one frame can carry.
const MaxTLPs = 255

// MsgType is the dxpu message type (byte 1).
type MsgType uint8

// Message types.
const (
	MsgTLP     MsgType = 1 // TLPs, numbered from Seq
	MsgAck     MsgType = 2 // acknowledgement only
	MsgNak     MsgType = 3 // gap detected: resend from Ack
	MsgCredit  MsgType = 4 // credit update only
	MsgControl MsgType = 5 // link control: body is a control message
)

// Flag bits (low nibble of byte 0).
const (
	FlagAck    uint8 = 1 << 0 // Ack field valid
	FlagCredit uint8 = 1 << 1 // credit limit fields valid
	FlagSack   uint8 = 1 << 2 // Sack bitmap valid
)

// CreditType indexes the six credit limits.
type CreditType uint8

// Credit types, in header order of the infinite mask bits.
const (
	CreditPH CreditType = iota
	CreditPD
	CreditNPH
	CreditNPD
	CreditCplH
	CreditCplD
	NumCreditTypes
)

// Header is a zero-copy view of a dxpu frame starting at its fixed header
// (the UDP payload, or what follows the EtherType). Accessors assume
// len(h) >= HeaderLen; ParseHeader and ParseFrame check that and the body.
type Header []byte

// Version returns the format version (byte 0 bits 7:4); 1 for this package.
func (h Header) Version() uint8 { return h[HeaderVersionFlagsOffset] >> 4 }

// Flags returns FlagAck, FlagCredit and FlagSack bits (byte 0 bits 3:0).
func (h Header) Flags() uint8 { return h[HeaderVersionFlagsOffset] & 0xf }

// Type returns the message type (byte 1).
func (h Header) Type() MsgType { return MsgType(h[HeaderTypeOffset]) }

// PairID returns the 24-bit host-GPU pair ID (bytes 2..4).
func (h Header) PairID() uint32 {
	p := h[HeaderPairIDOffset : HeaderPairIDOffset+3 : HeaderPairIDOffset+3]
	return uint32(p[0])<<16 | uint32(p[1])<<8 | uint32(p[2])
}

// Count returns N, the number of TLPs (byte 5).
func (h Header) Count() int { return int(h[HeaderCountOffset]) }

// BodyLen returns the body length in bytes (bytes 6..7), padding excluded.
func (h Header) BodyLen() int { return int(binary.BigEndian.Uint16(h[HeaderBodyLenOffset:])) }

// Seq returns the sequence number of the first TLP (bytes 8..11).
func (h Header) Seq() uint32 { return binary.BigEndian.Uint32(h[HeaderSeqOffset:]) }

// Ack returns the cumulative acknowledgement (bytes 12..15).
func (h Header) Ack() uint32 { return binary.BigEndian.Uint32(h[HeaderAckOffset:]) }

// Sack returns the selective-ack bitmap (bytes 16..19): bit i = TLP Ack+1+i received.
func (h Header) Sack() uint32 { return binary.BigEndian.Uint32(h[HeaderSackOffset:]) }

// InfiniteMask returns byte 26: bit t set = credit type t is infinite.
func (h Header) InfiniteMask() uint8 { return h[HeaderInfiniteOffset] }

// CreditLimit returns the cumulative limit advertised for credit type t:
// header limits are 16-bit, data limits (16-byte units) 32-bit, both modular.
func (h Header) CreditLimit(t CreditType) uint32 {
	switch t {
	case CreditPH:
		return uint32(binary.BigEndian.Uint16(h[HeaderPHOffset:]))
	case CreditNPH:
		return uint32(binary.BigEndian.Uint16(h[HeaderNPHOffset:]))
	case CreditCplH:
		return uint32(binary.BigEndian.Uint16(h[HeaderCplHOffset:]))
	case CreditPD:
		return binary.BigEndian.Uint32(h[HeaderPDOffset:])
	case CreditNPD:
		return binary.BigEndian.Uint32(h[HeaderNPDOffset:])
	case CreditCplD:
		return binary.BigEndian.Uint32(h[HeaderCplDOffset:])
	}
	return 0
}

// Infinite reports whether credit type t is advertised as infinite.
func (h Header) Infinite(t CreditType) bool { return h[HeaderInfiniteOffset]&(1<<t) != 0 }

// SetVersionFlags writes byte 0. The setters below write in place and,
// like the accessors, need len(h) >= HeaderLen (SetCount and SetBodyLen do
// not move the body).
func (h Header) SetVersionFlags(ver, flags uint8) { h[HeaderVersionFlagsOffset] = ver<<4 | flags&0xf }

// SetType writes the message type.
func (h Header) SetType(t MsgType) { h[HeaderTypeOffset] = byte(t) }

// SetPairID writes the 24-bit pair ID (higher bits dropped).
func (h Header) SetPairID(id uint32) {
	h[HeaderPairIDOffset], h[HeaderPairIDOffset+1], h[HeaderPairIDOffset+2] = byte(id>>16), byte(id>>8), byte(id)
}

// SetCount writes N, the number of TLPs.
func (h Header) SetCount(n int) { h[HeaderCountOffset] = byte(n) }

// SetBodyLen writes the body length.
func (h Header) SetBodyLen(n int) { binary.BigEndian.PutUint16(h[HeaderBodyLenOffset:], uint16(n)) }

// SetSeq writes the sequence number of the first TLP.
func (h Header) SetSeq(s uint32) { binary.BigEndian.PutUint32(h[HeaderSeqOffset:], s) }

// SetAck writes the cumulative acknowledgement.
func (h Header) SetAck(a uint32) { binary.BigEndian.PutUint32(h[HeaderAckOffset:], a) }

// SetSack writes the selective-ack bitmap.
func (h Header) SetSack(m uint32) { binary.BigEndian.PutUint32(h[HeaderSackOffset:], m) }

// SetCreditLimit writes the cumulative limit for t (header limits keep their
// low 16 bits) and its infinite bit.
func (h Header) SetCreditLimit(t CreditType, limit uint32, infinite bool) {
	switch t {
	case CreditPH:
		binary.BigEndian.PutUint16(h[HeaderPHOffset:], uint16(limit))
	case CreditNPH:
		binary.BigEndian.PutUint16(h[HeaderNPHOffset:], uint16(limit))
	case CreditCplH:
		binary.BigEndian.PutUint16(h[HeaderCplHOffset:], uint16(limit))
	case CreditPD:
		binary.BigEndian.PutUint32(h[HeaderPDOffset:], limit)
	case CreditNPD:
		binary.BigEndian.PutUint32(h[HeaderNPDOffset:], limit)
	case CreditCplD:
		binary.BigEndian.PutUint32(h[HeaderCplDOffset:], limit)
	default:
		return
	}
	if infinite {
		h[HeaderInfiniteOffset] |= 1 << t
	} else {
		h[HeaderInfiniteOffset] &^= 1 << t
	}
}

// TLPLen returns the length in bytes of the i-th TLP of a MsgTLP frame, from
// the length table that starts the body. h must hold that table entry: use
// it on headers from ParseHeader or Frame.Header of frames that are not
// truncated, or check len(h) first.
func (h Header) TLPLen(i int) int {
	return int(binary.BigEndian.Uint16(h[HeaderLen+2*i:]))
}

// Body returns the bytes after the fixed header, BodyLen long (padding
// excluded). h must hold the whole body (see Frame.Body for truncated
// frames).
func (h Header) Body() []byte { return h[HeaderLen : HeaderLen+h.BodyLen()] }
