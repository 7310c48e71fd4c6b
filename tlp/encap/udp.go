package encap

import "encoding/binary"

// UDP header offsets and size (RFC 768).
const (
	UDPSrcPortOffset  = 0
	UDPDstPortOffset  = 2
	UDPLengthOffset   = 4 // header and payload, bytes
	UDPChecksumOffset = 6 // 0: none (allowed over IPv4)
	UDPHeaderLen      = 8
)

// UDP is a zero-copy view of a UDP header. Accessors need len(u) >=
// UDPHeaderLen; the caller checks.
type UDP []byte

// SrcPort returns the source port.
func (u UDP) SrcPort() uint16 { return binary.BigEndian.Uint16(u[UDPSrcPortOffset:]) }

// DstPort returns the destination port.
func (u UDP) DstPort() uint16 { return binary.BigEndian.Uint16(u[UDPDstPortOffset:]) }

// Length returns the length field: header and payload in bytes.
func (u UDP) Length() int { return int(binary.BigEndian.Uint16(u[UDPLengthOffset:])) }

// Checksum returns the checksum field (0: none).
func (u UDP) Checksum() uint16 { return binary.BigEndian.Uint16(u[UDPChecksumOffset:]) }
