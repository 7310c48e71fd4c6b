// Package wireshark ships dxpu.lua, a Wireshark dissector for dxpu frames
// (raw Ethernet, EtherType 0x88B5, with or without 802.1Q/802.1ad tags, and
// IPv4/UDP to port 8855) and NetTLP datagrams (UDP ports 0x3000-0x30ff).
// The wire formats are those of package encap (header, control messages,
// TLP batching) and package tlp (the TLP, field by field); the dissector's
// filter names are dxpu, nettlp and dxpu.tlp.*.
//
// The package holds no Go code beyond its tests: they run tshark with the
// dissector over the project's captures and over frames built to break
// each rule, and compare every field tshark shows with what encap.ParseFrame,
// encap.ParseControl and tlp.Parse read from the same bytes.
//
// Install for one user:
//
//	mkdir -p ~/.local/lib/wireshark/plugins
//	cp contrib/wireshark/dxpu.lua ~/.local/lib/wireshark/plugins/
//
// or load it for one run: tshark -X lua_script:contrib/wireshark/dxpu.lua -r capture.pcap
package wireshark
