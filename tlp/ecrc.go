package tlp

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
)

// The ECRC (PCIe Base Specification, "ECRC Rules") is CRC-32 with
// polynomial 04C1 1DB7h and seed FFFF FFFFh over every header and payload
// byte, with two variant bits taken as 1: bit 0 of the Type field (byte 0
// bit 0, which a switch may flip when it turns a CfgRd1 into a CfgRd0) and
// EP (byte 2 bit 6, which a switch may set when it poisons the TLP). Bytes
// enter the CRC in wire order, bit 0 of each byte first; the remainder is
// complemented and bit-swapped within each byte, and the byte that holds
// remainder bits 31:24 is sent first. Taken together this is exactly the
// IEEE 802.3 frame check sequence: the four digest bytes are
// crc32.ChecksumIEEE(masked TLP) in little-endian byte order. Read as a
// big-endian DW (how View.ECRC and Packet.ECRC show it), the digest is
// therefore bits.ReverseBytes32 of the Go checksum.

// ComputeECRC returns the ECRC of a TLP's header and payload (tlp must hold
// exactly header + payload, without any digest), as the big-endian DW that
// goes in the digest. It allocates nothing.
func ComputeECRC(tlp []byte) uint32 {
	if len(tlp) < 3 {
		return bits.ReverseBytes32(crc32.ChecksumIEEE(tlp))
	}
	// The first three bytes, with the variant bits forced to 1, go
	// through the table by hand (a local array handed to crc32.Update
	// would escape); crc32.Update then takes the rest.
	tab := crc32.IEEETable
	c := ^uint32(0)
	c = tab[byte(c)^(tlp[0]|0x01)] ^ c>>8 // Type[0] variant bit
	c = tab[byte(c)^tlp[1]] ^ c>>8
	c = tab[byte(c)^(tlp[2]|0x40)] ^ c>>8 // EP variant bit
	c = crc32.Update(^c, tab, tlp[3:])
	return bits.ReverseBytes32(c)
}

// putECRC writes the digest for tlp[:n] at tlp[n:n+4].
func putECRC(tlp []byte, n int) {
	binary.BigEndian.PutUint32(tlp[n:], ComputeECRC(tlp[:n]))
}

// CheckECRC reports whether a TLP with TD set carries the right digest. It
// returns true for TLPs without TD. v must be whole (as returned by Parse).
func (v View) CheckECRC() bool {
	if !v.TD() {
		return true
	}
	n := v.HeaderLen() + v.PayloadLen()
	if n+4 > len(v) {
		return false
	}
	return ComputeECRC(v[:n]) == binary.BigEndian.Uint32(v[n:])
}
