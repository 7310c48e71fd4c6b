// Package tlpcodec is `dxpu tlp`: TLPs from hex (or from the frames of a
// capture) to JSON lines with Decode, and back with Encode. The JSON is
// package tlp's (tlp.Packet's AppendJSONFields); a TLP that does not
// decode, or breaks a rule of the PCIe specification, gives an object with
// "error", "rule", its "line" or "frame", and the fields that could be read.
//
// Package tlp reads reserved header bits as 0 and encodes them 0 (receivers
// ignore them): IO address bits 1:0, config DW2 bits 31:28 and 1:0, the bit
// above a completion's 7-bit Lower Address. So that a capture's TLPs stay
// exact, Decode adds "reserved_bits" when the input header has bits set that
// the codec's re-encoding of the same TLP leaves 0: lowercase hex, one byte
// per header byte in wire order (24 digits for a 3-DW header, 32 for 4), a
// set bit where the input has one. It is absent when no such bit is set.
// Encode ORs it into the header (recomputing the ECRC with td, and checking
// a given "ecrc" against that), so decode | encode gives the input back byte
// for byte. A shorter mask covers the leading header bytes; a longer one, or
// one over a bit a field uses, is refused. Example: the CplD
// 4a000001 00000400 01000088 00000000 (Lower Address 8, byte 11 bit 7 set)
// decodes with "lower_address":8 and "reserved_bits":"000000000000000000000080".
package tlpcodec
