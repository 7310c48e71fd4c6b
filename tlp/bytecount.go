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

// RequestBytes returns the byte count of a memory, IO or config request:
// what its completions' first Byte Count must say. A memory read with TH
// set carries a steering tag in the byte-enable fields and reads whole DWs.
func (v View) RequestBytes() int {
	k := v.Kind()
	if v.TH() && (k == MRd || k == MRdLk) {
		return 4 * v.Length()
	}
	return ByteCount(v.Length(), v.FirstBE(), v.LastBE())
}

// RequestLowerAddress returns the Lower Address the first completion of a
// memory read request v carries: the low 7 bits of its first enabled byte.
func (v View) RequestLowerAddress() uint8 {
	k := v.Kind()
	if v.TH() && (k == MRd || k == MRdLk) {
		return uint8(v.Address() & 0x7f)
	}
	return uint8(FirstByteAddress(v.Address(), v.FirstBE()) & 0x7f)
}
