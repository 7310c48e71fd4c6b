package switching

// RFC 1624 incremental checksum update, HC' = ~(~HC + ~m + m'), over 16-bit
// words as they lie in memory. One's complement sums do not depend on byte
// order, so the words are read little-endian exactly like the XDP program
// does on bpfel; the bytes written are the same either way.

func csumFold(s uint32) uint16 {
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return uint16(s)
}

// words is the sum of the two 16-bit words of v; notWords of ^v.
func words(v uint32) uint32    { return v&0xffff + v>>16 }
func notWords(v uint32) uint32 { return words(^v) }

// Checksum returns the Internet checksum (RFC 1071) of b, seeded with sum:
// for verifying headers in tests and for building frames.
func Checksum(b []byte, sum uint32) uint16 {
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return ^csumFold(sum)
}
