package encap

import (
	"encoding/binary"
	"net/netip"
)

// IPv4 header offsets and sizes (RFC 791).
const (
	IPv4VersionIHLOffset = 0  // version (bits 7:4), header length in 32-bit words (bits 3:0)
	IPv4TOSOffset        = 1  // DSCP and ECN
	IPv4TotalLenOffset   = 2  // header and data, bytes
	IPv4IDOffset         = 4  // identification
	IPv4FlagsFragOffset  = 6  // flags (bits 15:13) and fragment offset (bits 12:0, 8-byte units)
	IPv4TTLOffset        = 8  // time to live
	IPv4ProtocolOffset   = 9  // payload protocol
	IPv4ChecksumOffset   = 10 // header checksum (RFC 1071)
	IPv4SrcOffset        = 12 // source address
	IPv4DstOffset        = 16 // destination address
	IPv4AddrLen          = 4
	// IPv4HeaderLen is the header without options (IHL 5): the least a
	// header has, and what the builders write.
	IPv4HeaderLen = 20
	IPv4Version   = 4
	IPProtoUDP    = 17
)

// IPv4IHLMask masks the header length (in 32-bit words) out of byte 0.
const IPv4IHLMask = 0x0f

// Bits of the flags and fragment offset field.
const (
	IPv4FlagDF         = 0x4000 // don't fragment
	IPv4FlagMF         = 0x2000 // more fragments
	IPv4FragOffsetMask = 0x1fff // fragment offset
)

// IPv4 is a zero-copy view of an IPv4 header. Accessors need len(ip) >=
// IPv4HeaderLen, and Options len(ip) >= HeaderLen(); the caller checks.
type IPv4 []byte

// Version returns the version nibble (4 for IPv4).
func (ip IPv4) Version() uint8 { return ip[IPv4VersionIHLOffset] >> 4 }

// HeaderLen returns the header length in bytes (IHL x 4, options included).
func (ip IPv4) HeaderLen() int { return int(ip[IPv4VersionIHLOffset]&IPv4IHLMask) * 4 }

// TOS returns the DSCP and ECN byte.
func (ip IPv4) TOS() uint8 { return ip[IPv4TOSOffset] }

// TotalLen returns the datagram's length in bytes, header included.
func (ip IPv4) TotalLen() int { return int(binary.BigEndian.Uint16(ip[IPv4TotalLenOffset:])) }

// ID returns the identification field.
func (ip IPv4) ID() uint16 { return binary.BigEndian.Uint16(ip[IPv4IDOffset:]) }

// FlagsFrag returns the flags and fragment offset field (IPv4FlagDF,
// IPv4FlagMF, IPv4FragOffsetMask).
func (ip IPv4) FlagsFrag() uint16 { return binary.BigEndian.Uint16(ip[IPv4FlagsFragOffset:]) }

// MoreFragments reports the MF flag.
func (ip IPv4) MoreFragments() bool { return ip.FlagsFrag()&IPv4FlagMF != 0 }

// FragmentOffset returns the fragment offset in 8-byte units: not 0 on
// every fragment but the first.
func (ip IPv4) FragmentOffset() uint16 { return ip.FlagsFrag() & IPv4FragOffsetMask }

// TTL returns the time to live.
func (ip IPv4) TTL() uint8 { return ip[IPv4TTLOffset] }

// Protocol returns the payload's protocol number (IPProtoUDP for UDP).
func (ip IPv4) Protocol() uint8 { return ip[IPv4ProtocolOffset] }

// Checksum returns the header checksum field.
func (ip IPv4) Checksum() uint16 { return binary.BigEndian.Uint16(ip[IPv4ChecksumOffset:]) }

// Src returns the source address bytes (a slice of the header).
func (ip IPv4) Src() []byte { return ip[IPv4SrcOffset:IPv4DstOffset:IPv4DstOffset] }

// Dst returns the destination address bytes (a slice of the header).
func (ip IPv4) Dst() []byte {
	return ip[IPv4DstOffset : IPv4DstOffset+IPv4AddrLen : IPv4DstOffset+IPv4AddrLen]
}

// SrcAddr returns the source address.
func (ip IPv4) SrcAddr() netip.Addr { return netip.AddrFrom4([IPv4AddrLen]byte(ip.Src())) }

// DstAddr returns the destination address.
func (ip IPv4) DstAddr() netip.Addr { return netip.AddrFrom4([IPv4AddrLen]byte(ip.Dst())) }

// ChecksumValid reports whether the header checksum verifies over
// HeaderLen() bytes (which ip must hold).
func (ip IPv4) ChecksumValid() bool { return checksum(ip[:ip.HeaderLen()]) == 0 }
