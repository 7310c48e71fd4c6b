package tlp

import (
	"encoding/binary"
	"fmt"
)

// Packet is a TLP as a value: every header field, the payload and the
// digest. Build one and call AppendTo to get its wire bytes, or fill one
// from a View with Decode. Only the fields that the Kind uses are encoded;
// the others are ignored.
type Packet struct {
	Kind Kind
	// Addr64 selects the 4-DW header (64-bit address) for memory requests
	// and AtomicOps even when Address is below 4 GiB. An Address of 4 GiB
	// or more always uses it. Decode sets it from the header.
	Addr64 bool

	TC   uint8 // traffic class 0..7
	Attr uint8 // bit 0 NS, bit 1 RO, bit 2 IDO
	TH   bool  // TLP processing hints (PH valid)
	TD   bool  // ECRC digest present
	EP   bool  // poisoned
	LN   bool  // lightweight notification
	AT   uint8 // address type 0..3

	// Length is the DW count 1..1024 for TLPs that carry data and for
	// memory reads (1024 encodes as 0). For data TLPs a Length of 0 means
	// "len(Data)/4". For Cpl, CplLk and Msg, where the field is reserved,
	// it is the raw field value 0..1023.
	Length uint16

	// Requests (memory, IO, config, atomic, message).
	RequesterID ID
	Tag         uint16 // 10 bits: T9, T8, Tag[7:0]
	FirstBE     uint8  // not for messages
	LastBE      uint8  // not for messages

	// Memory, IO and atomic requests: the DW-aligned address (bits 1:0
	// zero). Messages routed by address: the 64-bit DW2:DW3.
	Address uint64
	PH      uint8 // processing hint: address bits 1:0 of memory requests and AtomicOps

	// Configuration requests (TargetID also for ID-routed messages).
	TargetID ID
	Register uint16 // byte offset 0..4095, a multiple of 4

	// Messages.
	MessageCode uint8
	Routing     Routing
	// MsgDW2 and MsgDW3 are the routing-dependent DWs 2 and 3 of a
	// message as sent. Encoding overlays Address (routing by address) or
	// TargetID (routing by ID, DW2 bits 31:16) on them.
	MsgDW2, MsgDW3 uint32

	// Completions (RequesterID and Tag above are the request's).
	CompleterID  ID
	Status       Status
	BCM          bool
	ByteCount    uint16 // 1..4096 (4096 encodes as 0)
	LowerAddress uint8  // 0..127

	// Data is the payload. Decode aliases the View's bytes; copy them to
	// keep them past the View's lifetime.
	Data []byte
	// ECRC is the digest DW (when TD). Decode reads it; AppendTo computes
	// it and ignores this field.
	ECRC uint32
}

// hasPayload reports whether TLPs of kind k carry data (Fmt bit 1).
func (k Kind) hasPayload() bool {
	switch k {
	case MWr, IOWr, CfgWr0, CfgWr1, MsgD, CplD, CplDLk, FetchAdd, Swap, CAS:
		return true
	}
	return false
}

// HasData reports whether TLPs of kind k carry a payload.
func (k Kind) HasData() bool { return k.hasPayload() }

// lengthReserved reports whether the Length field of kind k is reserved
// (TLPs without data and without a requested length).
func (k Kind) lengthReserved() bool { return k == Cpl || k == CplLk || k == Msg }

// Decode fills p from v. v needs a whole header (any View from Parse or
// ParseTruncated qualifies); it returns an error, not a panic, otherwise.
// Data aliases v. Decode allocates nothing.
func (p *Packet) Decode(v View) error {
	if len(v) == 0 {
		return newErr(RuleTruncatedHeader, KindInvalid, "", 0, ErrTruncated, "empty TLP")
	}
	if len(v) < v.HeaderLen() {
		return newErr(RuleTruncatedHeader, v.Kind(), "", 0, ErrTruncated,
			"need a %d-byte header, have %d bytes", v.HeaderLen(), len(v))
	}
	k := v.Kind()
	*p = Packet{
		Kind: k, TC: v.TC(), Attr: v.Attr(), TH: v.TH(), TD: v.TD(), EP: v.EP(), LN: v.LN(), AT: v.AT(),
	}
	if k.lengthReserved() {
		p.Length = v.LengthField()
	} else {
		p.Length = uint16(v.Length())
	}
	p.Tag = v.Tag()
	p.RequesterID = v.RequesterID()
	switch {
	case k.IsCompletion():
		p.CompleterID = v.CompleterID()
		p.Status = v.Status()
		p.BCM = v.BCM()
		p.ByteCount = uint16(v.ByteCount())
		p.LowerAddress = v.LowerAddress()
	case k.IsMessage():
		p.MessageCode = v.MessageCode()
		p.Routing = v.Routing()
		p.MsgDW2, p.MsgDW3 = v.dw(2), v.dw(3)
		switch p.Routing {
		case RouteByAddress:
			p.Address = uint64(p.MsgDW2)<<32 | uint64(p.MsgDW3)
		case RouteByID:
			p.TargetID = v.TargetID()
		}
	case k.IsConfig():
		p.FirstBE, p.LastBE = v.FirstBE(), v.LastBE()
		p.TargetID = v.TargetID()
		p.Register = v.Register()
	case k.IsIO():
		p.FirstBE, p.LastBE = v.FirstBE(), v.LastBE()
		p.Address = v.Address()
	default: // memory and atomic
		p.FirstBE, p.LastBE = v.FirstBE(), v.LastBE()
		p.Address = v.Address()
		p.PH = v.PH()
		p.Addr64 = v.Is4DW()
	}
	if v.HasData() {
		p.Data = v.Payload()
	}
	if p.TD {
		p.ECRC = v.ECRC()
	}
	return nil
}

// Decode parses and validates b and returns it as a Packet (Data aliases
// b).
func Decode(b []byte) (Packet, error) {
	var p Packet
	v, err := Parse(b)
	if err != nil {
		return p, err
	}
	err = p.Decode(v)
	return p, err
}

// Is4DW reports whether p encodes with a 4-DW header.
func (p *Packet) Is4DW() bool {
	switch {
	case p.Kind.IsMessage():
		return true
	case p.Kind.IsMemory():
		return p.Addr64 || p.Address > 0xffffffff
	}
	return false
}

// FmtType returns the Fmt and Type fields p encodes with.
func (p *Packet) FmtType() (fmtField, typ uint8) {
	if p.Kind.hasPayload() {
		fmtField = Fmt3DWData
	}
	if p.Is4DW() {
		fmtField |= 1
	}
	switch p.Kind {
	case MRd, MWr:
		typ = 0b00000
	case MRdLk:
		typ = 0b00001
	case IORd, IOWr:
		typ = 0b00010
	case CfgRd0, CfgWr0:
		typ = 0b00100
	case CfgRd1, CfgWr1:
		typ = 0b00101
	case Msg, MsgD:
		typ = 0b10000 | uint8(p.Routing&7)
	case Cpl, CplD:
		typ = 0b01010
	case CplLk, CplDLk:
		typ = 0b01011
	case FetchAdd:
		typ = 0b01100
	case Swap:
		typ = 0b01101
	case CAS:
		typ = 0b01110
	}
	return fmtField, typ
}

// WireLen returns the encoded size of p in bytes.
func (p *Packet) WireLen() int {
	n := Header3DW
	if p.Is4DW() {
		n = Header4DW
	}
	if p.Kind.hasPayload() {
		n += 4 * p.dataDWs()
	}
	if p.TD {
		n += 4
	}
	return n
}

func (p *Packet) dataDWs() int {
	if p.Length == 0 {
		return len(p.Data) / 4
	}
	return int(p.Length)
}

func fieldErr(k Kind, field string, v uint64, format string, args ...any) error {
	return newErr(RuleFieldRange, k, field, v, ErrField, format, args...)
}

// checkFields rejects values that do not fit their fields, before packing
// would silently mask them.
func (p *Packet) checkFields() error {
	k := p.Kind
	switch {
	case k == KindInvalid || k >= kindCount:
		return newErr(RuleKindPacket, k, "kind", uint64(k), ErrField, "no TLP kind set")
	case p.TC > 7:
		return fieldErr(k, "tc", uint64(p.TC), "traffic class is 3 bits (0..7)")
	case p.Attr > 7:
		return fieldErr(k, "attr", uint64(p.Attr), "Attr is 3 bits (1 NS, 2 RO, 4 IDO)")
	case p.AT > 3:
		return fieldErr(k, "at", uint64(p.AT), "AT is 2 bits (0..3)")
	case p.Tag > 1023:
		return fieldErr(k, "tag", uint64(p.Tag), "tags are 10 bits (0..1023)")
	}
	if k.hasPayload() {
		if len(p.Data)%4 != 0 {
			return newErr(RuleDataLengthPacket, k, "data", uint64(len(p.Data)), ErrLengthMismatch,
				"the payload is whole DWs: %d bytes is not a multiple of 4", len(p.Data))
		}
		n := p.dataDWs()
		if n < 1 || n > 1024 {
			return fieldErr(k, "length", uint64(n), "a TLP with data carries 1..1024 DW")
		}
		if len(p.Data) != 4*n {
			return newErr(RuleDataLengthPacket, k, "data", uint64(len(p.Data)), ErrLengthMismatch,
				"Length %d DW needs %d bytes of data, have %d", n, 4*n, len(p.Data))
		}
	} else {
		if len(p.Data) != 0 {
			return newErr(RuleUnexpectedData, k, "data", uint64(len(p.Data)), ErrUnexpectedData,
				"%s carries no data", k)
		}
		if k.lengthReserved() {
			if p.Length > 1023 {
				return fieldErr(k, "length", uint64(p.Length), "the reserved Length field of %s holds 0..1023", k)
			}
		} else if p.Length < 1 || p.Length > 1024 {
			return fieldErr(k, "length", uint64(p.Length), "%s requests 1..1024 DW", k)
		}
	}
	if k.IsRequest() && !k.IsMessage() && (p.FirstBE > 0xf || p.LastBE > 0xf) {
		return fieldErr(k, "first_be", uint64(p.FirstBE)<<4|uint64(p.LastBE), "byte enables are 4 bits each")
	}
	switch {
	case k.IsMemory() || k.IsIO():
		if p.Address&3 != 0 {
			return fieldErr(k, "address", p.Address, "the address is DW aligned: bits 1:0 must be 0 (PH goes in PH)")
		}
		if k.IsIO() && p.Address > 0xffffffff {
			return fieldErr(k, "address", p.Address, "IO addresses are 32 bits")
		}
		if p.PH > 3 {
			return fieldErr(k, "ph", uint64(p.PH), "PH is 2 bits")
		}
	case k.IsConfig():
		if p.Register > 0xffc || p.Register&3 != 0 {
			return fieldErr(k, "register", uint64(p.Register), "the register offset is a multiple of 4 in 0..4092")
		}
	case k.IsMessage():
		if p.Routing > RouteGather {
			return newErr(RuleMessageRouting, k, "routing", uint64(p.Routing), ErrReservedFmtType,
				"message routing must be 0..5")
		}
	case k.IsCompletion():
		if p.Status > 7 {
			return fieldErr(k, "status", uint64(p.Status), "status is 3 bits")
		}
		if p.ByteCount < 1 || p.ByteCount > 4096 {
			return fieldErr(k, "byte_count", uint64(p.ByteCount), "Byte Count is 1..4096")
		}
		if p.LowerAddress > 0x7f {
			return fieldErr(k, "lower_address", uint64(p.LowerAddress), "Lower Address is 7 bits")
		}
	}
	return nil
}

// AppendTo encodes p, appends it to b and returns the extended slice. It
// validates p with the same rules as Parse; on error b is returned
// unchanged. With TD set it computes and appends the ECRC.
func (p *Packet) AppendTo(b []byte) ([]byte, error) {
	if err := p.checkFields(); err != nil {
		return b, err
	}
	start := len(b)
	n := p.WireLen()
	b = grow(b, n)
	t := b[start:]
	clear(t)
	f, typ := p.FmtType()
	length := uint16(0)
	switch {
	case p.Kind.hasPayload():
		length = uint16(p.dataDWs()) & 0x3ff
	default:
		length = p.Length & 0x3ff
	}
	t[0] = f<<5 | typ
	t[1] = byte(p.Tag>>9&1)<<7 | p.TC<<4 | byte(p.Tag>>8&1)<<3 | p.Attr&4 | b2u(p.LN)<<1 | b2u(p.TH)
	t[2] = b2u(p.TD)<<7 | b2u(p.EP)<<6 | (p.Attr&3)<<4 | p.AT<<2 | byte(length>>8)
	t[3] = byte(length)
	k := p.Kind
	switch {
	case k.IsCompletion():
		binary.BigEndian.PutUint16(t[4:], uint16(p.CompleterID))
		bc := p.ByteCount & 0xfff
		t[6] = byte(p.Status)<<5 | b2u(p.BCM)<<4 | byte(bc>>8)
		t[7] = byte(bc)
		binary.BigEndian.PutUint16(t[8:], uint16(p.RequesterID))
		t[10] = byte(p.Tag)
		t[11] = p.LowerAddress
	case k.IsMessage():
		binary.BigEndian.PutUint16(t[4:], uint16(p.RequesterID))
		t[6] = byte(p.Tag)
		t[7] = p.MessageCode
		dw2, dw3 := p.MsgDW2, p.MsgDW3
		switch p.Routing {
		case RouteByAddress:
			dw2, dw3 = uint32(p.Address>>32), uint32(p.Address)
		case RouteByID:
			dw2 = dw2&0xffff | uint32(p.TargetID)<<16
		}
		binary.BigEndian.PutUint32(t[8:], dw2)
		binary.BigEndian.PutUint32(t[12:], dw3)
	default:
		binary.BigEndian.PutUint16(t[4:], uint16(p.RequesterID))
		t[6] = byte(p.Tag)
		t[7] = p.LastBE<<4 | p.FirstBE
		switch {
		case k.IsConfig():
			binary.BigEndian.PutUint16(t[8:], uint16(p.TargetID))
			binary.BigEndian.PutUint16(t[10:], p.Register&0xffc)
		case p.Is4DW():
			binary.BigEndian.PutUint32(t[8:], uint32(p.Address>>32))
			binary.BigEndian.PutUint32(t[12:], uint32(p.Address)|uint32(p.PH))
		case k.IsIO():
			binary.BigEndian.PutUint32(t[8:], uint32(p.Address))
		default:
			binary.BigEndian.PutUint32(t[8:], uint32(p.Address)|uint32(p.PH))
		}
	}
	hl := Header3DW
	if p.Is4DW() {
		hl = Header4DW
	}
	copy(t[hl:], p.Data)
	if p.TD {
		putECRC(t, n-4)
	}
	if _, err := Parse(t); err != nil {
		return b[:start], err
	}
	return b, nil
}

// Encode returns p's wire bytes in a new slice.
func (p *Packet) Encode() ([]byte, error) {
	return p.AppendTo(make([]byte, 0, p.WireLen()))
}

func b2u(x bool) byte {
	if x {
		return 1
	}
	return 0
}

// grow extends b by n bytes, reallocating only when capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b[:len(b)+n]
	}
	nb := make([]byte, len(b)+n, 2*len(b)+n)
	copy(nb, b)
	return nb
}

// String is a one-line summary for logs.
func (p Packet) String() string {
	switch {
	case p.Kind.IsCompletion():
		return fmt.Sprintf("%s %s->%s tag %d %s bc %d la %#x len %d", p.Kind, p.CompleterID, p.RequesterID,
			p.Tag, p.Status, p.ByteCount, p.LowerAddress, p.Length)
	case p.Kind.IsMessage():
		return fmt.Sprintf("%s %s tag %d code %#02x routing %d", p.Kind, p.RequesterID, p.Tag, p.MessageCode, p.Routing)
	case p.Kind.IsConfig():
		return fmt.Sprintf("%s %s->%s tag %d reg %#x be %x/%x", p.Kind, p.RequesterID, p.TargetID, p.Tag,
			p.Register, p.FirstBE, p.LastBE)
	}
	return fmt.Sprintf("%s %s tag %d addr %#x len %d be %x/%x", p.Kind, p.RequesterID, p.Tag, p.Address,
		p.Length, p.FirstBE, p.LastBE)
}
