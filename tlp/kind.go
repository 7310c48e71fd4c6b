package tlp

import "fmt"

// Kind names a TLP type as the PCIe Base Specification does. It is derived
// from the Fmt and Type fields of DW0.
type Kind uint8

// The TLP kinds. KindInvalid is the zero value and marks a reserved or
// unsupported Fmt/Type encoding.
const (
	KindInvalid Kind = iota
	MRd
	MRdLk
	MWr
	IORd
	IOWr
	CfgRd0
	CfgWr0
	CfgRd1
	CfgWr1
	Msg
	MsgD
	Cpl
	CplD
	CplLk
	CplDLk
	FetchAdd
	Swap
	CAS
	kindCount
)

var kindNames = [kindCount]string{
	KindInvalid: "Invalid",
	MRd:         "MRd", MRdLk: "MRdLk", MWr: "MWr",
	IORd: "IORd", IOWr: "IOWr",
	CfgRd0: "CfgRd0", CfgWr0: "CfgWr0", CfgRd1: "CfgRd1", CfgWr1: "CfgWr1",
	Msg: "Msg", MsgD: "MsgD",
	Cpl: "Cpl", CplD: "CplD", CplLk: "CplLk", CplDLk: "CplDLk",
	FetchAdd: "FetchAdd", Swap: "Swap", CAS: "CAS",
}

func (k Kind) String() string {
	if k < kindCount {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind returns the Kind with the given name ("MRd", "CplD", ...).
func ParseKind(s string) (Kind, bool) {
	for k := MRd; k < kindCount; k++ {
		if kindNames[k] == s {
			return k, true
		}
	}
	return KindInvalid, false
}

// Fmt values (DW0 bits 31:29).
const (
	Fmt3DWNoData uint8 = 0b000
	Fmt4DWNoData uint8 = 0b001
	Fmt3DWData   uint8 = 0b010
	Fmt4DWData   uint8 = 0b011
	FmtPrefix    uint8 = 0b100
)

// KindOf maps a Fmt/Type pair to its Kind; KindInvalid for reserved
// encodings (including TLP prefixes, which are not a TLP of their own).
func KindOf(fmtField, typ uint8) Kind {
	hasData := fmtField&0b010 != 0
	is4DW := fmtField&0b001 != 0
	if fmtField > Fmt4DWData {
		return KindInvalid
	}
	switch {
	case typ == 0b00000:
		if hasData {
			return MWr
		}
		return MRd
	case typ == 0b00001:
		if hasData {
			return KindInvalid
		}
		return MRdLk
	case typ&0b11000 == 0b10000: // Msg, routing in Type[2:0]
		if !is4DW || typ&0b111 > 5 {
			return KindInvalid
		}
		if hasData {
			return MsgD
		}
		return Msg
	}
	if is4DW {
		switch typ {
		case 0b01100:
			if hasData {
				return FetchAdd
			}
		case 0b01101:
			if hasData {
				return Swap
			}
		case 0b01110:
			if hasData {
				return CAS
			}
		}
		return KindInvalid
	}
	switch typ {
	case 0b00010:
		return pick(hasData, IOWr, IORd)
	case 0b00100:
		return pick(hasData, CfgWr0, CfgRd0)
	case 0b00101:
		return pick(hasData, CfgWr1, CfgRd1)
	case 0b01010:
		return pick(hasData, CplD, Cpl)
	case 0b01011:
		return pick(hasData, CplDLk, CplLk)
	case 0b01100:
		return pick(hasData, FetchAdd, KindInvalid)
	case 0b01101:
		return pick(hasData, Swap, KindInvalid)
	case 0b01110:
		return pick(hasData, CAS, KindInvalid)
	}
	return KindInvalid
}

// kindByByte0 caches KindOf for every value of header byte 0 (Fmt and
// Type): the hot path reads the kind with one load.
var kindByByte0 = func() (t [256]Kind) {
	for i := range t {
		t[i] = KindOf(uint8(i>>5), uint8(i&0x1f))
	}
	return t
}()

func pick(cond bool, a, b Kind) Kind {
	if cond {
		return a
	}
	return b
}

// IsRequest reports whether k is a request that carries a Requester ID and
// Tag in DW1 (everything except completions).
func (k Kind) IsRequest() bool { return k != KindInvalid && !k.IsCompletion() }

// IsCompletion reports whether k is one of Cpl, CplD, CplLk, CplDLk.
func (k Kind) IsCompletion() bool { return k >= Cpl && k <= CplDLk }

// IsNonPosted reports whether a request of kind k expects a completion.
func (k Kind) IsNonPosted() bool {
	switch k {
	case MRd, MRdLk, IORd, IOWr, CfgRd0, CfgWr0, CfgRd1, CfgWr1, FetchAdd, Swap, CAS:
		return true
	}
	return false
}

// IsPosted reports whether k is a posted request (memory write, message).
func (k Kind) IsPosted() bool { return k == MWr || k == Msg || k == MsgD }

// IsMemory reports whether k is addressed by a memory address (memory
// requests and AtomicOps).
func (k Kind) IsMemory() bool {
	switch k {
	case MRd, MRdLk, MWr, FetchAdd, Swap, CAS:
		return true
	}
	return false
}

// IsAtomic reports whether k is an AtomicOp request.
func (k Kind) IsAtomic() bool { return k == FetchAdd || k == Swap || k == CAS }

// IsConfig reports whether k is a configuration request.
func (k Kind) IsConfig() bool { return k >= CfgRd0 && k <= CfgWr1 }

// IsIO reports whether k is an IO request.
func (k Kind) IsIO() bool { return k == IORd || k == IOWr }

// IsMessage reports whether k is Msg or MsgD.
func (k Kind) IsMessage() bool { return k == Msg || k == MsgD }

// MarshalText writes the kind's name ("MRd", "CplD", ...).
func (k Kind) MarshalText() ([]byte, error) {
	if k == KindInvalid || k >= kindCount {
		return nil, fmt.Errorf("tlp: cannot marshal %v", k)
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind's name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, ok := ParseKind(string(b))
	if !ok {
		return fmt.Errorf("tlp: unknown TLP kind %q", b)
	}
	*k = v
	return nil
}
