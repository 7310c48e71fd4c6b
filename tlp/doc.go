// Package tlp decodes, validates and encodes PCIe Transaction Layer
// Packets (TLPs) as the PCIe Base Specification defines them: MRd, MRdLk
// and MWr (3- and 4-DW headers), IORd, IOWr, CfgRd0/1, CfgWr0/1, Msg and
// MsgD (all six routings), Cpl, CplD, CplLk, CplDLk, FetchAdd, Swap and
// CAS (32- and 64-bit addresses), with 10-bit tags, TH/PH, LN, AT, EP and
// the TD/ECRC digest.
//
// Two representations:
//   - View, a zero-copy []byte with accessors and in-place setters, for the
//     hot path. Parse validates a byte slice and returns it as a View
//     without allocating; ParseTruncated accepts captures cut short.
//   - Packet, a value with every field, for building TLPs (AppendTo,
//     Encode, which validate with the same rules) and for JSON
//     (MarshalJSON, UnmarshalJSON, EncodeJSON: the format of `dxpu tlp`).
//
// Violations are *Error values naming the rule (Rule* constants), the
// field and the value; errors.Is matches ErrMalformed and a specific
// sentinel (ErrTruncated, ErrReservedFmtType, ErrLengthMismatch,
// ErrByteEnables, ErrCross4K, ErrBadECRC, ...). Reserved bits outside DW0
// are ignored, as receivers must; TLP prefixes (Fmt 100) are rejected with
// ErrPrefix and can be separated with SplitPrefixes.
//
// Helpers: ByteCount and First/LastByteAddress (byte count from Length and
// byte enables), CplSplitter (a read's completions by MPS and RCB, with
// Byte Count and Lower Address), ReqSplitter (requests by MRRS or MPS and
// 4 KiB), Class/Credits (flow-control class, header and data credits).
// None of them allocates.
//
// # Wire format
//
// Every DW is big-endian; bit 31 of DW0 is the most significant bit of
// byte 0. The header is 3 DWs (12 bytes) or 4 DWs (16 bytes); the payload
// (Length DWs, 0 meaning 1024) follows when Fmt says so, then the 1-DW
// ECRC when TD is set.
//
//	byte 0   Fmt[2:0] (7:5)  Type[4:0] (4:0)
//	         Fmt 000 3DW no data, 001 4DW no data, 010 3DW data,
//	         011 4DW data, 100 prefix, 101-111 reserved
//	byte 1   T9 (7)  TC[2:0] (6:4)  T8 (3)  Attr[2]=IDO (2)  LN (1)  TH (0)
//	byte 2   TD (7)  EP (6)  Attr[1]=RO (5)  Attr[0]=NS (4)  AT[1:0] (3:2)
//	         Length[9:8] (1:0)
//	byte 3   Length[7:0]
//
// Byte 0 per kind (3DW / 4DW): MRd 00/20, MRdLk 01/21, MWr 40/60, IORd 02,
// IOWr 42, CfgRd0 04, CfgWr0 44, CfgRd1 05, CfgWr1 45, Msg 30|r, MsgD 70|r
// (r = routing: 0 to root complex, 1 by address, 2 by ID, 3 broadcast,
// 4 local, 5 gathered to root complex), Cpl 0a, CplD 4a, CplLk 0b,
// CplDLk 4b, FetchAdd 4c/6c, Swap 4d/6d, CAS 4e/6e.
//
// Requests (memory, IO, config, atomic, message), DW1:
//
//	bytes 4-5  Requester ID: bus (15:8), device (7:3), function (2:0)
//	byte 6     Tag[7:0] (T9 and T8 are in byte 1)
//	byte 7     Last DW BE (7:4), First DW BE (3:0); Message Code on messages
//
// Memory, IO and atomic requests, DW2 (3DW) or DW2-3 (4DW): the address,
// bits 63:2 (DW2 = 63:32 and DW3 = 31:2 in the 4DW form), with PH in bits
// 1:0 of the last address DW (memory requests and AtomicOps).
// Configuration requests, DW2:
//
//	bytes 8-9  target ID (bus, device, function)
//	byte 10    reserved (7:4), Extended Register Number (3:0)
//	byte 11    Register Number (7:2), reserved (1:0)
//	           (byte offset of the register = DW2 & 0xffc)
//
// Messages, DW2-3: the address (routed by address), the target ID in
// bytes 8-9 (routed by ID), or message-specific fields.
//
// Completions:
//
//	bytes 4-5  Completer ID
//	byte 6     Status (7:5: 000 SC, 001 UR, 010 CRS, 100 CA), BCM (4),
//	           Byte Count[11:8] (3:0)
//	byte 7     Byte Count[7:0] (0 means 4096)
//	bytes 8-9  Requester ID
//	byte 10    Tag[7:0]
//	byte 11    reserved (7), Lower Address (6:0)
//
// Rules checked (see the Rule* constants): reserved Fmt/Type and message
// routing, prefixes, header and payload sizes (header + Length DWs +
// digest), data on a TLP type without data, IO and configuration requests
// (Length 1, TC 0, Attr[1:0] 0, AT 0, Last BE 0), byte enables (Length 1:
// Last BE 0; Length > 1: both non-zero and contiguous unless the request
// is 2 DWs and QW aligned; not applied to reads with TH, whose BE fields
// carry a steering tag), memory requests crossing 4 KiB, AtomicOp operand
// sizes (FetchAdd/Swap 1 or 2 DW, CAS 2, 4 or 8) and natural alignment, a
// CplD carrying more than its Byte Count from Lower Address, TC 0 on the
// messages that require it (Unlock, power management, INTx, errors,
// Set_Slot_Power_Limit), and the ECRC. Left to the caller, because they
// need context: completion sizes against MPS, Lower Address and Byte Count
// against the request, and a 4-DW header for an address below 4 GiB (a
// requester error the specification does not make malformed).
//
// # ECRC
//
// CRC-32, polynomial 04C1 1DB7h, seed FFFF FFFFh, over header and payload
// with Type[0] and EP taken as 1 (a bridge may turn CfgRd1 into CfgRd0, a
// switch may poison the TLP), bytes in wire order, bit 0 of each byte
// first, remainder complemented and bit-swapped per byte: the digest bytes
// are the IEEE 802.3 CRC-32 of the masked TLP, least significant byte
// first. ComputeECRC returns it as the big-endian DW it forms on the wire.
//
// # Worked example
//
// A 3DW memory read of 4 bytes at 0xfedc0010 by 01:00.0, tag 5:
//
//	00 00 00 01   Fmt 000 Type 00000 (MRd), TC 0, Attr 0, Length 1
//	01 00 05 0f   Requester 01:00.0, Tag 0x05, Last BE 0000, First BE 1111
//	fe dc 00 10   Address 0xfedc0010, PH 00
//
// and the completion from 03:00.0 that returns 11 22 33 44:
//
//	4a 00 00 01   Fmt 010 Type 01010 (CplD), Length 1
//	03 00 00 04   Completer 03:00.0, Status SC, BCM 0, Byte Count 4
//	01 00 05 10   Requester 01:00.0, Tag 0x05, Lower Address 0x10
//	11 22 33 44   data
//
// `dxpu tlp decode` prints the read as
//
//	{"kind":"MRd","fmt":0,"type":0,"tc":0,"attr":0,"th":false,"td":false,
//	 "ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":5,
//	 "first_be":15,"last_be":0,"address":"0xfedc0010","ph":0}
//
// (one line). With TD set, the read becomes 00 00 80 01 ... followed by its
// 4-byte ECRC, ba 2b 1e 6e (see ExamplePacket_AppendTo).
package tlp
