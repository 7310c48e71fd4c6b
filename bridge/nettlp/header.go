package nettlp

import (
	"encoding/binary"
	"fmt"

	"github.com/dxpu/dxpu/tlp/encap"
)

// Ports and header size of NetTLP's UDP encapsulation.
const (
	// HeaderLen is the NetTLP header: 16-bit sequence, 32-bit timestamp.
	HeaderLen = encap.NetTLPHeaderLen
	// PortBase is the UDP port of tag 0; tag t uses PortBase + (t & 0xf)
	// on both ends.
	PortBase = encap.NetTLPPortBase
	// MaxTags is the number of tag ports NetTLP's adapter and libtlp use.
	MaxTags = 16
	// MaxDatagram bounds a NetTLP datagram this package reads: header, a
	// 4DW TLP header, 4096 bytes of payload and a digest, with room to spare.
	MaxDatagram = 8192
)

// Port returns the UDP port NetTLP uses for a TLP with this tag: libtlp and
// the adapter take the low four bits of Tag[7:0] (tag 0x44 travels on
// 0x3004 in the captures).
func Port(tag uint16) uint16 { return PortBase + tag&0xf }

// TLPTag returns Tag[7:0] of a request or completion, the field that picks
// the NetTLP port; 0 for bytes too short to hold it.
func TLPTag(tlp []byte) uint16 {
	if len(tlp) < 12 {
		return 0
	}
	if typ := tlp[0] & 0x1f; typ == 0b01010 || typ == 0b01011 { // Cpl*
		return uint16(tlp[10])
	}
	return uint16(tlp[6])
}

// Header is a view of the 6-byte NetTLP header at the start of a datagram.
type Header []byte

// Seq returns the sequence number (bytes 0-1, big-endian).
func (h Header) Seq() uint16 { return binary.BigEndian.Uint16(h) }

// Timestamp returns the timestamp (bytes 2-5, big-endian).
func (h Header) Timestamp() uint32 { return binary.BigEndian.Uint32(h[2:]) }

// Put writes seq and timestamp.
func (h Header) Put(seq uint16, ts uint32) {
	binary.BigEndian.PutUint16(h, seq)
	binary.BigEndian.PutUint32(h[2:], ts)
}

// SplitDatagram separates a NetTLP datagram into its header and TLP bytes.
// It checks only that both are present: the TLP is decoded by its user.
func SplitDatagram(d []byte) (Header, []byte, error) {
	if len(d) < HeaderLen {
		return nil, nil, fmt.Errorf("%w: datagram of %d bytes, the NetTLP header needs %d", ErrShortDatagram, len(d), HeaderLen)
	}
	if len(d) == HeaderLen {
		return nil, nil, fmt.Errorf("%w: datagram carries a NetTLP header and no TLP", ErrShortDatagram)
	}
	return Header(d[:HeaderLen]), d[HeaderLen:], nil
}
