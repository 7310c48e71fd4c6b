package encap

// DefaultMTU is the Ethernet payload size Packer fills up to by default.
const DefaultMTU = 1500

// Packer gathers TLPs into one dxpu frame up to the MTU, for a bridge's
// transmit path. It keeps references to the added TLPs (no copy) until
// Frame builds the frame into its own buffer, which it reuses: after the
// first frames it allocates nothing.
//
//	p := encap.Packer{L2: l2, MTU: 9000}
//	for each TLP t {
//		if !p.Add(t) { send(p.Frame(&fields)); p.Reset(); p.Add(t) }
//	}
type Packer struct {
	L2  L2
	L3  *L3 // nil: raw Ethernet (dxpu-eth); else IPv4/UDP (dxpu-udp)
	MTU int // bytes after the Ethernet header and tag; 0 = DefaultMTU

	tlps  [][]byte
	bytes int // sum of TLP lengths
	buf   []byte
}

func (p *Packer) mtu() int {
	if p.MTU <= 0 {
		return DefaultMTU
	}
	return p.MTU
}

// room returns the bytes left for TLP data and length entries.
func (p *Packer) room() int {
	r := p.mtu() - HeaderLen - p.bytes - 2*len(p.tlps)
	if p.L3 != nil {
		r -= IPv4HeaderLen + UDPHeaderLen
	}
	return r
}

// Fits reports whether a TLP of n bytes would fit in the current frame.
func (p *Packer) Fits(n int) bool {
	return len(p.tlps) < MaxTLPs && n+2 <= p.room() && p.bytes+2*len(p.tlps)+n+2 <= MaxBodyLen
}

// Add appends tlp to the frame being built if it fits and reports whether
// it did. A TLP that cannot fit even in an empty frame is never accepted:
// check MaxTLPLen.
func (p *Packer) Add(tlp []byte) bool {
	if !p.Fits(len(tlp)) {
		return false
	}
	p.tlps = append(p.tlps, tlp)
	p.bytes += len(tlp)
	return true
}

// MaxTLPLen returns the longest TLP an empty frame can carry at this MTU.
func (p *Packer) MaxTLPLen() int {
	r := p.mtu() - HeaderLen - 2
	if p.L3 != nil {
		r -= IPv4HeaderLen + UDPHeaderLen
	}
	return min(r, MaxBodyLen-2)
}

// Len returns the number of TLPs gathered.
func (p *Packer) Len() int { return len(p.tlps) }

// Bytes returns the sum of the gathered TLPs' lengths.
func (p *Packer) Bytes() int { return p.bytes }

// Frame builds the frame from the gathered TLPs with the given header
// fields (Seq is the sequence number of the first TLP). The result is
// valid until the next call of Frame.
func (p *Packer) Frame(f *Fields) ([]byte, error) {
	var err error
	if p.L3 == nil {
		p.buf, err = AppendDxpuEth(p.buf[:0], &p.L2, f, p.tlps)
	} else {
		p.buf, err = AppendDxpuUDP(p.buf[:0], &p.L2, p.L3, f, p.tlps)
	}
	return p.buf, err
}

// Reset empties the packer for the next frame and drops its references to
// the TLPs.
func (p *Packer) Reset() {
	clear(p.tlps)
	p.tlps = p.tlps[:0]
	p.bytes = 0
}
