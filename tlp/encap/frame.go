package encap

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Encap names how a frame carries TLPs.
type Encap uint8

// Encapsulations. EncapNone marks a frame that carries no TLP (ARP, IPv6,
// UDP to other ports, ...).
const (
	EncapNone Encap = iota
	EncapNetTLP
	EncapDxpuEth
	EncapDxpuUDP
)

var encapNames = [...]string{EncapNone: "none", EncapNetTLP: "nettlp", EncapDxpuEth: "dxpu-eth", EncapDxpuUDP: "dxpu-udp"}

// String returns "nettlp", "dxpu-eth", "dxpu-udp" or "none".
func (e Encap) String() string {
	if int(e) < len(encapNames) {
		return encapNames[e]
	}
	return fmt.Sprintf("Encap(%d)", uint8(e))
}

// ParseEncap returns the Encap named s ("nettlp", "dxpu-eth", "dxpu-udp").
func ParseEncap(s string) (Encap, error) {
	for e := EncapNetTLP; e <= EncapDxpuUDP; e++ {
		if encapNames[e] == s {
			return e, nil
		}
	}
	return EncapNone, fmt.Errorf("encap: unknown encapsulation %q (want nettlp, dxpu-eth or dxpu-udp)", s)
}

// EtherType values ParseFrame understands besides dxpu's.
const (
	EtherTypeIPv4   = 0x0800
	EtherTypeVLAN   = 0x8100 // 802.1Q C-tag
	EtherTypeQinQ   = 0x88a8 // 802.1ad S-tag
	EtherTypeQinQv1 = 0x9100 // pre-standard S-tag
	// MaxVLANTags is the number of stacked tags ParseFrame accepts.
	MaxVLANTags = 2
)

// Ethernet and IP sizes.
const (
	EthHeaderLen  = 14
	VLANTagLen    = 4
	IPv4HeaderLen = 20
	UDPHeaderLen  = 8
	// MinFrameLen is the Ethernet minimum without the FCS; builders pad
	// shorter frames with zeros.
	MinFrameLen = 60
)

// Frame is a parsed frame: offsets into the frame's bytes, no copies. It is
// a value type; ParseFrame allocates nothing. Accessors of a layer the frame
// does not have return zero values.
type Frame struct {
	b         []byte
	encap     Encap
	nvlan     uint8
	truncated bool
	l3        int // IPv4 header offset, 0 if none
	l4        int // UDP header offset, 0 if none
	hdr       int // dxpu or NetTLP header offset
	tlpOff    int // first TLP
	end       int // declared end of the encapsulated data (may exceed len(b))
	n         int // number of TLPs
	curI      int // cache for sequential TLP(i): index and offset of TLP curI
	curOff    int
}

// ParseFrame parses an Ethernet frame: optional 802.1Q/802.1ad tags, then
// dxpu over EtherType 0x88B5, dxpu over IPv4/UDP to cfg's port, or NetTLP
// over IPv4/UDP. A frame with none of these parses with EncapNone and no
// error. A nil cfg means the defaults. Bytes beyond the declared lengths
// (Ethernet padding) are ignored; declared lengths beyond the frame's end
// (a capture's snap length) mark it truncated unless cfg.RejectTruncated.
// On error the Frame still reports the layers read before the fault
// (addresses, VLANs, Encap) but carries no TLPs.
func ParseFrame(frame []byte, cfg *Config) (Frame, error) {
	if cfg == nil {
		cfg = &defaultConfig
	}
	f := Frame{b: frame}
	if len(frame) < EthHeaderLen {
		return Frame{}, ferr(0, "eth", ErrShort, "frame of %d bytes, an Ethernet header needs 14", len(frame))
	}
	off := 12
	et := be16(frame[off:])
	for et == EtherTypeVLAN || et == EtherTypeQinQ || et == EtherTypeQinQv1 {
		if f.nvlan == MaxVLANTags {
			return Frame{}, ferr(off, "vlan", ErrVLAN, "more than %d stacked tags", MaxVLANTags)
		}
		if off+VLANTagLen+2 > len(frame) {
			return Frame{}, ferr(off, "vlan", ErrShort, "tag cut by the frame end (%d bytes)", len(frame))
		}
		f.nvlan++
		off += VLANTagLen
		et = be16(frame[off:])
	}
	off += 2
	var err error
	switch et {
	case EtherType:
		f.encap = EncapDxpuEth
		f.hdr = off
		err = f.parseDxpu(cfg, -1)
	case EtherTypeIPv4:
		err = f.parseIPv4(cfg, off)
	}
	if err != nil {
		// Keep what identifies the frame (MACs, VLANs, encapsulation,
		// addresses) for the caller's message, but no TLPs.
		f.n, f.truncated = 0, false
	}
	return f, err
}

func (f *Frame) parseIPv4(cfg *Config, off int) error {
	b := f.b
	if off+IPv4HeaderLen > len(b) {
		return ferr(off, "ipv4", ErrShort, "header cut: %d bytes left, need 20", len(b)-off)
	}
	if v := b[off] >> 4; v != 4 {
		return ferr(off, "ipv4.version", ErrIPv4Header, "version %d under EtherType 0x0800", v)
	}
	ihl := int(b[off]&0xf) * 4
	if ihl < IPv4HeaderLen {
		return ferr(off, "ipv4.ihl", ErrIPv4Header, "header length %d, minimum 20", ihl)
	}
	if off+ihl > len(b) {
		return ferr(off, "ipv4.ihl", ErrShort, "header length %d, %d bytes left", ihl, len(b)-off)
	}
	total := int(be16(b[off+2:]))
	if total < ihl {
		return ferr(off+2, "ipv4.total_length", ErrIPv4Header, "total length %d shorter than header length %d", total, ihl)
	}
	if !cfg.SkipIPv4Checksum {
		if s := checksum(b[off : off+ihl]); s != 0 {
			return ferr(off+10, "ipv4.checksum", ErrIPv4Checksum, "checksum %#04x does not verify (want %#04x)",
				be16(b[off+10:]), ^checksum2(b[off:off+10], b[off+12:off+ihl]))
		}
	}
	f.l3 = off
	if b[off+9] != 17 { // not UDP
		return nil
	}
	frag := be16(b[off+6:])
	if frag&0x1fff != 0 { // a later fragment: no UDP header here
		return nil
	}
	l4 := off + ihl
	if l4+UDPHeaderLen > len(b) {
		return ferr(l4, "udp", ErrShort, "header cut: %d bytes left, need 8", len(b)-l4)
	}
	if total < ihl+UDPHeaderLen {
		return ferr(off+2, "ipv4.total_length", ErrIPv4Header, "total length %d leaves no room for a UDP header", total)
	}
	sport, dport := be16(b[l4:]), be16(b[l4+2:])
	var enc Encap
	switch {
	case dport == cfg.udpPort():
		enc = EncapDxpuUDP
	case cfg.isNetTLPPort(dport) || cfg.isNetTLPPort(sport):
		enc = EncapNetTLP
	default:
		return nil
	}
	if frag&0x2000 != 0 {
		return ferr(off+6, "ipv4.flags", ErrFragment, "more-fragments set on a %s datagram", enc)
	}
	ulen := int(be16(b[l4+4:]))
	if ulen < UDPHeaderLen || l4+ulen > off+total {
		return ferr(l4+4, "udp.length", ErrUDPLength, "UDP length %d, IPv4 leaves %d bytes", ulen, total-ihl)
	}
	f.l4, f.hdr, f.encap = l4, l4+UDPHeaderLen, enc
	if enc == EncapNetTLP {
		return f.parseNetTLP(cfg, l4+ulen)
	}
	return f.parseDxpu(cfg, l4+ulen)
}

func (f *Frame) parseNetTLP(cfg *Config, end int) error {
	h := f.hdr
	if end-h < NetTLPHeaderLen {
		return ferr(f.l4+4, "udp.length", ErrNetTLP, "UDP payload of %d bytes, the NetTLP header needs 6", end-h)
	}
	if end-h == NetTLPHeaderLen {
		return ferr(f.l4+4, "udp.length", ErrNetTLP, "datagram carries no TLP after its header")
	}
	if h+NetTLPHeaderLen > len(f.b) {
		return ferr(h, "nettlp", ErrTruncated, "header cut by the frame end (%d bytes)", len(f.b))
	}
	f.tlpOff, f.end, f.n = h+NetTLPHeaderLen, end, 1
	return f.checkTruncated(cfg)
}

func (f *Frame) checkTruncated(cfg *Config) error {
	f.truncated = f.end > len(f.b)
	if f.truncated && cfg.RejectTruncated {
		return ferr(len(f.b), f.encap.String(), ErrTruncated, "lengths declare %d bytes, the frame holds %d", f.end, len(f.b))
	}
	f.curI, f.curOff = 0, f.tlpOff
	return nil
}

// parseDxpu checks the dxpu header at f.hdr; udpEnd is the end of the UDP
// datagram, or -1 on raw Ethernet.
func (f *Frame) parseDxpu(cfg *Config, udpEnd int) error {
	h := f.hdr
	if udpEnd >= 0 && udpEnd-h < HeaderLen {
		return ferr(f.l4+4, "udp.length", ErrUDPLength, "UDP payload of %d bytes, the dxpu header needs 40", udpEnd-h)
	}
	if h+HeaderLen > len(f.b) {
		return ferr(h, "dxpu", ErrShort, "header cut: %d bytes left, need 40", len(f.b)-h)
	}
	hd := Header(f.b[h:])
	end := h + HeaderLen + hd.BodyLen()
	if udpEnd >= 0 && end != udpEnd && hd.Version() == Version {
		return ferr(h+6, "dxpu.body_len", ErrBodyLength, "body length %d, UDP payload after the header is %d", hd.BodyLen(), udpEnd-h-HeaderLen)
	}
	if err := checkDxpu(hd, h); err != nil {
		return err
	}
	f.end = end
	f.tlpOff = h + HeaderLen
	if hd.Type() == MsgTLP {
		f.n = hd.Count()
		f.tlpOff += 2 * f.n
	}
	return f.checkTruncated(cfg)
}

// ParseHeader checks a dxpu header and body: b starts at the header (the
// bytes after EtherType 0x88B5, or a UDP payload) and may run on into
// padding, or stop short of the body's end (a capture's snap length:
// truncated is then true). It returns the header and body as far as b
// holds them, padding excluded. Error offsets count from the header's
// start. It allocates nothing unless it fails.
func ParseHeader(b []byte) (h Header, truncated bool, err error) {
	if len(b) < HeaderLen {
		return nil, false, ferr(0, "dxpu", ErrShort, "header cut: %d bytes, need 40", len(b))
	}
	h = Header(b)
	if err := checkDxpu(h, 0); err != nil {
		return nil, false, err
	}
	end := HeaderLen + h.BodyLen()
	if end > len(b) {
		return h[:len(b):len(b)], true, nil
	}
	return h[:end:end], false, nil
}

// checkDxpu applies the version 1 rules to the header at the start of hd
// (at least HeaderLen bytes; the body may be cut); base is the header's
// offset for error messages.
func checkDxpu(hd Header, base int) error {
	if v := hd.Version(); v != Version {
		return ferr(base, "dxpu.version", ErrVersion, "version %d, want %d", v, Version)
	}
	mt := hd.Type()
	if mt < MsgTLP || mt > MsgControl {
		return ferr(base+1, "dxpu.type", ErrMsgType, "message type %d", mt)
	}
	n, body := hd.Count(), hd.BodyLen()
	if mt != MsgTLP {
		if n != 0 {
			return ferr(base+5, "dxpu.count", ErrTLPCount, "%d TLPs in a %s message, want 0", n, mt)
		}
		return nil
	}
	if 2*n > body {
		return ferr(base+5, "dxpu.count", ErrTLPCount, "%d TLPs need a %d-byte length table, body length is %d", n, 2*n, body)
	}
	if n == 0 && body != 0 {
		return ferr(base+6, "dxpu.body_len", ErrTLPLength, "body length %d in a TLP message without TLPs", body)
	}
	sum := 0
	for i := 0; i < n; i++ {
		e := HeaderLen + 2*i
		if e+2 > len(hd) {
			break // table cut by the capture: the TLPs it describes are truncated
		}
		l := int(be16(hd[e:]))
		if l < 12 || l%4 != 0 {
			return ferr(base+e, fmt.Sprintf("dxpu.tlp_len[%d]", i), ErrTLPLength, "length %d, want a multiple of 4 of at least 12", l)
		}
		sum += l
		if 2*n+sum > body {
			return ferr(base+e, fmt.Sprintf("dxpu.tlp_len[%d]", i), ErrTLPLength, "TLPs 0..%d end at body byte %d, beyond body length %d", i, 2*n+sum, body)
		}
		if i == n-1 && 2*n+sum != body {
			return ferr(base+6, "dxpu.body_len", ErrTLPLength, "body length %d, the table and %d TLPs fill %d", body, n, 2*n+sum)
		}
	}
	return nil
}

// Encap returns how the frame carries TLPs.
func (f *Frame) Encap() Encap { return f.encap }

// NumTLPs returns the number of TLPs the frame declares.
func (f *Frame) NumTLPs() int { return f.n }

// TLP returns the i-th TLP (0-based). truncated reports that the frame ends
// before the TLP's declared end (the capture's snap length cut it); b then
// holds what is there, possibly nothing. Sequential calls are O(1).
func (f *Frame) TLP(i int) (b []byte, truncated bool) {
	if i < 0 || i >= f.n {
		return nil, false
	}
	if f.encap == EncapNetTLP {
		return f.clip(f.tlpOff, f.end)
	}
	if i < f.curI {
		f.curI, f.curOff = 0, f.tlpOff
	}
	tab := f.hdr + HeaderLen
	for f.curI < i {
		e := tab + 2*f.curI
		if e+2 > len(f.b) {
			return f.b[len(f.b):], true
		}
		f.curOff += int(be16(f.b[e:]))
		f.curI++
	}
	e := tab + 2*i
	if e+2 > len(f.b) {
		return f.b[len(f.b):], true
	}
	return f.clip(f.curOff, f.curOff+int(be16(f.b[e:])))
}

func (f *Frame) clip(start, end int) ([]byte, bool) {
	n := len(f.b)
	if start >= n {
		return f.b[n:], true
	}
	if end > n {
		return f.b[start:n], true
	}
	return f.b[start:end:end], false
}

// Bytes returns the whole frame as given to ParseFrame.
func (f *Frame) Bytes() []byte { return f.b }

// End returns the offset just past the frame's declared contents (the last
// TLP or the body): what follows is Ethernet padding. It may exceed
// len(Bytes()) when the frame is truncated; 0 for EncapNone.
func (f *Frame) End() int { return f.end }

// Truncated reports whether the frame holds fewer bytes than its lengths
// declare.
func (f *Frame) Truncated() bool { return f.truncated }

// DstMAC returns the destination Ethernet address (a slice of the frame).
func (f *Frame) DstMAC() []byte {
	if len(f.b) < EthHeaderLen {
		return nil
	}
	return f.b[0:6:6]
}

// SrcMAC returns the source Ethernet address (a slice of the frame).
func (f *Frame) SrcMAC() []byte {
	if len(f.b) < EthHeaderLen {
		return nil
	}
	return f.b[6:12:12]
}

// NumVLANs returns the number of VLAN tags (0..MaxVLANTags).
func (f *Frame) NumVLANs() int { return int(f.nvlan) }

// VLANTag returns the TPID and TCI of tag i (0 is the outermost).
func (f *Frame) VLANTag(i int) (tpid, tci uint16) {
	if i < 0 || i >= int(f.nvlan) {
		return 0, 0
	}
	o := 12 + VLANTagLen*i
	return be16(f.b[o:]), be16(f.b[o+2:])
}

// VLAN returns the VLAN ID (12 bits) of the outermost tag.
func (f *Frame) VLAN() (vid uint16, ok bool) {
	if f.nvlan == 0 {
		return 0, false
	}
	_, tci := f.VLANTag(0)
	return tci & 0xfff, true
}

// EtherType returns the EtherType after any VLAN tags.
func (f *Frame) EtherType() uint16 {
	o := 12 + VLANTagLen*int(f.nvlan)
	if o+2 > len(f.b) {
		return 0
	}
	return be16(f.b[o:])
}

// HasIPv4 reports whether the frame has a (checked) IPv4 header.
func (f *Frame) HasIPv4() bool { return f.l3 != 0 }

// SrcIP returns the IPv4 source (the zero Addr without IPv4).
func (f *Frame) SrcIP() netip.Addr {
	if f.l3 == 0 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(f.b[f.l3+12 : f.l3+16]))
}

// DstIP returns the IPv4 destination (the zero Addr without IPv4).
func (f *Frame) DstIP() netip.Addr {
	if f.l3 == 0 {
		return netip.Addr{}
	}
	return netip.AddrFrom4([4]byte(f.b[f.l3+16 : f.l3+20]))
}

// HasUDP reports whether the frame carries TLPs over UDP.
func (f *Frame) HasUDP() bool { return f.l4 != 0 }

// SrcPort returns the UDP source port of a UDP encapsulation.
func (f *Frame) SrcPort() uint16 {
	if f.l4 == 0 {
		return 0
	}
	return be16(f.b[f.l4:])
}

// DstPort returns the UDP destination port of a UDP encapsulation.
func (f *Frame) DstPort() uint16 {
	if f.l4 == 0 {
		return 0
	}
	return be16(f.b[f.l4+2:])
}

// HeaderOffset returns the offset of the dxpu or NetTLP header (0 for
// EncapNone).
func (f *Frame) HeaderOffset() int { return f.hdr }

// Header returns the dxpu header and body, up to the declared body length
// or the frame's end, whichever comes first (nil unless dxpu). On a
// truncated frame the body may be short: check Truncated before
// Header.Body or Header.TLPLen.
func (f *Frame) Header() Header {
	if f.encap != EncapDxpuEth && f.encap != EncapDxpuUDP {
		return nil
	}
	end := min(f.end, len(f.b))
	return Header(f.b[f.hdr:end:end])
}

// Body returns the dxpu body bytes present in the frame (the control
// message of a CONTROL frame), padding excluded.
func (f *Frame) Body() []byte {
	if f.encap != EncapDxpuEth && f.encap != EncapDxpuUDP {
		return nil
	}
	start, end := f.hdr+HeaderLen, min(f.end, len(f.b))
	return f.b[start:end:end]
}

// NetTLPSeq returns the NetTLP header's sequence number.
func (f *Frame) NetTLPSeq() uint16 {
	if f.encap != EncapNetTLP {
		return 0
	}
	return be16(f.b[f.hdr:])
}

// NetTLPTimestamp returns the NetTLP header's timestamp.
func (f *Frame) NetTLPTimestamp() uint32 {
	if f.encap != EncapNetTLP {
		return 0
	}
	return binary.BigEndian.Uint32(f.b[f.hdr+2:])
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// checksum returns the Internet checksum (RFC 1071) of b, complemented:
// 0 when b includes a correct checksum field.
func checksum(b []byte) uint16 { return ^sum16(0, b) }

// checksum2 is the one's-complement sum of two ranges (header around its
// checksum field), not complemented.
func checksum2(a, b []byte) uint16 { return sum16(sum16(0, a), b) }

func sum16(s uint16, b []byte) uint16 {
	acc := uint32(s)
	for len(b) >= 2 {
		acc += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}
