// Package capture is `dxpu pcap`: it writes synthetic TLP traffic that
// obeys the PCIe rules (Generate, and the replay corpus of testdata/pcap
// with WriteCorpus), re-encapsulates the TLPs of a capture (Convert) and
// counts what a capture holds (Info).
//
// Captures are pcap (microsecond or nanosecond) or pcapng holding Ethernet
// frames that carry TLPs as NetTLP (UDP, ports 0x3000+tag), dxpu over
// Ethernet (EtherType 0x88B5) or dxpu over UDP/IPv4 (port 8855), with or
// without 802.1Q tags; package tlp/encap documents those frames byte by
// byte.
package capture
