// Package layers adds dxpu's frame formats to gopacket: the dxpu header
// (version 1), the NetTLP header, and PCIe TLPs, as gopacket layers.
//
// Importing the package registers, in gopacket's global tables:
//
//	EtherType 0x88B5 (also behind 802.1Q tags)    -> LayerTypeDxpu
//	UDP port 8855 (encap.DefaultUDPPort)          -> LayerTypeDxpu
//	UDP ports 0x3000..0x30ff (NetTLP, 0x3000+tag) -> LayerTypeNetTLP
//	Dxpu (TLP messages) and NetTLP payloads       -> LayerTypeTLP, one layer per TLP
//
// gopacket's UDP layer picks the next layer by destination port, then by
// source port. RegisterUDPPort maps a deployment's non-default dxpu port.
//
// The byte layouts are those of package encap (see its documentation for
// the dxpu header and the NetTLP header byte by byte, with worked hex
// examples); a TLP is the raw PCIe TLP of package tlp (header, data,
// optional ECRC; no DLLP framing).
//
// Each layer type implements gopacket.DecodingLayer, so a
// gopacket.DecodingLayerParser decodes a frame without allocating, and
// gopacket.SerializableLayer, so gopacket.SerializeLayers builds frames:
//
//	eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: dxpulayers.EtherTypeDxpu}
//	hdr := &dxpulayers.Dxpu{Fields: encap.Fields{PairID: 42, Seq: 7}}
//	gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
//		eth, hdr, &dxpulayers.TLP{View: mrd}, &dxpulayers.TLP{View: cpld})
//
// With FixLengths the Dxpu layer fills the TLP count, the length table and
// the body length from the TLP layers serialized after it.
//
// A frame carrying several TLPs decodes, with gopacket.NewPacket, into one
// TLP layer per TLP. A TLP layer takes as many bytes as its header declares
// (tlp.View.WireLen); bytes after it start the next TLP layer, except that
// a remainder too short to be a TLP (under 12 bytes, as NetTLP adapters
// send after some single-DW writes) stays with the TLP as Extra. A
// DecodingLayerParser has one TLP instance and keeps only the last TLP:
// read all of them from the Dxpu layer with Dxpu.TLP(i), which follows the
// header's length table as encap.ParseFrame does.
package layers
