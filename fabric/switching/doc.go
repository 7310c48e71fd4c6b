// Package switching is the userspace forwarding path of the dxpu switch and
// the specification of its XDP fast path (package xdp): the same decision,
// byte for byte, over the same compiled rules. Frames are read through
// package encap's views (encap.Ethernet, encap.VLAN, encap.IPv4, encap.UDP,
// encap.Header), whose constants xdp's tests pin to the XDP program's.
//
// # What the switch accepts
//
// A dxpu frame is
//
//	raw Ethernet:  dst(6) src(6) [8100 TCI(2)] 88B5 | dxpu header (40) | body
//	UDP/IPv4:      dst(6) src(6) [8100 TCI(2)] 0800 | IPv4 (IHL*4) | UDP (8, dst port 8855) | dxpu header | body
//
// The pair ID is bytes 2..4 of the dxpu header (24-bit big-endian). Anything
// else (other EtherTypes, other UDP ports, IP fragments, frames with two
// VLAN tags, which encap.ParseFrame reads but the XDP program does not) is
// not dxpu and is passed to the kernel stack (VerdictPass).
//
// # The decision, in order
//
//  1. dxpu header shorter than 40 bytes or version (byte 0 bits 7:4) not 1:
//     drop, ReasonMalformed.
//  2. Message type (byte 1) CONTROL (5): slow path, ReasonControl.
//  3. Pair ID not in the table: slow path, ReasonUnknownPair.
//  4. The frame must have come in on the host's port from the host's MAC
//     (and, over UDP, from its IP when the table gives one): it goes to the
//     GPU; or likewise from the GPU: it goes to the host. Otherwise drop,
//     ReasonSpoofed, counted on the pair and on the ingress port.
//  5. DropPPM > 0: drop with probability DropPPM/10^6, ReasonFault.
//  6. Rewrite for the next hop: UDP frames get source IP = egress port's
//     IPv4 address (kept when the port has none), destination IP = far
//     endpoint's (kept when unset), source UDP port = the switch's dxpu port,
//     destination UDP port = the endpoint's (default 8855); the IPv4
//     checksum is updated incrementally (RFC 1624), so is the UDP checksum
//     unless it is 0 (absent), and a result of 0 is sent as 0xFFFF. The
//     802.1Q tag is set to the pair's VLAN (PCP/DEI kept), pushed if the
//     frame had none, popped if the pair's VLAN is 0. Destination MAC = far
//     endpoint, source MAC = egress port.
//  7. Forward out of the far endpoint's port: ReasonToGPU or ReasonToHost,
//     counted on the pair and the ingress port; the transmission as
//     ReasonTxToGPU or ReasonTxToHost on the pair and the egress port.
//
// Slow-path frames go to the AF_XDP socket or AF_PACKET listener of the
// daemon, where ForwardControl decides again: CONTROL messages are the
// bridges' handshake and keepalives, so they are forwarded like data (same
// checks, same rewrite); frames of unknown pairs are dropped. VerdictPass
// frames are the kernel's.
//
// # Drivers
//
// Forward is sans-I/O. PacketDriver runs it over AF_PACKET sockets (tags
// that the NIC strips are put back from the packet auxdata), package afxdp
// over AF_XDP sockets, UDPDriver over a UDP socket with ForwardDatagram
// (the same rules with IP:port in place of port and MAC; no root needed).
// PacketDriver and UDPDriver move frames in batches: up to 32 per
// recvmmsg(2), the batch's forwarded frames in one sendmmsg(2), without
// allocation. Replay runs it over a capture.
//
// # Worked example
//
// Pair 0x000102, host 02:00:00:00:00:01 behind port h (ifindex 2), GPU
// 02:00:00:00:00:02 behind port g (ifindex 3, MAC 02:00:00:00:00:0b), VLAN
// 0. The host sends on h
//
//	02 00 00 00 00 0a  02 00 00 00 00 01  88 b5   (to port h's MAC, from host)
//	10 01 00 01 02 01 00 06 ...                   (v1, TLP, pair 0x000102, 1 TLP)
//
// and port g transmits
//
//	02 00 00 00 00 02  02 00 00 00 00 0b  88 b5   (to GPU, from port g)
//	10 01 00 01 02 01 00 06 ...                   (unchanged)
package switching
