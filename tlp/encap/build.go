package encap

import (
	"encoding/binary"
	"net/netip"
)

// L2 is the Ethernet addressing of a frame to build.
type L2 struct {
	Dst, Src [6]byte
	Tagged   bool   // insert an 802.1Q tag (TPID 0x8100)
	VLAN     uint16 // VLAN ID, 12 bits (when Tagged)
	PCP      uint8  // priority code point, 3 bits (when Tagged)
	// OuterTPID, when not 0, puts a second tag before the 802.1Q one
	// (QinQ; needs Tagged): EtherTypeQinQ for an 802.1ad S-tag,
	// EtherTypeVLAN for stacked 802.1Q, or EtherTypeQinQv1.
	OuterTPID uint16
	OuterVLAN uint16 // outer VLAN ID, 12 bits (when OuterTPID is set)
	OuterPCP  uint8  // outer priority code point, 3 bits
}

// HeaderLen returns the bytes l2 writes: the Ethernet header and its tags.
func (l2 *L2) HeaderLen() int {
	n := EthHeaderLen
	if l2.Tagged {
		n += VLANTagLen
	}
	if l2.OuterTPID != 0 {
		n += VLANTagLen
	}
	return n
}

// L3 is the IPv4/UDP addressing of a frame to build.
type L3 struct {
	Src, Dst netip.Addr // IPv4 addresses
	SrcPort  uint16     // dxpu-udp: 0 = DefaultUDPPort; NetTLP: 0 = 0x3000 + tag
	DstPort  uint16     // dxpu-udp: 0 = DefaultUDPPort; NetTLP: 0 = 0x3000 + tag
	TTL      uint8      // 0 = 64
	TOS      uint8      // DSCP and ECN
	ID       uint16     // IPv4 identification
}

// Fields are the dxpu header fields a builder writes; version, TLP count
// and body length follow from the contents.
type Fields struct {
	Type     MsgType // 0 = MsgTLP
	Flags    uint8   // FlagAck, FlagCredit, FlagSack
	PairID   uint32  // 24 bits
	Seq      uint32
	Ack      uint32
	Sack     uint32
	Limits   [NumCreditTypes]uint32 // cumulative credit limits, indexed by CreditType
	Infinite uint8                  // bit t: credit type t infinite
}

// Fields reads the header fields back (h must hold HeaderLen bytes).
func (h Header) Fields() Fields {
	f := Fields{
		Type: h.Type(), Flags: h.Flags(), PairID: h.PairID(),
		Seq: h.Seq(), Ack: h.Ack(), Sack: h.Sack(), Infinite: h.InfiniteMask() & (1<<NumCreditTypes - 1),
	}
	for t := CreditPH; t < NumCreditTypes; t++ {
		f.Limits[t] = h.CreditLimit(t)
	}
	return f
}

// put writes the fixed header for n TLPs and a body of bodyLen bytes.
func (f *Fields) put(h Header, n, bodyLen int) {
	typ := f.Type
	if typ == 0 {
		typ = MsgTLP
	}
	h.SetVersionFlags(Version, f.Flags)
	h.SetType(typ)
	h.SetPairID(f.PairID)
	h.SetCount(n)
	h.SetBodyLen(bodyLen)
	h.SetSeq(f.Seq)
	h.SetAck(f.Ack)
	h.SetSack(f.Sack)
	h[HeaderInfiniteOffset], h[HeaderReservedOffset] = 0, 0
	for t := CreditPH; t < NumCreditTypes; t++ {
		h.SetCreditLimit(t, f.Limits[t], f.Infinite&(1<<t) != 0)
	}
}

// MaxBodyLen is the largest dxpu body (16-bit body length).
const MaxBodyLen = 0xffff

// AppendDxpuEth appends a dxpu frame on raw Ethernet carrying tlps (a TLP
// message; Fields.Type must be MsgTLP or 0) and returns the extended
// slice, padded to MinFrameLen. It allocates only if dst lacks capacity.
func AppendDxpuEth(dst []byte, l2 *L2, f *Fields, tlps [][]byte) ([]byte, error) {
	return appendDxpu(dst, l2, nil, f, tlps, nil)
}

// AppendDxpuUDP is AppendDxpuEth over IPv4/UDP.
func AppendDxpuUDP(dst []byte, l2 *L2, l3 *L3, f *Fields, tlps [][]byte) ([]byte, error) {
	return appendDxpu(dst, l2, l3, f, tlps, nil)
}

// AppendDxpuMsg appends a dxpu frame without TLPs (ACK, NAK, CREDIT, or a
// CONTROL message whose encoded body is given). l3 nil means raw Ethernet.
func AppendDxpuMsg(dst []byte, l2 *L2, l3 *L3, f *Fields, body []byte) ([]byte, error) {
	return appendDxpu(dst, l2, l3, f, nil, body)
}

func appendDxpu(dst []byte, l2 *L2, l3 *L3, f *Fields, tlps [][]byte, body []byte) ([]byte, error) {
	typ := f.Type
	if typ == 0 {
		typ = MsgTLP
	}
	if typ < MsgTLP || typ > MsgControl {
		return dst, ferr(1, "dxpu.type", ErrMsgType, "message type %d", typ)
	}
	if typ == MsgTLP && body != nil || typ != MsgTLP && len(tlps) != 0 {
		return dst, ferr(1, "dxpu.type", ErrTLPCount, "%v message with %d TLPs and %d body bytes", typ, len(tlps), len(body))
	}
	if len(tlps) > MaxTLPs {
		return dst, ferr(5, "dxpu.count", ErrTooLarge, "%d TLPs, at most %d per frame", len(tlps), MaxTLPs)
	}
	bodyLen := len(body) + 2*len(tlps)
	for i, t := range tlps {
		if len(t) < 12 || len(t)%4 != 0 {
			return dst, ferr(HeaderLen+2*i, "dxpu.tlp_len", ErrTLPLength, "TLP %d is %d bytes, want a multiple of 4 of at least 12", i, len(t))
		}
		bodyLen += len(t)
	}
	if bodyLen > MaxBodyLen {
		return dst, ferr(6, "dxpu.body_len", ErrTooLarge, "body of %d bytes, at most %d", bodyLen, MaxBodyLen)
	}
	start := len(dst)
	dst, pay, err := appendHeaders(dst, l2, l3, HeaderLen+bodyLen, DefaultUDPPort, DefaultUDPPort)
	if err != nil {
		return dst, err
	}
	dst = append(dst, make([]byte, HeaderLen)...) // no allocation: the compiler extends dst in place
	h := Header(dst[pay : pay+HeaderLen])
	f.put(h, len(tlps), bodyLen)
	for _, t := range tlps {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(t)))
	}
	for _, t := range tlps {
		dst = append(dst, t...)
	}
	dst = append(dst, body...)
	return pad(dst, start), nil
}

// AppendNetTLP appends a NetTLP frame: IPv4/UDP (ports 0x3000 + tag on
// both sides unless l3 sets them), the 6-byte header with seq and ts, and
// one TLP, padded to MinFrameLen.
func AppendNetTLP(dst []byte, l2 *L2, l3 *L3, seq uint16, ts uint32, tlp []byte) ([]byte, error) {
	if len(tlp) == 0 {
		return dst, ferr(0, "nettlp.tlp", ErrNetTLP, "no TLP to send")
	}
	port := NetTLPPort(tlp)
	start := len(dst)
	dst, _, err := appendHeaders(dst, l2, l3, NetTLPHeaderLen+len(tlp), port, port)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint16(dst, seq)
	dst = binary.BigEndian.AppendUint32(dst, ts)
	dst = append(dst, tlp...)
	return pad(dst, start), nil
}

// NetTLPPort returns the UDP port NetTLP uses for tlp: 0x3000 plus the low
// 8 bits of its tag (Tag[7:0] is DW1 byte 2 of a request, DW2 byte 2 of a
// completion). A TLP too short to hold a tag gets 0x3000.
func NetTLPPort(tlp []byte) uint16 {
	if len(tlp) < 12 {
		return NetTLPPortBase
	}
	if typ := tlp[0] & 0x1f; typ == 0b01010 || typ == 0b01011 { // completions
		return NetTLPPortBase + uint16(tlp[10])
	}
	return NetTLPPortBase + uint16(tlp[6])
}

// appendHeaders appends Ethernet (+VLAN) and, with l3, IPv4/UDP headers
// for a payload of n bytes; it returns the slice and the payload offset.
// On error dst is returned unchanged.
func appendHeaders(dst []byte, l2 *L2, l3 *L3, n int, defSrc, defDst uint16) ([]byte, int, error) {
	if l2.OuterTPID != 0 && (!IsVLANTPID(l2.OuterTPID) || !l2.Tagged) {
		return dst, 0, ferr(EthTypeOffset, "vlan", ErrVLAN, "outer TPID %#04x with Tagged %v: want 0x8100, 0x88a8 or 0x9100 over an 802.1Q tag", l2.OuterTPID, l2.Tagged)
	}
	if l3 != nil {
		if !l3.Src.Is4() || !l3.Dst.Is4() {
			return dst, 0, ferr(0, "ipv4.addr", ErrIPv4Header, "addresses %v -> %v are not IPv4", l3.Src, l3.Dst)
		}
		if IPv4HeaderLen+UDPHeaderLen+n > 0xffff {
			return dst, 0, ferr(0, "ipv4.total_length", ErrTooLarge, "datagram of %d bytes, at most 65535", IPv4HeaderLen+UDPHeaderLen+n)
		}
	}
	dst = append(dst, l2.Dst[:]...)
	dst = append(dst, l2.Src[:]...)
	if l2.OuterTPID != 0 {
		dst = appendVLAN(dst, l2.OuterTPID, l2.OuterPCP, l2.OuterVLAN)
	}
	if l2.Tagged {
		dst = appendVLAN(dst, EtherTypeVLAN, l2.PCP, l2.VLAN)
	}
	if l3 == nil {
		dst = binary.BigEndian.AppendUint16(dst, EtherType)
		return dst, len(dst), nil
	}
	dst = binary.BigEndian.AppendUint16(dst, EtherTypeIPv4)
	ip := len(dst)
	ttl := l3.TTL
	if ttl == 0 {
		ttl = 64
	}
	src, dstIP := l3.Src.As4(), l3.Dst.As4()
	dst = append(dst, IPv4Version<<4|IPv4HeaderLen/4, l3.TOS)
	dst = binary.BigEndian.AppendUint16(dst, uint16(IPv4HeaderLen+UDPHeaderLen+n))
	dst = binary.BigEndian.AppendUint16(dst, l3.ID)
	dst = binary.BigEndian.AppendUint16(dst, IPv4FlagDF) // no fragment
	dst = append(dst, ttl, IPProtoUDP, 0, 0)             // checksum below
	dst = append(dst, src[:]...)
	dst = append(dst, dstIP[:]...)
	binary.BigEndian.PutUint16(dst[ip+IPv4ChecksumOffset:], checksum(dst[ip:ip+IPv4HeaderLen]))
	sp, dp := l3.SrcPort, l3.DstPort
	if sp == 0 {
		sp = defSrc
	}
	if dp == 0 {
		dp = defDst
	}
	dst = binary.BigEndian.AppendUint16(dst, sp)
	dst = binary.BigEndian.AppendUint16(dst, dp)
	dst = binary.BigEndian.AppendUint16(dst, uint16(UDPHeaderLen+n))
	dst = append(dst, 0, 0) // UDP checksum 0: none (allowed over IPv4)
	return dst, len(dst), nil
}

func pad(dst []byte, start int) []byte {
	for len(dst)-start < MinFrameLen {
		dst = append(dst, 0)
	}
	return dst
}

// FrameOverhead returns the bytes a dxpu frame adds around its TLPs, not
// counting the 2-byte length of each TLP: Ethernet (+4 with a VLAN tag),
// IPv4 and UDP when udp, and the dxpu header. It turns a frame size into
// TLP bytes (xdp's benchmark sizes its frames with it); a QinQ frame adds
// another VLANTagLen (see L2.HeaderLen).
func FrameOverhead(tagged, udp bool) int {
	n := EthHeaderLen + HeaderLen
	if tagged {
		n += VLANTagLen
	}
	if udp {
		n += IPv4HeaderLen + UDPHeaderLen
	}
	return n
}
