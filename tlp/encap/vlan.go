package encap

import "encoding/binary"

// VLAN tag offsets and sizes. A tag is the TPID that takes the EtherType's
// place and the TCI; the EtherType (or the next tag's TPID) follows it.
const (
	VLANTPIDOffset = 0
	VLANTCIOffset  = 2
	VLANTagLen     = 4
	// MaxVLANTags is the number of stacked tags ParseFrame accepts: an
	// outer S-tag and an inner C-tag (QinQ).
	MaxVLANTags = 2
)

// TCI bits.
const (
	VLANVIDMask  = 0x0fff // VLAN ID, bits 11:0
	VLANDEIBit   = 0x1000 // drop eligible, bit 12
	VLANPCPShift = 13     // priority code point, bits 15:13
)

// IsVLANTPID reports whether an EtherType field value announces a VLAN tag
// ParseFrame walks: 802.1Q, 802.1ad or the pre-standard 0x9100.
func IsVLANTPID(t uint16) bool {
	return t == EtherTypeVLAN || t == EtherTypeQinQ || t == EtherTypeQinQv1
}

// VLAN is a zero-copy view of one VLAN tag, starting at its TPID (offset
// 12 of a frame for the outermost tag, 16 for the next). Accessors need
// len(v) >= VLANTagLen; the caller checks.
type VLAN []byte

// TPID returns the tag protocol identifier (0x8100, 0x88a8, 0x9100).
func (v VLAN) TPID() uint16 { return binary.BigEndian.Uint16(v[VLANTPIDOffset:]) }

// TCI returns the tag control information: PCP, DEI and VID.
func (v VLAN) TCI() uint16 { return binary.BigEndian.Uint16(v[VLANTCIOffset:]) }

// VID returns the 12-bit VLAN ID.
func (v VLAN) VID() uint16 { return v.TCI() & VLANVIDMask }

// PCP returns the 3-bit priority code point.
func (v VLAN) PCP() uint8 { return uint8(v.TCI() >> VLANPCPShift) }

// DEI reports the drop eligible indicator.
func (v VLAN) DEI() bool { return v.TCI()&VLANDEIBit != 0 }

// Next returns the field after the tag: the EtherType, or the next tag's
// TPID (len(v) >= VLANTagLen+2).
func (v VLAN) Next() uint16 { return binary.BigEndian.Uint16(v[VLANTagLen:]) }

// SetTPID writes the TPID.
func (v VLAN) SetTPID(t uint16) { binary.BigEndian.PutUint16(v[VLANTPIDOffset:], t) }

// SetTCI writes the whole TCI.
func (v VLAN) SetTCI(tci uint16) { binary.BigEndian.PutUint16(v[VLANTCIOffset:], tci) }

// SetVID replaces the VLAN ID and keeps PCP and DEI (vid's bits above 11
// are dropped).
func (v VLAN) SetVID(vid uint16) {
	v[VLANTCIOffset] = v[VLANTCIOffset]&0xf0 | byte(vid>>8)&0x0f
	v[VLANTCIOffset+1] = byte(vid)
}

// appendVLAN appends a tag.
func appendVLAN(dst []byte, tpid uint16, pcp uint8, vid uint16) []byte {
	dst = binary.BigEndian.AppendUint16(dst, tpid)
	return binary.BigEndian.AppendUint16(dst, uint16(pcp&7)<<VLANPCPShift|vid&VLANVIDMask)
}
