package tlp

import "math/bits"

// ByteCount returns the number of bytes a request of length DWs with the
// given byte enables covers, from the first enabled byte to the last
// (PCIe Base Specification, "Calculating Byte Count from Length and Byte
// Enables"). Disabled bytes between them count. A zero-length read
// (Length 1, First BE 0000) counts 1, as its completion's Byte Count does.
func ByteCount(length int, firstBE, lastBE uint8) int {
	firstBE &= 0xf
	lastBE &= 0xf
	if length <= 1 {
		if firstBE == 0 {
			return 1
		}
		lo := bits.TrailingZeros8(firstBE)
		hi := 7 - bits.LeadingZeros8(firstBE)
		return hi - lo + 1
	}
	return 4*length - firstOffset(firstBE) - lastGap(lastBE)
}

// firstOffset is the index of the first enabled byte in the first DW.
func firstOffset(firstBE uint8) int {
	if firstBE&0xf == 0 {
		return 0
	}
	return bits.TrailingZeros8(firstBE)
}

// lastGap is the number of disabled bytes at the end of the last DW.
func lastGap(lastBE uint8) int {
	if lastBE&0xf == 0 {
		return 0
	}
	return bits.LeadingZeros8(lastBE) - 4
}

// FirstByteAddress returns the address of the first enabled byte of a
// request whose DW-aligned address is addr.
func FirstByteAddress(addr uint64, firstBE uint8) uint64 {
	return addr&^3 + uint64(firstOffset(firstBE))
}

// LastByteAddress returns the address of the last byte a request covers.
func LastByteAddress(addr uint64, length int, firstBE, lastBE uint8) uint64 {
	return FirstByteAddress(addr, firstBE) + uint64(ByteCount(length, firstBE, lastBE)) - 1
}

// RequestBytes returns what the Byte Count of the first (or only)
// completion of request v must say (PCIe Base Specification, "Completion
// Rules" and "Calculating Byte Count from Length and Byte Enables"):
//   - memory reads: the bytes from the first to the last enabled byte; a
//     read with TH set carries a steering tag in the byte-enable fields and
//     reads whole DWs (its byte enables are implied 1111b);
//   - AtomicOps: the operand size (FetchAdd and Swap 4 x Length, CAS 2 x
//     Length), whatever the reserved byte-enable fields hold;
//   - IO and configuration requests: 4, whatever the byte enables say;
//   - memory writes (which have no completion): the bytes they write.
//
// It returns 0 for messages and completions.
func (v View) RequestBytes() int {
	k := v.Kind()
	switch {
	case (k == MRd || k == MRdLk) && v.TH():
		return 4 * v.Length()
	case k == MRd || k == MRdLk || k == MWr:
		return ByteCount(v.Length(), v.FirstBE(), v.LastBE())
	case k == CAS:
		return 2 * v.Length()
	case k == FetchAdd || k == Swap:
		return 4 * v.Length()
	case k.IsIO() || k.IsConfig():
		return 4
	}
	return 0
}

// RequestLowerAddress returns the Lower Address the first completion of
// request v carries: for a memory read, the low 7 bits of the address of
// its first enabled byte (all bytes enabled when TH is set); 0 for IO and
// configuration requests, which must complete with Lower Address 0, and
// for AtomicOps, whose completions have the field reserved (sent as 0).
func (v View) RequestLowerAddress() uint8 {
	k := v.Kind()
	switch {
	case (k == MRd || k == MRdLk) && v.TH():
		return uint8(v.Address() & 0x7f)
	case k == MRd || k == MRdLk || k == MWr:
		return uint8(FirstByteAddress(v.Address(), v.FirstBE()) & 0x7f)
	}
	return 0
}
