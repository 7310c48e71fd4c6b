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

// Frame is a parsed frame: offsets into the frame's bytes, no copies. It is
// a value type; ParseFrame allocates nothing. Accessors of a layer the frame
// does not have return zero values.
type Frame struct {
	b         []byte
	lay       Layers
	truncated bool
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
	err := f.lay.walk(frame, cfg)
	if err != nil && f.lay.Net == 0 {
		return Frame{}, err
	}
	switch {
	case err != nil:
	case f.lay.Encap == EncapDxpuEth:
		err = f.parseDxpu(cfg, -1)
	case f.lay.Encap == EncapDxpuUDP:
		err = f.parseDxpu(cfg, f.lay.UDPEnd)
	case f.lay.Encap == EncapNetTLP:
		err = f.parseNetTLP(cfg, f.lay.UDPEnd)
	}
	if err != nil {
		// Keep what identifies the frame (MACs, VLANs, encapsulation,
		// addresses) for the caller's message, but no TLPs.
		f.n, f.truncated = 0, false
	}
	return f, err
}

func (f *Frame) parseNetTLP(cfg *Config, end int) error {
	h := f.lay.Payload
	if end-h < NetTLPHeaderLen {
		return ferr(f.lay.UDP+UDPLengthOffset, "udp.length", ErrNetTLP, "UDP payload of %d bytes, the NetTLP header needs 6", end-h)
	}
	if end-h == NetTLPHeaderLen {
		return ferr(f.lay.UDP+UDPLengthOffset, "udp.length", ErrNetTLP, "datagram carries no TLP after its header")
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
		return ferr(len(f.b), f.lay.Encap.String(), ErrTruncated, "lengths declare %d bytes, the frame holds %d", f.end, len(f.b))
	}
	f.curI, f.curOff = 0, f.tlpOff
	return nil
}

// parseDxpu checks the dxpu header at f.lay.Payload; udpEnd is the end of the UDP
// datagram, or -1 on raw Ethernet.
func (f *Frame) parseDxpu(cfg *Config, udpEnd int) error {
	h := f.lay.Payload
	if udpEnd >= 0 && udpEnd-h < HeaderLen {
		return ferr(f.lay.UDP+UDPLengthOffset, "udp.length", ErrUDPLength, "UDP payload of %d bytes, the dxpu header needs 40", udpEnd-h)
	}
	if h+HeaderLen > len(f.b) {
		return ferr(h, "dxpu", ErrShort, "header cut: %d bytes left, need 40", len(f.b)-h)
	}
	hd := Header(f.b[h:])
	end := h + HeaderLen + hd.BodyLen()
	if udpEnd >= 0 && end != udpEnd && hd.Version() == Version {
		return ferr(h+HeaderBodyLenOffset, "dxpu.body_len", ErrBodyLength, "body length %d, UDP payload after the header is %d", hd.BodyLen(), udpEnd-h-HeaderLen)
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
		return ferr(base+HeaderVersionFlagsOffset, "dxpu.version", ErrVersion, "version %d, want %d", v, Version)
	}
	mt := hd.Type()
	if mt < MsgTLP || mt > MsgControl {
		return ferr(base+HeaderTypeOffset, "dxpu.type", ErrMsgType, "message type %d", mt)
	}
	n, body := hd.Count(), hd.BodyLen()
	if mt != MsgTLP {
		if n != 0 {
			return ferr(base+HeaderCountOffset, "dxpu.count", ErrTLPCount, "%d TLPs in a %s message, want 0", n, mt)
		}
		return nil
	}
	if 2*n > body {
		return ferr(base+HeaderCountOffset, "dxpu.count", ErrTLPCount, "%d TLPs need a %d-byte length table, body length is %d", n, 2*n, body)
	}
	if n == 0 && body != 0 {
		return ferr(base+HeaderBodyLenOffset, "dxpu.body_len", ErrTLPLength, "body length %d in a TLP message without TLPs", body)
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
			return ferr(base+HeaderBodyLenOffset, "dxpu.body_len", ErrTLPLength, "body length %d, the table and %d TLPs fill %d", body, n, 2*n+sum)
		}
	}
	return nil
}

// Layers returns where the frame's layers start, as Walk found them.
func (f *Frame) Layers() Layers { return f.lay }

// Encap returns how the frame carries TLPs.
func (f *Frame) Encap() Encap { return f.lay.Encap }

// NumTLPs returns the number of TLPs the frame declares.
func (f *Frame) NumTLPs() int { return f.n }

// TLP returns the i-th TLP (0-based). truncated reports that the frame ends
// before the TLP's declared end (the capture's snap length cut it); b then
// holds what is there, possibly nothing. Sequential calls are O(1).
func (f *Frame) TLP(i int) (b []byte, truncated bool) {
	if i < 0 || i >= f.n {
		return nil, false
	}
	if f.lay.Encap == EncapNetTLP {
		return f.clip(f.tlpOff, f.end)
	}
	if i < f.curI {
		f.curI, f.curOff = 0, f.tlpOff
	}
	tab := f.lay.Payload + HeaderLen
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
	return Ethernet(f.b).Dst()
}

// SrcMAC returns the source Ethernet address (a slice of the frame).
func (f *Frame) SrcMAC() []byte {
	if len(f.b) < EthHeaderLen {
		return nil
	}
	return Ethernet(f.b).Src()
}

// NumVLANs returns the number of VLAN tags (0..MaxVLANTags).
func (f *Frame) NumVLANs() int { return f.lay.Tags }

// VLANTag returns the TPID and TCI of tag i (0 is the outermost).
func (f *Frame) VLANTag(i int) (tpid, tci uint16) {
	if i < 0 || i >= f.lay.Tags {
		return 0, 0
	}
	v := VLAN(f.b[EthTypeOffset+VLANTagLen*i:])
	return v.TPID(), v.TCI()
}

// VLAN returns the VLAN ID (12 bits) of the outermost tag.
func (f *Frame) VLAN() (vid uint16, ok bool) {
	if f.lay.Tags == 0 {
		return 0, false
	}
	return VLAN(f.b[EthTypeOffset:]).VID(), true
}

// EtherType returns the EtherType after any VLAN tags.
func (f *Frame) EtherType() uint16 {
	o := EthTypeOffset + VLANTagLen*f.lay.Tags
	if o+2 > len(f.b) {
		return 0
	}
	return be16(f.b[o:])
}

// HasIPv4 reports whether the frame has a (checked) IPv4 header.
func (f *Frame) HasIPv4() bool { return f.lay.IPv4 != 0 }

// SrcIP returns the IPv4 source (the zero Addr without IPv4).
func (f *Frame) SrcIP() netip.Addr {
	if f.lay.IPv4 == 0 {
		return netip.Addr{}
	}
	return IPv4(f.b[f.lay.IPv4:]).SrcAddr()
}

// DstIP returns the IPv4 destination (the zero Addr without IPv4).
func (f *Frame) DstIP() netip.Addr {
	if f.lay.IPv4 == 0 {
		return netip.Addr{}
	}
	return IPv4(f.b[f.lay.IPv4:]).DstAddr()
}

// HasUDP reports whether the frame carries TLPs over UDP.
func (f *Frame) HasUDP() bool { return f.lay.UDP != 0 }

// SrcPort returns the UDP source port of a UDP encapsulation.
func (f *Frame) SrcPort() uint16 {
	if f.lay.UDP == 0 {
		return 0
	}
	return UDP(f.b[f.lay.UDP:]).SrcPort()
}

// DstPort returns the UDP destination port of a UDP encapsulation.
func (f *Frame) DstPort() uint16 {
	if f.lay.UDP == 0 {
		return 0
	}
	return UDP(f.b[f.lay.UDP:]).DstPort()
}

// HeaderOffset returns the offset of the dxpu or NetTLP header (0 for
// EncapNone).
func (f *Frame) HeaderOffset() int { return f.lay.Payload }

// Header returns the dxpu header and body, up to the declared body length
// or the frame's end, whichever comes first (nil unless dxpu). On a
// truncated frame the body may be short: check Truncated before
// Header.Body or Header.TLPLen.
func (f *Frame) Header() Header {
	if f.lay.Encap != EncapDxpuEth && f.lay.Encap != EncapDxpuUDP {
		return nil
	}
	end := min(f.end, len(f.b))
	return Header(f.b[f.lay.Payload:end:end])
}

// Body returns the dxpu body bytes present in the frame (the control
// message of a CONTROL frame), padding excluded.
func (f *Frame) Body() []byte {
	if f.lay.Encap != EncapDxpuEth && f.lay.Encap != EncapDxpuUDP {
		return nil
	}
	start, end := f.lay.Payload+HeaderLen, min(f.end, len(f.b))
	return f.b[start:end:end]
}

// NetTLPSeq returns the NetTLP header's sequence number.
func (f *Frame) NetTLPSeq() uint16 {
	if f.lay.Encap != EncapNetTLP {
		return 0
	}
	return NetTLPHeader(f.b[f.lay.Payload:]).Seq()
}

// NetTLPTimestamp returns the NetTLP header's timestamp.
func (f *Frame) NetTLPTimestamp() uint32 {
	if f.lay.Encap != EncapNetTLP {
		return 0
	}
	return NetTLPHeader(f.b[f.lay.Payload:]).Timestamp()
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
