// Package tlpcodec is `dxpu tlp`: TLPs from hex (or from the frames of a
// capture) to JSON lines with Decode, and back with Encode. The JSON is
// package tlp's (tlp.Packet's AppendJSONFields); a TLP that does not
// decode, or breaks a rule of the PCIe specification, gives an object with
// "error", "rule", its "line" or "frame", and the fields that could be read.
package tlpcodec
