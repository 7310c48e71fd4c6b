package encap

// Layers says where each layer of a frame starts, as Walk found it:
// offsets from the frame's first byte, no copies. A layer the frame does
// not have (or that Walk did not reach) has offset 0.
type Layers struct {
	Encap     Encap  // how the frame carries TLPs; EncapNone when it does not
	EtherType uint16 // the EtherType after the tags
	Tags      int    // VLAN tags walked, 0..MaxVLANTags; tag i starts at EthTypeOffset + i*VLANTagLen
	Net       int    // first byte after the EtherType (IPv4 header, or the dxpu header on raw Ethernet)
	IPv4      int    // checked IPv4 header
	UDP       int    // UDP header of a dxpu-udp or NetTLP datagram
	Payload   int    // the dxpu or NetTLP header: where the encapsulated data starts
	UDPEnd    int    // end of the UDP datagram by its length field (may exceed the frame)
}

// Walk finds where the dxpu or NetTLP data of an Ethernet frame starts:
// it walks the Ethernet header, up to MaxVLANTags tags (TPID 0x8100,
// 0x88a8 or 0x9100, outermost first), and either EtherType 0x88B5 or
// IPv4/UDP to cfg's dxpu port or a NetTLP port. It checks the IPv4 and UDP
// headers as the package documentation says, not what follows them
// (ParseFrame does). A frame that carries no TLPs walks with EncapNone and
// no error. On error the Layers hold what was walked before the fault
// (Net is 0 for a fault in the Ethernet header or tags). A nil cfg means
// the defaults. It allocates nothing unless it fails.
func Walk(frame []byte, cfg *Config) (Layers, error) {
	if cfg == nil {
		cfg = &defaultConfig
	}
	var l Layers
	err := l.walk(frame, cfg)
	return l, err
}

// walk is Walk into l, which must be zero: ParseFrame walks into its Frame
// so that nothing is copied.
func (l *Layers) walk(frame []byte, cfg *Config) error {
	if len(frame) < EthHeaderLen {
		return ferr(0, "eth", ErrShort, "frame of %d bytes, an Ethernet header needs 14", len(frame))
	}
	off := EthTypeOffset
	et := Ethernet(frame).Type()
	for IsVLANTPID(et) {
		if l.Tags == MaxVLANTags {
			l.Tags = 0
			return ferr(off, "vlan", ErrVLAN, "more than %d stacked tags", MaxVLANTags)
		}
		if off+VLANTagLen+2 > len(frame) {
			l.Tags = 0
			return ferr(off, "vlan", ErrShort, "tag cut by the frame end (%d bytes)", len(frame))
		}
		l.Tags++
		off += VLANTagLen
		et = be16(frame[off:])
	}
	l.EtherType, l.Net = et, off+2
	switch et {
	case EtherType:
		l.Encap, l.Payload = EncapDxpuEth, l.Net
	case EtherTypeIPv4:
		return l.walkIPv4(frame, cfg)
	}
	return nil
}

// walkIPv4 checks the IPv4 header at l.Net and, for a UDP datagram to a
// port that carries TLPs, its UDP header.
func (l *Layers) walkIPv4(b []byte, cfg *Config) error {
	off := l.Net
	if off+IPv4HeaderLen > len(b) {
		return ferr(off, "ipv4", ErrShort, "header cut: %d bytes left, need 20", len(b)-off)
	}
	ip := IPv4(b[off:])
	if v := ip.Version(); v != IPv4Version {
		return ferr(off+IPv4VersionIHLOffset, "ipv4.version", ErrIPv4Header, "version %d under EtherType 0x0800", v)
	}
	ihl := ip.HeaderLen()
	if ihl < IPv4HeaderLen {
		return ferr(off+IPv4VersionIHLOffset, "ipv4.ihl", ErrIPv4Header, "header length %d, minimum 20", ihl)
	}
	if off+ihl > len(b) {
		return ferr(off+IPv4VersionIHLOffset, "ipv4.ihl", ErrShort, "header length %d, %d bytes left", ihl, len(b)-off)
	}
	total := ip.TotalLen()
	if total < ihl {
		return ferr(off+IPv4TotalLenOffset, "ipv4.total_length", ErrIPv4Header, "total length %d shorter than header length %d", total, ihl)
	}
	if !cfg.SkipIPv4Checksum && !ip.ChecksumValid() {
		return ferr(off+IPv4ChecksumOffset, "ipv4.checksum", ErrIPv4Checksum, "checksum %#04x does not verify (want %#04x)",
			ip.Checksum(), ^checksum2(ip[:IPv4ChecksumOffset], ip[IPv4ChecksumOffset+2:ihl]))
	}
	l.IPv4 = off
	if ip.Protocol() != IPProtoUDP || ip.FragmentOffset() != 0 { // a later fragment has no UDP header
		return nil
	}
	l4 := off + ihl
	if l4+UDPHeaderLen > len(b) {
		return ferr(l4, "udp", ErrShort, "header cut: %d bytes left, need 8", len(b)-l4)
	}
	if total < ihl+UDPHeaderLen {
		return ferr(off+IPv4TotalLenOffset, "ipv4.total_length", ErrIPv4Header, "total length %d leaves no room for a UDP header", total)
	}
	udp := UDP(b[l4:])
	var enc Encap
	switch sport, dport := udp.SrcPort(), udp.DstPort(); {
	case dport == cfg.udpPort():
		enc = EncapDxpuUDP
	case cfg.isNetTLPPort(dport) || cfg.isNetTLPPort(sport):
		enc = EncapNetTLP
	default:
		return nil
	}
	if ip.MoreFragments() {
		return ferr(off+IPv4FlagsFragOffset, "ipv4.flags", ErrFragment, "more-fragments set on a %s datagram", enc)
	}
	ulen := udp.Length()
	if ulen < UDPHeaderLen || l4+ulen > off+total {
		return ferr(l4+UDPLengthOffset, "udp.length", ErrUDPLength, "UDP length %d, IPv4 leaves %d bytes", ulen, total-ihl)
	}
	l.Encap, l.UDP, l.Payload, l.UDPEnd = enc, l4, l4+UDPHeaderLen, l4+ulen
	return nil
}
