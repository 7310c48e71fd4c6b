// Package encap reads and writes the frames that carry TLPs between bridges:
// dxpu's own encapsulation (version 1) over raw Ethernet or UDP/IPv4, and
// NetTLP's encapsulation (UDP, 6-byte header, one TLP per datagram).
//
// # dxpu encapsulation, version 1
//
// On raw Ethernet the header follows EtherType 0x88B5 (after an optional
// 802.1Q tag, TPID 0x8100). Over UDP/IPv4 it is the UDP payload, destination
// port 8855 by default. All fields are big-endian. The fixed header is 40
// bytes:
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
package encap
