package tlp

// Parse validates b as exactly one whole TLP (header, payload, and the
// digest when TD is set) and returns it as a View. It allocates nothing on
// success. A TLP that breaks a rule of the PCIe Base Specification returns
// an *Error naming the rule, the field and its value; see the Rule*
// constants for the rules checked. Reserved bits outside DW0 are ignored,
// as the specification requires of receivers.
//
// A TLP prefix (Fmt 100) is not a TLP of its own: Parse reports ErrPrefix;
// use SplitPrefixes to separate prefixes from the TLP that follows.
func Parse(b []byte) (View, error) {
	if quickOK(b) && (b[2]&0x80 == 0 || View(b).CheckECRC()) {
		return View(b), nil
	}
	v, truncated, err := parse(b)
	if err != nil {
		return nil, err
	}
	if truncated {
		return nil, shortErr(v, len(b))
	}
	return v, nil
}

// ParseTruncated is the lenient form of Parse for captures cut short by a
// snap length: the header must be whole and valid, but the payload and
// digest may be cut. It returns the bytes present as a View and
// truncated=true when some were missing (the ECRC is then not checked, and
// View.Payload returns the part that is there). Every other rule is
// checked as in Parse.
func ParseTruncated(b []byte) (v View, truncated bool, err error) {
	if quickOK(b) && (b[2]&0x80 == 0 || View(b).CheckECRC()) {
		return View(b), false, nil
	}
	v, truncated, err = parse(b)
	if err != nil {
		return nil, false, err
	}
	return v, truncated, nil
}

func shortErr(v View, have int) error {
	k := v.Kind()
	e := newErr(RuleLengthMismatch, k, "length", uint64(v.LengthField()), ErrLengthMismatch,
		"header %d + payload %d + digest %d = %d bytes declared, %d present",
		v.HeaderLen(), v.PayloadLen(), digestLen(v), v.WireLen(), have)
	e.also = ErrTruncated
	return e
}

func digestLen(v View) int {
	if v.TD() {
		return 4
	}
	return 0
}

// quickOK is the hot path of Parse for the common kinds: it reports true
// only for a whole TLP that parse would accept (the ECRC aside), without
// building errors. Anything else, valid or not, takes the full path.
func quickOK(b []byte) bool {
	if len(b) < Header3DW {
		return false
	}
	b0 := b[0]
	k := kindByByte0[b0]
	hl := Header3DW + int(b0>>3)&4 // Fmt bit 0 (byte 0 bit 5): 4-DW header
	n := int(b[2]&3)<<8 | int(b[3])
	if n == 0 {
		n = 1024
	}
	want := hl
	if b0&0x40 != 0 {
		want += 4 * n
	}
	if b[2]&0x80 != 0 {
		want += 4
	}
	if len(b) != want {
		return false
	}
	switch k {
	case MRd, MRdLk, MWr:
		off := int(b[hl-2]&0x0f)<<8 | int(b[hl-1]&0xfc)
		if off+4*n > 4096 {
			return false
		}
		if b[1]&0x01 != 0 && k != MWr { // TH read: BE fields hold ST
			return true
		}
		fbe, lbe := b[7]&0xf, b[7]>>4
		if n == 1 {
			return lbe == 0
		}
		return firstBEOK(fbe) && lastBEOK(lbe)
	case CplD, CplDLk:
		bc := int(b[6]&0xf)<<8 | int(b[7])
		if bc == 0 {
			bc = 4096
		}
		return 4*n <= int(b[11]&3)+bc+3
	case Cpl, CplLk:
		return true
	case IORd, IOWr, CfgRd0, CfgWr0, CfgRd1, CfgWr1:
		// Length 1, TC 0, Attr[1:0] 0, AT 0, Last BE 0.
		return b[3] == 1 && b[2]&0x3f == 0 && b[1]&0x70 == 0 && b[7]&0xf0 == 0
	case Msg, MsgD:
		return b[1]&0x70 == 0 || !messageNeedsTC0(b[7])
	case FetchAdd, Swap, CAS:
		size := 4 * n
		if k == CAS {
			if n != 2 && n != 4 && n != 8 {
				return false
			}
			size = 2 * n
		} else if n > 2 {
			return false
		}
		return int(b[hl-1]&^3)&(size-1) == 0
	}
	return false
}

// parse checks everything that a whole header allows and reports whether
// the bytes stop before the declared end of the TLP.
func parse(b []byte) (View, bool, error) {
	if len(b) == 0 {
		return nil, false, newErr(RuleTruncatedHeader, KindInvalid, "", 0, ErrTruncated,
			"empty TLP: at least a 12-byte header is needed")
	}
	k := kindByByte0[b[0]]
	if k == KindInvalid {
		return nil, false, checkFmtType(b[0])
	}
	v := View(b)
	hl := v.HeaderLen()
	if len(b) < hl {
		return nil, false, newErr(RuleTruncatedHeader, k, "", 0, ErrTruncated,
			"%s needs a %d-byte header, have %d bytes", k, hl, len(b))
	}
	if err := checkHeader(v, k); err != nil {
		return nil, false, err
	}
	dl := digestLen(v)
	if !v.HasData() && len(b) > hl+dl {
		return nil, false, newErr(RuleUnexpectedData, k, "fmt", uint64(v.Fmt()), ErrUnexpectedData,
			"%s has no payload (Fmt %03b) but %d bytes follow the header", k, v.Fmt(), len(b)-hl)
	}
	want := v.WireLen()
	switch {
	case len(b) > want:
		return nil, false, newErr(RuleLengthMismatch, k, "length", uint64(v.LengthField()), ErrLengthMismatch,
			"header %d + payload %d + digest %d = %d bytes declared, %d present",
			hl, v.PayloadLen(), dl, want, len(b))
	case len(b) < want:
		return v, true, nil
	}
	if dl != 0 && !v.CheckECRC() {
		n := hl + v.PayloadLen()
		return nil, false, newErr(RuleECRC, k, "ecrc", uint64(v.ECRC()), ErrBadECRC,
			"digest is %#08x, header and data give %#08x", v.ECRC(), ComputeECRC(v[:n]))
	}
	return v, false, nil
}

// checkFmtType rejects prefixes and reserved Fmt/Type encodings with the
// most specific rule it can name.
func checkFmtType(b0 byte) error {
	f, t := b0>>5, b0&0x1f
	switch {
	case f == FmtPrefix:
		return newErr(RulePrefix, KindInvalid, "fmt", uint64(f), ErrPrefix,
			"Fmt 100 is a TLP prefix (Type %05b), not a TLP: strip prefixes with SplitPrefixes", t)
	case f > FmtPrefix:
		return newErr(RuleReservedFmt, KindInvalid, "fmt", uint64(f), ErrReservedFmtType,
			"Fmt %03b is reserved (000-011 are TLP headers, 100 a prefix)", f)
	}
	if KindOf(f, t) != KindInvalid {
		return nil
	}
	if t&0x18 == 0x10 {
		if f&1 == 0 {
			return newErr(RuleReservedFmtType, KindInvalid, "fmt", uint64(f), ErrReservedFmtType,
				"message Type %05b needs a 4-DW header (Fmt 001 or 011), not Fmt %03b", t, f)
		}
		return newErr(RuleMessageRouting, KindInvalid, "routing", uint64(t&7), ErrReservedFmtType,
			"message routing r=%03b is reserved (000-101 are defined)", t&7)
	}
	return newErr(RuleReservedFmtType, KindInvalid, "type", uint64(t), ErrReservedFmtType,
		"Fmt %03b with Type %05b is a reserved encoding%s", f, t, reservedHint(f, t))
}

func reservedHint(f, t uint8) string {
	switch {
	case t == 0b00001 && f&2 != 0:
		return " (MRdLk has no data: there is no locked write)"
	case t >= 0b01100 && t <= 0b01110 && f&2 == 0:
		return " (AtomicOps always carry data)"
	case t == 0b11011:
		return " (TCfgRd/TCfgWr are deprecated; DMWr of PCIe 6.0 is not supported)"
	case f&1 != 0 && (t == 0b00010 || t == 0b00100 || t == 0b00101 || t == 0b01010 || t == 0b01011):
		return " (IO, configuration and completion TLPs use the 3-DW header)"
	}
	return ""
}

// checkHeader applies the per-kind field rules.
func checkHeader(v View, k Kind) error {
	switch {
	case k.IsIO() || k.IsConfig():
		return checkIOCfg(v, k)
	case k == MRd || k == MRdLk || k == MWr:
		return checkMemory(v, k)
	case k.IsAtomic():
		return checkAtomic(v, k)
	case k.IsMessage():
		if v.TC() != 0 && messageNeedsTC0(v.MessageCode()) {
			return newErr(RuleMessageTC, k, "tc", uint64(v.TC()), ErrMessageRule,
				"message code %#02x (%s) must use TC 0", v.MessageCode(), messageName(v.MessageCode()))
		}
	case k == CplD || k == CplDLk:
		// The payload starts at Lower Address & 3 within the first DW and
		// must not run past the bytes still owed (Byte Count).
		la := int(v.LowerAddress() & 3)
		if bc := v.ByteCount(); v.Length()*4 > la+bc+3 {
			return newErr(RuleCplByteCount, k, "length", uint64(v.LengthField()), ErrByteCount,
				"%d DW of data but Byte Count %d from Lower Address offset %d covers at most %d DW",
				v.Length(), bc, la, (la+bc+3)/4)
		}
	}
	return nil
}

func checkIOCfg(v View, k Kind) error {
	switch {
	case v.LengthField() != 1:
		return newErr(RuleIOCfgLength, k, "length", uint64(v.LengthField()), ErrRequestRule,
			"IO and configuration requests must have Length 1")
	case v.TC() != 0:
		return newErr(RuleIOCfgTC, k, "tc", uint64(v.TC()), ErrRequestRule,
			"IO and configuration requests must use TC 0")
	case v.Attr()&(AttrNS|AttrRO) != 0:
		return newErr(RuleIOCfgAttr, k, "attr", uint64(v.Attr()), ErrRequestRule,
			"IO and configuration requests must have Attr[1:0] (RO, NS) = 00")
	case v.AT() != 0:
		return newErr(RuleIOCfgAT, k, "at", uint64(v.AT()), ErrRequestRule,
			"IO and configuration requests must have AT 00")
	case v.LastBE() != 0:
		return newErr(RuleLastBELength1, k, "last_be", uint64(v.LastBE()), ErrByteEnables,
			"Last DW BE must be 0000 when Length is 1")
	}
	return nil
}

func checkMemory(v View, k Kind) error {
	n := v.Length()
	// Fast path: the usual contiguous byte enables. checkBE names the
	// broken rule, and allows the sparse enables of a QW-aligned 2-DW
	// request. A memory read with TH set carries ST[7:0] in the
	// byte-enable fields; all bytes are then implied enabled.
	fbe, lbe := v.FirstBE(), v.LastBE()
	beOK := (n == 1 && lbe == 0) || (n > 1 && firstBEOK(fbe) && lastBEOK(lbe))
	if !beOK && !(v.TH() && k != MWr) {
		if err := checkBE(v, k, n); err != nil {
			return err
		}
	}
	addr := v.Address()
	if int(addr&0xfff)+4*n > 4096 {
		return newErr(RuleCross4K, k, "address", addr, ErrCross4K,
			"%d DW from %#x run to %#x, past the 4 KiB boundary at %#x",
			n, addr, addr+uint64(4*n)-1, (addr|0xfff)+1)
	}
	return nil
}

// firstBEOK and lastBEOK are the contiguous patterns: First DW BE enables
// bytes up to the end of its DW, Last DW BE from the start of its DW.
// Bit i of the constant is set when pattern i is allowed.
func firstBEOK(be uint8) bool { return 1<<(be&0xf)&(1<<0xf|1<<0xe|1<<0xc|1<<0x8) != 0 }
func lastBEOK(be uint8) bool  { return 1<<(be&0xf)&(1<<0xf|1<<0x7|1<<0x3|1<<0x1) != 0 }

func checkBE(v View, k Kind, n int) error {
	fbe, lbe := v.FirstBE(), v.LastBE()
	if n == 1 {
		if lbe != 0 {
			return newErr(RuleLastBELength1, k, "last_be", uint64(lbe), ErrByteEnables,
				"Last DW BE must be 0000 when Length is 1")
		}
		return nil
	}
	if fbe == 0 {
		return newErr(RuleZeroBE, k, "first_be", 0, ErrByteEnables,
			"First DW BE must not be 0000 when Length is %d (> 1)", n)
	}
	if lbe == 0 {
		return newErr(RuleZeroBE, k, "last_be", 0, ErrByteEnables,
			"Last DW BE must not be 0000 when Length is %d (> 1)", n)
	}
	// Non-contiguous byte enables are allowed only on a QW-aligned
	// 2-DW request.
	if n == 2 && v.Address()&7 == 0 {
		return nil
	}
	if !firstBEOK(fbe) {
		return newErr(RuleBEContiguous, k, "first_be", uint64(fbe), ErrByteEnables,
			"First DW BE %04b must be contiguous up to byte 3 (Length %d)", fbe, n)
	}
	if !lastBEOK(lbe) {
		return newErr(RuleBEContiguous, k, "last_be", uint64(lbe), ErrByteEnables,
			"Last DW BE %04b must be contiguous from byte 0 (Length %d)", lbe, n)
	}
	return nil
}

func checkAtomic(v View, k Kind) error {
	n := int(v.LengthField())
	var size int // operand size in bytes; the target is that many bytes
	switch k {
	case FetchAdd, Swap:
		if n != 1 && n != 2 {
			return newErr(RuleAtomicSize, k, "length", uint64(n), ErrAtomicOperand,
				"%s carries one 32- or 64-bit operand: Length must be 1 or 2", k)
		}
		size = 4 * n
	case CAS:
		if n != 2 && n != 4 && n != 8 {
			return newErr(RuleAtomicSize, k, "length", uint64(n), ErrAtomicOperand,
				"CAS carries compare and swap values of 32, 64 or 128 bits: Length must be 2, 4 or 8")
		}
		size = 2 * n
	}
	if addr := v.Address(); addr%uint64(size) != 0 {
		return newErr(RuleAtomicAlign, k, "address", addr, ErrAtomicOperand,
			"a %d-byte %s target must be naturally aligned", size, k)
	}
	return nil
}

// messageNeedsTC0 reports whether the message code is one the
// specification requires to travel on TC 0, with receivers checking:
// Unlock, the power-management messages, INTx, error signalling and
// Set_Slot_Power_Limit.
func messageNeedsTC0(code uint8) bool {
	switch code {
	case 0x00, 0x14, 0x18, 0x19, 0x1b, 0x30, 0x31, 0x33, 0x50:
		return true
	}
	return code >= 0x20 && code <= 0x27
}

func messageName(code uint8) string {
	switch {
	case code == 0x00:
		return "Unlock"
	case code == 0x14:
		return "PM_Active_State_Nak"
	case code == 0x18:
		return "PM_PME"
	case code == 0x19:
		return "PME_Turn_Off"
	case code == 0x1b:
		return "PME_TO_Ack"
	case code >= 0x20 && code <= 0x23:
		return "Assert_INT" + string(rune('A'+code-0x20))
	case code >= 0x24 && code <= 0x27:
		return "Deassert_INT" + string(rune('A'+code-0x24))
	case code == 0x30:
		return "ERR_COR"
	case code == 0x31:
		return "ERR_NONFATAL"
	case code == 0x33:
		return "ERR_FATAL"
	case code == 0x50:
		return "Set_Slot_Power_Limit"
	}
	return "message"
}
