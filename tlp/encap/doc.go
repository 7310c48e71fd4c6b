// Package encap reads and writes the frames that carry TLPs between bridges:
// dxpu's own encapsulation (version 1) over raw Ethernet or UDP/IPv4, and
// NetTLP's encapsulation (UDP, 6-byte header, one TLP per datagram).
//
// ParseFrame reads any of them, with or without 802.1Q/802.1ad tags, into a
// Frame of offsets (no allocation, no copy); the Append* builders and Packer
// write them (no allocation once the destination has capacity). Header is a
// zero-copy view of the dxpu header with accessors and setters.
//
// # Frame layouts
//
//	dxpu-eth:  Ethernet (14) [802.1Q tag (4)] EtherType 88 b5 | dxpu header (40) | body | padding
//	dxpu-udp:  Ethernet (14) [tag (4)] 08 00 | IPv4 (20+) | UDP (8, dst port 8855) | dxpu header | body | padding
//	nettlp:    Ethernet (14) [tag (4)] 08 00 | IPv4 (20+) | UDP (8, ports 0x3000+tag) | NetTLP header (6) | TLP | padding
//
// Builders write IPv4 headers of 20 bytes with DF set, TTL 64 by default and
// a correct header checksum, and UDP checksum 0 (none, allowed over IPv4).
// Frames shorter than 60 bytes (the Ethernet minimum without FCS) are padded
// with zeros; the lengths in the headers, never the frame's length, delimit
// the TLPs, so padding is ignored on reading.
//
// # dxpu encapsulation, version 1
//
// On raw Ethernet the header follows EtherType 0x88B5 (after an optional
// 802.1Q tag, TPID 0x8100). Over UDP/IPv4 it is the UDP payload, destination
// port 8855 by default (Config.UDPPort). All fields are big-endian. The fixed
// header is 40 bytes:
//
//	off len field
//	  0   1 version (bits 7:4, = 1) | flags (bits 3:0: 0 ACK valid, 1 CREDIT valid, 2 SACK valid)
//	  1   1 message type: 1 TLP, 2 ACK, 3 NAK, 4 CREDIT, 5 CONTROL
//	  2   3 pair ID (24 bits): the host-GPU pair, the switch's forwarding key
//	  5   1 N, the number of TLPs in the frame (0 for non-TLP messages)
//	  6   2 body length: the bytes after the fixed header that belong to the frame
//	  8   4 Seq: sequence number of the first TLP; TLP i has Seq+i (mod 2^32)
//	 12   4 Ack: cumulative; every TLP with a sequence number before Ack was received
//	 16   4 SACK: bit i set = TLP Ack+1+i was received (selective ack on gaps)
//	 20   2 PH limit       22 2 NPH limit      24 2 CplH limit (cumulative, mod 2^16)
//	 26   1 infinite mask: bit t set = credit type t infinite (0 PH 1 PD 2 NPH 3 NPD 4 CplH 5 CplD)
//	 27   1 reserved, 0
//	 28   4 PD limit       32 4 NPD limit      36 4 CplD limit (16-byte units, cumulative, mod 2^32)
//	 40     body: for TLP frames N 2-byte TLP lengths, then the N TLPs back to back;
//	        for CONTROL frames a control message (see control.go)
//
// Credit limits are cumulative, like PCIe's CREDIT_LIMIT: the sender may
// send while consumed+needed <= limit in modular arithmetic. A frame shorter
// than the Ethernet minimum is padded; the body length, not the frame's
// length, delimits the TLPs.
//
// Rules ParseFrame enforces (each violation is a *FrameError naming the
// field and its offset, wrapping a sentinel such as ErrVersion):
//   - version 1 (ErrVersion), message type 1..5 (ErrMsgType);
//   - over UDP, 40 + body length equals the UDP payload length (ErrBodyLength);
//   - non-TLP messages have N = 0; a TLP message's body holds exactly the
//     2N-byte length table and the N TLPs (ErrTLPCount, ErrTLPLength);
//   - each TLP length is a multiple of 4 and at least 12 (a 3DW header);
//   - IPv4: version 4, IHL >= 5, total length >= header, checksum verifies
//     (unless Config.SkipIPv4Checksum), no more-fragments flag on a TLP
//     datagram; UDP length >= 8 and within the IPv4 datagram.
//
// A frame cut short by a capture's snap length is not an error (unless
// Config.RejectTruncated): Frame.Truncated reports it, and Frame.TLP returns
// the bytes present with truncated = true for each TLP that is cut.
//
// # NetTLP encapsulation
//
// NetTLP (the NSDI 2020 platform: libtlp and the NetTLP FPGA adapter) sends
// each TLP alone in a UDP datagram between ports 0x3000 + tag on both sides
// (tag: Tag[7:0] of the TLP; the adapter and libtlp use tags 0..15):
//
//	off len field
//	  0   2 sequence number (big-endian; libtlp sends 0, adapters count)
//	  2   4 timestamp (big-endian; libtlp sends 0)
//	  6   n one TLP: header, data, no DLLP framing, no LCRC; n = UDP length - 8 - 6
//
// ParseFrame recognises NetTLP when either UDP port lies in
// Config.NetTLPPortMin..Max (default 0x3000..0x30ff) and the destination is
// not the dxpu port.
//
// # Worked example: dxpu over Ethernet carrying one MRd
//
// Pair 42, Seq 7, Ack 3 (ACK and CREDIT flags), credit limits PH 32, NPH 16,
// PD 256, NPD 16, CplH and CplD infinite; the TLP is a 3DW MRd of one DW at
// 0xf0001000 from requester 01:00.0 with tag 5. 68 bytes, no padding needed:
//
//	02 00 00 00 00 02              destination MAC
//	02 00 00 00 00 01              source MAC
//	88 b5                          EtherType dxpu
//	13                             version 1, flags ACK|CREDIT
//	01                             message type TLP
//	00 00 2a                       pair ID 42
//	01                             N = 1 TLP
//	00 0e                          body length 14 = 2 (length table) + 12 (TLP)
//	00 00 00 07                    Seq 7
//	00 00 00 03                    Ack 3
//	00 00 00 00                    SACK
//	00 20  00 10  00 00            PH limit 32, NPH limit 16, CplH limit 0
//	30  00                         infinite: CplH (bit 4), CplD (bit 5); reserved
//	00 00 01 00                    PD limit 256 (x16 bytes)
//	00 00 00 10                    NPD limit 16
//	00 00 00 00                    CplD limit 0 (infinite)
//	00 0c                          TLP 0 is 12 bytes
//	00 00 00 01                    MRd: Fmt 000 Type 00000, Length 1
//	01 00 05 0f                    requester 01:00.0, tag 5, Last BE 0, First BE f
//	f0 00 10 00                    address 0xf0001000
//
// With an 802.1Q tag for VLAN 100, 81 00 00 64 goes between the source MAC
// and 88 b5. Over UDP the same dxpu header and body follow an IPv4 header
// (protocol 17) and a UDP header to port 8855 (22 97).
//
// # Worked example: a NetTLP frame
//
// The same MRd sent by NetTLP from 192.168.10.1 to 192.168.10.3, sequence
// 0x01b3, timestamp 0xe132da1b; 60 bytes, exactly the Ethernet minimum:
//
//	02 00 00 00 00 02 02 00 00 00 00 01 08 00   MACs, EtherType IPv4
//	45 00 00 2e                                 IPv4, IHL 5, total length 46
//	00 00 40 00                                 ID 0, DF
//	40 11 a5 6a                                 TTL 64, UDP, header checksum
//	c0 a8 0a 01  c0 a8 0a 03                    192.168.10.1 -> 192.168.10.3
//	30 05 30 05 00 1a 00 00                     UDP 0x3005 -> 0x3005 (tag 5), length 26, no checksum
//	01 b3  e1 32 da 1b                          NetTLP sequence, timestamp
//	00 00 00 01 01 00 05 0f f0 00 10 00         the MRd
//
// Both examples are checked byte for byte by TestDocExamples.
package encap
