package encap

import "encoding/binary"

// NetTLP's UDP ports and header: both ends use port 0x3000 + tag; the
// header is a 16-bit sequence number and a 32-bit timestamp, big-endian.
const (
	NetTLPPortBase        = 0x3000
	NetTLPPortMax         = 0x30ff
	NetTLPSeqOffset       = 0
	NetTLPTimestampOffset = 2
	NetTLPHeaderLen       = 6
)

// NetTLPHeader is a zero-copy view of a NetTLP header: the UDP payload,
// the TLP at NetTLPHeaderLen. Accessors need len(h) >= NetTLPHeaderLen.
type NetTLPHeader []byte

// Seq returns the sequence number.
func (h NetTLPHeader) Seq() uint16 { return binary.BigEndian.Uint16(h[NetTLPSeqOffset:]) }

// Timestamp returns the timestamp.
func (h NetTLPHeader) Timestamp() uint32 {
	return binary.BigEndian.Uint32(h[NetTLPTimestampOffset:])
}
