package layers

import (
	"encoding/binary"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/tlp"
	"github.com/dxpu/dxpu/tlp/encap"
)

// Layer type numbers (gopacket's own stay below 1000 and 2000..).
const (
	layerNumDxpu   = 8855
	layerNumNetTLP = 8856
	layerNumTLP    = 8857
)

// The layer types of this package.
var (
	LayerTypeDxpu   = gopacket.RegisterLayerType(layerNumDxpu, gopacket.LayerTypeMetadata{Name: "Dxpu", Decoder: gopacket.DecodeFunc(decodeDxpu)})
	LayerTypeNetTLP = gopacket.RegisterLayerType(layerNumNetTLP, gopacket.LayerTypeMetadata{Name: "NetTLP", Decoder: gopacket.DecodeFunc(decodeNetTLP)})
	LayerTypeTLP    = gopacket.RegisterLayerType(layerNumTLP, gopacket.LayerTypeMetadata{Name: "TLP", Decoder: gopacket.DecodeFunc(decodeTLP)})
)

// EtherTypeDxpu is encap.EtherType as a gopacket EthernetType.
const EtherTypeDxpu = layers.EthernetType(encap.EtherType)

func init() {
	layers.EthernetTypeMetadata[EtherTypeDxpu] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodeDxpu), Name: "Dxpu", LayerType: LayerTypeDxpu,
	}
	RegisterUDPPort(encap.DefaultUDPPort)
	for p := encap.NetTLPPortBase; p <= encap.NetTLPPortMax; p++ {
		layers.RegisterUDPPortLayerType(layers.UDPPort(p), LayerTypeNetTLP)
	}
}

// RegisterUDPPort makes gopacket decode UDP datagrams to or from port as
// dxpu frames (for deployments that configure encap.Config.UDPPort).
func RegisterUDPPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeDxpu)
}

// Dxpu is the dxpu header and length table of a dxpu frame (version 1).
// Its payload is the TLPs (TLP messages) or the control message (CONTROL);
// Ethernet padding after the body is dropped.
type Dxpu struct {
	layers.BaseLayer
	// Fields are the header fields; Version, Count and BodyLen are read
	// back from the header on decoding and computed with FixLengths.
	encap.Fields
	Version   uint8
	Count     int      // number of TLPs
	BodyLen   int      // bytes after the fixed header
	TLPLens   []uint16 // length of each TLP (reused across decodes)
	Truncated bool     // the data ended before the body did
}

// LayerType returns LayerTypeDxpu.
func (d *Dxpu) LayerType() gopacket.LayerType { return LayerTypeDxpu }

// CanDecode returns LayerTypeDxpu.
func (d *Dxpu) CanDecode() gopacket.LayerClass { return LayerTypeDxpu }

// NextLayerType is LayerTypeTLP for a TLP message, gopacket.LayerTypePayload
// for another message with a body, LayerTypeZero without one.
func (d *Dxpu) NextLayerType() gopacket.LayerType {
	switch {
	case len(d.Payload) == 0:
		return gopacket.LayerTypeZero
	case d.Type == encap.MsgTLP:
		return LayerTypeTLP
	}
	return gopacket.LayerTypePayload // a control message
}

// DecodeFromBytes decodes a dxpu header and body, checking the rules of
// encap.ParseHeader.
func (d *Dxpu) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	h, truncated, err := encap.ParseHeader(data)
	if err != nil {
		if len(data) < encap.HeaderLen {
			df.SetTruncated()
		}
		return err
	}
	d.Fields = h.Fields()
	d.Version, d.Count, d.BodyLen, d.Truncated = h.Version(), h.Count(), h.BodyLen(), truncated
	if truncated {
		df.SetTruncated()
	}
	d.TLPLens = d.TLPLens[:0]
	tab := encap.HeaderLen
	if d.Type == encap.MsgTLP {
		tab += 2 * d.Count
		for i := 0; i < d.Count && encap.HeaderLen+2*i+2 <= len(h); i++ {
			d.TLPLens = append(d.TLPLens, uint16(h.TLPLen(i)))
		}
	}
	tab = min(tab, len(h))
	d.BaseLayer = layers.BaseLayer{Contents: h[:tab], Payload: h[tab:]}
	return nil
}

// TLP returns the i-th TLP by the length table, and whether the data cut it.
func (d *Dxpu) TLP(i int) (b []byte, truncated bool) {
	if i < 0 || i >= d.Count {
		return nil, false
	}
	if i >= len(d.TLPLens) {
		return nil, true
	}
	off := 0
	for _, l := range d.TLPLens[:i] {
		off += int(l)
	}
	end := off + int(d.TLPLens[i])
	switch {
	case off >= len(d.Payload):
		return nil, true
	case end > len(d.Payload):
		return d.Payload[off:], true
	}
	return d.Payload[off:end:end], false
}

// SerializeTo prepends the dxpu header and length table. With
// opts.FixLengths, Count, TLPLens and BodyLen come from the bytes already
// serialized after this layer, which must be TLPs (each as long as its
// header declares) for a TLP message.
func (d *Dxpu) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	body := b.Bytes()
	if opts.FixLengths {
		typ := d.Type
		if typ == 0 {
			typ = encap.MsgTLP
		}
		d.TLPLens = d.TLPLens[:0]
		if typ == encap.MsgTLP {
			for rest := body; len(rest) > 0; {
				if len(rest) < 4 {
					return fmt.Errorf("dxpu layer: %d bytes after the last TLP", len(rest))
				}
				n := min(tlp.View(rest).WireLen(), len(rest))
				if len(rest) < tlp.View(rest).HeaderLen() {
					n = len(rest)
				}
				d.TLPLens = append(d.TLPLens, uint16(n))
				rest = rest[n:]
			}
		}
		d.Count = len(d.TLPLens)
		d.BodyLen = 2*d.Count + len(body)
		d.Version = encap.Version
	}
	if d.Count > encap.MaxTLPs || d.BodyLen > encap.MaxBodyLen || len(d.TLPLens) != d.Count {
		return fmt.Errorf("dxpu layer: %d TLPs (%d lengths), body %d bytes: beyond the format's limits or inconsistent", d.Count, len(d.TLPLens), d.BodyLen)
	}
	hb, err := b.PrependBytes(encap.HeaderLen + 2*d.Count)
	if err != nil {
		return err
	}
	f := d.Fields
	if f.Type == 0 {
		f.Type = encap.MsgTLP
	}
	h := encap.Header(hb)
	clear(hb[:encap.HeaderLen])
	ver := d.Version
	if ver == 0 {
		ver = encap.Version
	}
	h.SetVersionFlags(ver, f.Flags)
	h.SetType(f.Type)
	h.SetPairID(f.PairID)
	h.SetCount(d.Count)
	h.SetBodyLen(d.BodyLen)
	h.SetSeq(f.Seq)
	h.SetAck(f.Ack)
	h.SetSack(f.Sack)
	for t := encap.CreditPH; t < encap.NumCreditTypes; t++ {
		h.SetCreditLimit(t, f.Limits[t], f.Infinite&(1<<t) != 0)
	}
	for i, l := range d.TLPLens {
		binary.BigEndian.PutUint16(hb[encap.HeaderLen+2*i:], l)
	}
	return nil
}

func decodeDxpu(data []byte, p gopacket.PacketBuilder) error { return decodeWith(&Dxpu{}, data, p) }

// NetTLP is the 6-byte NetTLP header: sequence number and timestamp.
type NetTLP struct {
	layers.BaseLayer
	Seq       uint16
	Timestamp uint32
}

// LayerType returns LayerTypeNetTLP.
func (n *NetTLP) LayerType() gopacket.LayerType { return LayerTypeNetTLP }

// CanDecode returns LayerTypeNetTLP.
func (n *NetTLP) CanDecode() gopacket.LayerClass { return LayerTypeNetTLP }

// NextLayerType is LayerTypeTLP when a TLP follows the header.
func (n *NetTLP) NextLayerType() gopacket.LayerType {
	if len(n.Payload) == 0 {
		return gopacket.LayerTypeZero
	}
	return LayerTypeTLP
}

// DecodeFromBytes reads the 6-byte header; the rest is the TLP.
func (n *NetTLP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < encap.NetTLPHeaderLen {
		df.SetTruncated()
		return &encap.FrameError{Field: "nettlp", Err: encap.ErrNetTLP, Detail: fmt.Sprintf("%d bytes, the header needs 6", len(data))}
	}
	h := encap.NetTLPHeader(data)
	n.Seq, n.Timestamp = h.Seq(), h.Timestamp()
	n.BaseLayer = layers.BaseLayer{Contents: data[:encap.NetTLPHeaderLen:encap.NetTLPHeaderLen], Payload: data[encap.NetTLPHeaderLen:]}
	return nil
}

// SerializeTo prepends the 6-byte header.
func (n *NetTLP) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	hb, err := b.PrependBytes(encap.NetTLPHeaderLen)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint16(hb[encap.NetTLPSeqOffset:], n.Seq)
	binary.BigEndian.PutUint32(hb[encap.NetTLPTimestampOffset:], n.Timestamp)
	return nil
}

func decodeNetTLP(data []byte, p gopacket.PacketBuilder) error { return decodeWith(&NetTLP{}, data, p) }

// TLP is one PCIe TLP. Decoding only delimits it (by its header's declared
// length); call tlp.Parse or tlp.ParseTruncated on View for the rules of
// the specification.
type TLP struct {
	layers.BaseLayer
	View      tlp.View // the TLP's bytes, as far as the data holds them
	Truncated bool     // the data ended before the TLP's declared end
	Extra     int      // bytes after the declared end kept with this TLP (NetTLP quirk)
}

// LayerType returns LayerTypeTLP.
func (t *TLP) LayerType() gopacket.LayerType { return LayerTypeTLP }

// CanDecode returns LayerTypeTLP.
func (t *TLP) CanDecode() gopacket.LayerClass { return LayerTypeTLP }

// NextLayerType is LayerTypeTLP while bytes follow (the next TLP of a dxpu frame).
func (t *TLP) NextLayerType() gopacket.LayerType {
	if len(t.Payload) == 0 {
		return gopacket.LayerTypeZero
	}
	return LayerTypeTLP
}

// minTLP is the smallest TLP: a 3DW header.
const minTLP = tlp.Header3DW

// DecodeFromBytes delimits one TLP by its header: Fmt, Type and Length give
// its declared size (tlp.View.WireLen).
func (t *TLP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < minTLP || len(data) < tlp.View(data).HeaderLen() {
		df.SetTruncated()
		return &encap.FrameError{Field: "tlp", Err: encap.ErrTLPLength, Detail: fmt.Sprintf("%d bytes, shorter than the TLP's header", len(data))}
	}
	v := tlp.View(data)
	n := v.WireLen()
	t.Truncated, t.Extra = false, 0
	switch {
	case n > len(data):
		n = len(data)
		t.Truncated = true
		df.SetTruncated()
	case len(data)-n < minTLP:
		t.Extra = len(data) - n
		n = len(data)
	}
	t.View = v[:n:n]
	t.BaseLayer = layers.BaseLayer{Contents: t.View, Payload: data[n:]}
	return nil
}

// SerializeTo prepends the TLP's bytes.
func (t *TLP) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	hb, err := b.PrependBytes(len(t.View))
	if err != nil {
		return err
	}
	copy(hb, t.View)
	return nil
}

func decodeTLP(data []byte, p gopacket.PacketBuilder) error { return decodeWith(&TLP{}, data, p) }

// Kind is a convenience for View.Kind.
func (t *TLP) Kind() tlp.Kind { return t.View.Kind() }

// String names the TLP kind and size.
func (t *TLP) String() string {
	return fmt.Sprintf("TLP %v (%d bytes)", t.View.Kind(), len(t.View))
}

// decodingLayer is what each layer type here implements.
type decodingLayer interface {
	gopacket.DecodingLayer
	gopacket.Layer
}

// decodeWith runs a DecodingLayer as a gopacket decoder. Calls go through
// the interface, which keeps package initialisation free of cycles.
func decodeWith(l decodingLayer, data []byte, p gopacket.PacketBuilder) error {
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	return p.NextDecoder(l.NextLayerType())
}
