package encap

import "encoding/binary"

// EtherType values of the frames this package reads and writes, besides
// dxpu's own (EtherType).
const (
	EtherTypeIPv4   = 0x0800
	EtherTypeVLAN   = 0x8100 // 802.1Q tag (C-tag), or an outer tag of stacked 802.1Q
	EtherTypeQinQ   = 0x88a8 // 802.1ad outer tag (S-tag)
	EtherTypeQinQv1 = 0x9100 // pre-standard outer tag
)

// Ethernet II header offsets and sizes (IEEE 802.3, no FCS).
const (
	EthDstOffset  = 0  // destination MAC
	EthSrcOffset  = 6  // source MAC
	EthTypeOffset = 12 // EtherType, or the TPID of the first VLAN tag
	EthAddrLen    = 6
	EthHeaderLen  = 14
	// MinFrameLen is the Ethernet minimum without the FCS; builders pad
	// shorter frames with zeros.
	MinFrameLen = 60
)

// Ethernet is a zero-copy view of an Ethernet header: the first bytes of a
// frame. Accessors need len(e) >= EthHeaderLen; the caller checks.
type Ethernet []byte

// Dst returns the destination MAC (a slice of the frame).
func (e Ethernet) Dst() []byte { return e[EthDstOffset:EthSrcOffset:EthSrcOffset] }

// Src returns the source MAC (a slice of the frame).
func (e Ethernet) Src() []byte { return e[EthSrcOffset:EthTypeOffset:EthTypeOffset] }

// Type returns the EtherType field: the payload's type, or a VLAN TPID.
func (e Ethernet) Type() uint16 { return binary.BigEndian.Uint16(e[EthTypeOffset:]) }

// SetType writes the EtherType field.
func (e Ethernet) SetType(t uint16) { binary.BigEndian.PutUint16(e[EthTypeOffset:], t) }
