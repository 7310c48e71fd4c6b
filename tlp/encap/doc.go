// Package encap reads and writes the frames that carry TLPs between bridges:
// dxpu's own encapsulation (version 1) over raw Ethernet or UDP/IPv4, and
// NetTLP's encapsulation (UDP, 6-byte header, one TLP per datagram).
//
// ParseFrame reads any of them, with or without VLAN tags (802.1Q, and an
// 802.1ad or stacked 802.1Q outer tag), into a Frame of offsets (no
// allocation, no copy); the Append* builders and Packer write them (no
// allocation once the destination has capacity).
//
// # Frame layouts
//
//	dxpu-eth:  Ethernet (14) [tag (4) [tag (4)]] EtherType 88 b5 | dxpu header (40) | body | padding
//	dxpu-udp:  Ethernet (14) [tag (4) [tag (4)]] 08 00 | IPv4 (20+) | UDP (8, dst port 8855) | dxpu header | body | padding
//	nettlp:    Ethernet (14) [tag (4) [tag (4)]] 08 00 | IPv4 (20+) | UDP (8, ports 0x3000+tag) | NetTLP header (6) | TLP | padding
//
// # Views: one parser of the stack
//
// Every layer has a view, a []byte type read and written in place (after
// gVisor's pkg/tcpip/header): named offset constants, accessors that
// allocate nothing, and no length checks of their own (the caller checks
// the layer's size first). Ethernet, VLAN, IPv4, UDP, NetTLPHeader and
// Header are the views; Walk uses them to find where the dxpu or NetTLP
// data starts (Layers), and ParseFrame is Walk plus the dxpu and NetTLP
// rules. The switch (fabric/switching) and the test rigs read frames
// through the same views, and xdp's tests pin the XDP program's constants
// to these. Offsets count from each view's first byte:
//
//	Ethernet (EthHeaderLen 14)
//	  0  6 EthDstOffset        destination MAC
//	  6  6 EthSrcOffset        source MAC
//	 12  2 EthTypeOffset       EtherType, or the TPID of the first tag
//	VLAN (VLANTagLen 4; the first tag starts at frame offset 12, a second at 16)
//	  0  2 VLANTPIDOffset      8100 (802.1Q), 88a8 (802.1ad S-tag) or 9100 (pre-standard)
//	  2  2 VLANTCIOffset       PCP (bits 15:13), DEI (bit 12), VID (bits 11:0)
//	  4                        the next tag's TPID or the EtherType
//	IPv4 (IPv4HeaderLen 20 without options; HeaderLen() = IHL x 4)
//	  0  1 IPv4VersionIHLOffset version 4 (bits 7:4), IHL (bits 3:0)
//	  1  1 IPv4TOSOffset        DSCP and ECN
//	  2  2 IPv4TotalLenOffset   header and data
//	  4  2 IPv4IDOffset         identification
//	  6  2 IPv4FlagsFragOffset  DF 0x4000, MF 0x2000, fragment offset 0x1fff (8-byte units)
//	  8  1 IPv4TTLOffset        time to live
//	  9  1 IPv4ProtocolOffset   17 (UDP)
//	 10  2 IPv4ChecksumOffset   header checksum
//	 12  4 IPv4SrcOffset        source address
//	 16  4 IPv4DstOffset        destination address
//	UDP (UDPHeaderLen 8)
//	  0  2 UDPSrcPortOffset    6  2 UDPChecksumOffset (0: none)
//	  2  2 UDPDstPortOffset    4  2 UDPLengthOffset   (header and payload)
//	NetTLPHeader (NetTLPHeaderLen 6) and Header (HeaderLen 40): below.
//
// # VLAN tags and QinQ
//
// Up to MaxVLANTags (2) tags are read, outermost first: a single 802.1Q
// tag, or an outer tag (802.1ad S-tag 0x88a8, a stacked 802.1Q 0x8100, or
// the pre-standard 0x9100) and the 802.1Q C-tag inside it. A third tag is
// ErrVLAN. Frame.VLANTag(i) returns tag i's TPID and TCI; Frame.VLAN the
// outermost VID. L2.OuterTPID makes the builders write the outer tag. (The
// switch's XDP fast path, and so fabric/switching, reads one 802.1Q tag
// only: a QinQ frame is not dxpu to the switch.)
//
// Builders write IPv4 headers of 20 bytes with DF set, TTL 64 by default and
// a correct header checksum, and UDP checksum 0 (none, allowed over IPv4).
// Frames shorter than 60 bytes (the Ethernet minimum without FCS) are padded
// with zeros; the lengths in the headers, never the frame's length, delimit
// the TLPs, so padding is ignored on reading.
//
// # dxpu encapsulation, version 1
//
// On raw Ethernet the header follows EtherType 0x88B5 (after any tags). Over UDP/IPv4 it is the UDP payload, destination
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
// The NetTLPHeader view reads the header (NetTLPSeqOffset 0,
// NetTLPTimestampOffset 2). ParseFrame recognises NetTLP when either UDP port lies in
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
// # Worked example: dxpu over UDP in QinQ
//
// The MRd of the first example over UDP from 192.168.10.1 to 192.168.10.3,
// in customer VLAN 100 inside service VLAN 200 (PCP 3); 104 bytes. The
// views start at the offsets on the left:
//
//	 0 Ethernet   02 00 00 00 00 02 02 00 00 00 00 01   destination, source MAC (the EtherType field is the S-tag's TPID)
//	12 VLAN       88 a8 60 c8                           S-tag (802.1ad): PCP 3, DEI 0, VID 200 (0x0c8)
//	16 VLAN       81 00 00 64                           C-tag (802.1Q): PCP 0, VID 100
//	20            08 00                                 EtherType IPv4
//	22 IPv4       45 00 00 52                           version 4, IHL 5, total length 82
//	              00 00 40 00                           ID 0, DF
//	              40 11 a5 46                           TTL 64, UDP, header checksum
//	              c0 a8 0a 01  c0 a8 0a 03              192.168.10.1 -> 192.168.10.3
//	42 UDP        22 97 22 97 00 3e 00 00               8855 -> 8855, length 62, no checksum
//	50 Header     13 01 00 00 2a 01 00 0e ...           the dxpu header and body of the first example
//
// Walk reports Tags 2, EtherType 0x0800, Net 22, IPv4 22, UDP 42, Payload
// 50, UDPEnd 104.
//
// All three examples are checked byte for byte by TestDocExamples.
package encap
