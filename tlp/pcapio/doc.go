// Package pcapio reads and writes packet captures, classic pcap and pcapng,
// through gopacket's pcapgo, hardened for untrusted files.
//
// Reading auto-detects the format from the first four bytes (after
// transparently removing gzip compression, magic 1f 8b):
//
//	a1 b2 c3 d4 / d4 c3 b2 a1   pcap, microsecond timestamps (big / little endian)
//	a1 b2 3c 4d / 4d 3c b2 a1   pcap, nanosecond timestamps  (big / little endian)
//	0a 0d 0d 0a                 pcapng (Section Header Block)
//
// # Classic pcap, byte by byte (little-endian file as written here)
//
//	file header (24 bytes)
//	  0  4 magic      d4 c3 b2 a1 (µs) or 4d 3c b2 a1 (ns)
//	  4  2 version    02 00   (2)
//	  6  2 minor      04 00   (4)
//	  8  4 thiszone   00 00 00 00
//	 12  4 sigfigs    00 00 00 00
//	 16  4 snaplen    e.g. 00 00 04 00 (262144)
//	 20  4 linktype   01 00 00 00 (Ethernet)
//	record header (16 bytes), then incl_len bytes of frame
//	  0  4 ts_sec
//	  4  4 ts_usec or ts_nsec
//	  8  4 incl_len   bytes stored
//	 12  4 orig_len   bytes on the wire (> incl_len when the snap length cut the frame)
//
// # pcapng, byte by byte (blocks; all little-endian here)
//
//	block: type (4) | total length (4) | body | total length (4), lengths multiple of 4
//	  0a0d0d0a Section Header:  byte-order magic 1a2b3c4d, version 1.0, section length, options
//	  00000001 Interface Description: linktype (2), reserved (2), snaplen (4), options
//	           (if_tsresol, code 9, one byte: 6 = µs, the default; 9 = ns)
//	  00000006 Enhanced Packet: interface (4), ts high (4), ts low (4),
//	           captured len (4), original len (4), data padded to 4, options
//
// Writing: pcap with µs or ns magic; pcapng always records if_tsresol = 9
// (pcapgo's writer fixes it), and with microsecond resolution requested the
// timestamps are truncated to whole microseconds.
//
// # Hardening
//
// pcapgo trusts lengths in the file and panics or allocates gigabytes on some
// malformed input. This package caps every record at MaxSnaplen bytes before
// pcapgo allocates, checks each pcapng block (lengths, captured length within
// the block, option lengths, timestamp resolution) before pcapgo sees it, and
// turns any remaining panic inside pcapgo into an error. Every error names the
// record number and, for pcapng, the byte offset of the block.
//
// # Worked example
//
// A nanosecond pcap holding one 60-byte Ethernet frame captured at
// 1.000000002 s:
//
//	4d 3c b2 a1 02 00 04 00 00 00 00 00 00 00 00 00  magic (ns), 2.4, zone, sigfigs
//	00 00 04 00 01 00 00 00                          snaplen 262144, Ethernet
//	01 00 00 00 02 00 00 00 3c 00 00 00 3c 00 00 00  ts 1 s + 2 ns, 60 of 60 bytes
//	...60 bytes of frame...
package pcapio
