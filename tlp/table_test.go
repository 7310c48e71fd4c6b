package tlp

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}

// Every vector below was worked out by hand from the header layouts in
// ../shared/reference/pcie-tlp.md (DW0: Fmt 31:29, Type 28:24, T9 23,
// TC 22:20, T8 19, Attr[2] 18, LN 17, TH 16, TD 15, EP 14, Attr[1:0] 13:12,
// AT 11:10, Length 9:0; IDs are bus<<8 | dev<<3 | fn). The expected JSON is
// the exact line `dxpu tlp decode` prints.
var validVectors = []struct {
	name string
	hex  string
	want string
}{
	{
		// byte0 Fmt 000 Type 00000 = 00; bytes 1-2 zero; Length 1.
		// DW1: requester 01:00.0 = 0100, tag 05, Last BE 0 / First BE f.
		// DW2: address fedc0010, PH 00.
		"MRd 3DW", "00000001 0100050f fedc0010",
		`{"kind":"MRd","fmt":0,"type":0,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"last_be":0,"address":"0xfedc0010","ph":0}`,
	},
	{
		// byte0 Fmt 001 = 20. byte1: T9=1 (80) | TC 3 (30) = b0 -> tag bit 9.
		// byte2: Attr[1:0]=11 (RO, NS) = 30. Length 0x20 = 32 DW.
		// DW1: 1a:01.0 = 1a08, Tag[7:0] a5 -> tag 0x2a5 = 677; BEs ff.
		// DW2-3: address 0x12_34567800 (4 KiB: 0x800 + 128 < 0x1000).
		"MRd 4DW 10-bit tag", "20b03020 1a08a5ff 00000012 34567800",
		`{"kind":"MRd","fmt":1,"type":0,"tc":3,"attr":3,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":32,"requester_id":"1a:01.0","tag":677,"first_be":15,"last_be":15,"address":"0x1234567800","ph":0}`,
	},
	{
		// Fmt 000 Type 00001 = 01. Length 0 reads 1024 DW: 4 KiB from a
		// 4 KiB-aligned address. TC 0, BEs f/f.
		"MRdLk 1024 DW", "01000000 010006ff 00002000",
		`{"kind":"MRdLk","fmt":0,"type":1,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1024,"requester_id":"01:00.0","tag":6,"first_be":15,"last_be":15,"address":"0x2000","ph":0}`,
	},
	{
		// Fmt 010 = 40. byte1: T8 (08) | Attr[2] IDO (04) = 0c -> tag 0x100.
		// byte2: EP (40). Length 2. DW1: 00:02.1 = 0011, tag 00, Last BE 3,
		// First BE c (bytes 2-3 of the first DW, 0-1 of the last: contiguous,
		// as a 2-DW request at 0x1004 (not QW aligned) must be).
		"MWr 3DW poisoned", "400c4002 0011003c 00001004 deadbeef 01020304",
		`{"kind":"MWr","fmt":2,"type":0,"tc":0,"attr":4,"th":false,"td":false,"ep":true,"ln":false,"at":0,"length":2,"requester_id":"00:02.1","tag":256,"first_be":12,"last_be":3,"address":"0x1004","ph":0,"data":"deadbeef01020304"}`,
	},
	{
		// Fmt 011 = 60. byte1: TC 0, TH (01). byte2: AT 10 translated (08).
		// DW3 low bits: PH 11.
		"MWr 4DW TH PH", "60010801 01000a0f 00000001 00000003 0badcafe",
		`{"kind":"MWr","fmt":3,"type":0,"tc":0,"attr":0,"th":true,"td":false,"ep":false,"ln":false,"at":2,"length":1,"requester_id":"01:00.0","tag":10,"first_be":15,"last_be":0,"address":"0x100000000","ph":3,"data":"0badcafe"}`,
	},
	{
		// 2-DW request at a QW-aligned address: non-contiguous BEs (a, 5)
		// are allowed.
		"MRd QW-aligned sparse BEs", "00000002 010005 5a fedc0008",
		`{"kind":"MRd","fmt":0,"type":0,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":2,"requester_id":"01:00.0","tag":5,"first_be":10,"last_be":5,"address":"0xfedc0008","ph":0}`,
	},
	{
		// Fmt 000 Type 00010 = 02; Length 1. 00:1f.0 = 00f8, tag 07, BE 0f.
		"IORd", "02000001 00f8070f 00000cf8",
		`{"kind":"IORd","fmt":0,"type":2,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"00:1f.0","tag":7,"first_be":15,"last_be":0,"address":"0xcf8"}`,
	},
	{
		"IOWr", "42000001 00f8080c 00000cfc 12345678",
		`{"kind":"IOWr","fmt":2,"type":2,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"00:1f.0","tag":8,"first_be":12,"last_be":0,"address":"0xcfc","data":"12345678"}`,
	},
	{
		// Fmt 000 Type 00100 = 04. DW2: target 03:00.0 = 0300, extended
		// register 1 (bits 11:8), register 0 -> byte offset 0x100 = 256.
		"CfgRd0", "04000001 0000010f 03000100",
		`{"kind":"CfgRd0","fmt":0,"type":4,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"00:00.0","tag":1,"first_be":15,"last_be":0,"target_id":"03:00.0","register":256}`,
	},
	{
		// Fmt 010 Type 00101 = 45. Target 05:1f.7 = 05ff, register 0xffc.
		"CfgWr1", "45000001 0000020f 05ff0ffc aabbccdd",
		`{"kind":"CfgWr1","fmt":2,"type":5,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"00:00.0","tag":2,"first_be":15,"last_be":0,"target_id":"05:1f.7","register":4092,"data":"aabbccdd"}`,
	},
	{
		"CfgRd1", "05000001 00000301 0a080004",
		`{"kind":"CfgRd1","fmt":0,"type":5,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"00:00.0","tag":3,"first_be":1,"last_be":0,"target_id":"0a:01.0","register":4}`,
	},
	{
		"CfgWr0", "44000001 00000403 0a080010 00000001",
		`{"kind":"CfgWr0","fmt":2,"type":4,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"00:00.0","tag":4,"first_be":3,"last_be":0,"target_id":"0a:01.0","register":16,"data":"00000001"}`,
	},
	{
		// Assert_INTA (code 20) is routed local: Fmt 001, Type 10100 = 34.
		// Length reserved (0). DW1: 03:00.0, tag 0, message code 20.
		"Msg Assert_INTA", "34000000 03000020 00000000 00000000",
		`{"kind":"Msg","fmt":1,"type":20,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":0,"requester_id":"03:00.0","tag":0,"message_code":32,"routing":4}`,
	},
	{
		// ERR_COR (30) to the root complex: Type 10000 = 30.
		"Msg ERR_COR", "30000000 03000030 00000000 00000000",
		`{"kind":"Msg","fmt":1,"type":16,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":0,"requester_id":"03:00.0","tag":0,"message_code":48,"routing":0}`,
	},
	{
		// Routed by address: Type 10001 = 31, DW2:DW3 the address.
		"Msg by address", "31000000 0100007e 00000001 00002000",
		`{"kind":"Msg","fmt":1,"type":17,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":0,"requester_id":"01:00.0","tag":0,"message_code":126,"routing":1,"address":"0x100002000"}`,
	},
	{
		// Vendor-defined type 1 (7f) with data, routed by ID: Fmt 011,
		// Type 10010 = 72. DW2: target 02:00.0, vendor ID 8086; DW3 vendor
		// data 00000001 (shown raw as msg_dw2/msg_dw3).
		"MsgD vendor by ID", "72000001 0100007f 02008086 00000001 cafef00d",
		`{"kind":"MsgD","fmt":3,"type":18,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":0,"message_code":127,"routing":2,"target_id":"02:00.0","msg_dw2":"0x02008086","msg_dw3":"0x00000001","data":"cafef00d"}`,
	},
	{
		"MsgD broadcast", "73000001 01000050 00000000 00000000 000000ff",
		`{"kind":"MsgD","fmt":3,"type":19,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":0,"message_code":80,"routing":3,"data":"000000ff"}`,
	},
	{
		"Msg gather", "35000000 01000019 00000000 00000000",
		`{"kind":"Msg","fmt":1,"type":21,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":0,"requester_id":"01:00.0","tag":0,"message_code":25,"routing":5}`,
	},
	{
		// UR completion to the IORd above: Fmt 000 Type 01010 = 0a. DW1:
		// completer 00:00.0, status 001 (bits 15:13 -> 20), Byte Count 4.
		// DW2: requester 00:1f.0, tag 07, Lower Address 0.
		"Cpl UR", "0a000000 00002004 00f80700",
		`{"kind":"Cpl","fmt":0,"type":10,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":0,"completer_id":"00:00.0","status":"UR","bcm":false,"byte_count":4,"requester_id":"00:1f.0","tag":7,"lower_address":0}`,
	},
	{
		// CplD for the first MRd: 03:00.0 returns 4 bytes, Lower Address 10.
		"CplD", "4a000001 03000004 01000510 11223344",
		`{"kind":"CplD","fmt":2,"type":10,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"completer_id":"03:00.0","status":"SC","bcm":false,"byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":16,"data":"11223344"}`,
	},
	{
		// A Byte Count field of 0 reads 4096; T9 in DW0 (80) + Tag[7:0] ff
		// in DW2 = tag 0x2ff. Status 3 is reserved: shown as a number.
		"CplD byte count 4096", "4a800001 03006000 010dff00 00000000",
		`{"kind":"CplD","fmt":2,"type":10,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"completer_id":"03:00.0","status":3,"bcm":false,"byte_count":4096,"requester_id":"01:01.5","tag":767,"lower_address":0,"data":"00000000"}`,
	},
	{
		// CplLk: Type 01011 = 0b; CA = 100 -> 80 in byte 6; BCM (10).
		"CplLk CA", "0b000000 03009004 01000500",
		`{"kind":"CplLk","fmt":0,"type":11,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":0,"completer_id":"03:00.0","status":"CA","bcm":true,"byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":0}`,
	},
	{
		"CplDLk CRS", "4b000001 03004004 0100057f 01020304",
		`{"kind":"CplDLk","fmt":2,"type":11,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"completer_id":"03:00.0","status":"CRS","bcm":false,"byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":127,"data":"01020304"}`,
	},
	{
		// FetchAdd 32-bit: Fmt 010 Type 01100 = 4c, Length 1.
		"FetchAdd 3DW", "4c000001 01000900 00001000 00000001",
		`{"kind":"FetchAdd","fmt":2,"type":12,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":9,"first_be":0,"last_be":0,"address":"0x1000","ph":0,"data":"00000001"}`,
	},
	{
		// Swap 64-bit, 4-DW: Fmt 011 Type 01101 = 6d, Length 2, 8-aligned.
		"Swap 4DW", "6d000002 01000b00 00000002 00000008 0000000000000002",
		`{"kind":"Swap","fmt":3,"type":13,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":2,"requester_id":"01:00.0","tag":11,"first_be":0,"last_be":0,"address":"0x200000008","ph":0,"data":"0000000000000002"}`,
	},
	{
		// CAS with 64-bit compare and swap values: Type 01110, Length 4.
		"CAS 3DW", "4e000004 01000c00 00003008 00000000000000010000000000000002",
		`{"kind":"CAS","fmt":2,"type":14,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":4,"requester_id":"01:00.0","tag":12,"first_be":0,"last_be":0,"address":"0x3008","ph":0,"data":"00000000000000010000000000000002"}`,
	},
	{
		"CAS 128-bit 4DW", "6e000008 01000d00 00000001 00000010 " + strings.Repeat("00", 32),
		`{"kind":"CAS","fmt":3,"type":14,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":8,"requester_id":"01:00.0","tag":13,"first_be":0,"last_be":0,"address":"0x100000010","ph":0,"data":"` + strings.Repeat("00", 32) + `"}`,
	},
	{
		// A 4-DW memory request below 4 GiB is a requester error but not a
		// malformed TLP: it decodes and re-encodes as 4 DW.
		"MRd 4DW below 4 GiB", "20000001 0100050f 00000000 fedc0010",
		`{"kind":"MRd","fmt":1,"type":0,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"last_be":0,"address":"0xfedc0010","ph":0}`,
	},
	{
		// A read with TH carries a steering tag in the BE fields: BE rules
		// do not apply (here ST = 0x12, First BE 2 / Last BE 1 would be
		// non-contiguous on a 3-DW read).
		"MRd TH steering tag", "00010003 01000512 fedc0010",
		`{"kind":"MRd","fmt":0,"type":0,"tc":0,"attr":0,"th":true,"td":false,"ep":false,"ln":false,"at":0,"length":3,"requester_id":"01:00.0","tag":5,"first_be":2,"last_be":1,"address":"0xfedc0010","ph":0}`,
	},
}

func TestValidVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range validVectors {
		t.Run(tc.name, func(t *testing.T) {
			b := unhex(t, tc.hex)
			v, err := Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var p Packet
			if err := p.Decode(v); err != nil {
				t.Fatal(err)
			}
			got, _ := p.MarshalJSON()
			if string(got) != tc.want {
				t.Errorf("JSON\n got %s\nwant %s", got, tc.want)
			}
			enc, err := p.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !reflect.DeepEqual(enc, b) {
				t.Errorf("encode(decode(x))\n got %x\nwant %x", enc, b)
			}
			// The JSON form encodes back to the same bytes too.
			enc2, err := EncodeJSON(nil, []byte(tc.want))
			if err != nil {
				t.Fatalf("EncodeJSON: %v", err)
			}
			if !reflect.DeepEqual(enc2, b) {
				t.Errorf("EncodeJSON\n got %x\nwant %x", enc2, b)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON %s", got)
			}
		})
	}
}

var errorVectors = []struct {
	name     string
	hex      string
	rule     string
	sentinel error
}{
	{"empty", "", RuleTruncatedHeader, ErrTruncated},
	{"short header", "00000001 0100050f", RuleTruncatedHeader, ErrTruncated},
	{"short 4DW header", "20000001 0100050f 00000001", RuleTruncatedHeader, ErrTruncated},
	{"Fmt 101", "a0007b00 00000000 00000000 00000000", RuleReservedFmt, ErrReservedFmtType},
	{"Fmt 111", "e0000000 00000000 00000000", RuleReservedFmt, ErrReservedFmtType},
	{"prefix", "80000000 00000001 0100050f fedc0010", RulePrefix, ErrPrefix},
	{"message routing 110", "36000000 03000020 00000000 00000000", RuleMessageRouting, ErrReservedFmtType},
	{"message routing 111", "77000001 03000020 00000000 00000000 00000000", RuleMessageRouting, ErrReservedFmtType},
	{"3DW message", "14000000 03000020 00000000", RuleReservedFmtType, ErrReservedFmtType},
	{"locked write", "41000001 0100050f fedc0010 00000000", RuleReservedFmtType, ErrReservedFmtType},
	{"atomic without data", "0c000001 01000900 00001000", RuleReservedFmtType, ErrReservedFmtType},
	{"4DW IORd", "22000001 00f8070f 00000000 00000cf8", RuleReservedFmtType, ErrReservedFmtType},
	{"4DW completion", "2a000000 00002004 00f80700 00000000", RuleReservedFmtType, ErrReservedFmtType},
	{"type 00011", "03000001 0100050f fedc0010", RuleReservedFmtType, ErrReservedFmtType},
	{"data on MRd", "00000001 0100050f fedc0010 00000000", RuleUnexpectedData, ErrUnexpectedData},
	{"data on Cpl", "0a000000 00002004 00f80700 00000000", RuleUnexpectedData, ErrUnexpectedData},
	{"payload short", "40000002 010005ff fedc0010 00000000", RuleLengthMismatch, ErrTruncated},
	{"payload long", "40000001 0100050f fedc0010 00000000 00000000", RuleLengthMismatch, ErrLengthMismatch},
	{"digest missing", "40008001 0100050f fedc0010 00000000", RuleLengthMismatch, ErrLengthMismatch},
	{"cfg length 2", "04000002 0000010f 03000100", RuleIOCfgLength, ErrRequestRule},
	{"cfg length 0", "04000000 0000010f 03000100", RuleIOCfgLength, ErrRequestRule},
	{"io tc 1", "02100001 00f8070f 00000cf8", RuleIOCfgTC, ErrRequestRule},
	{"io relaxed ordering", "02002001 00f8070f 00000cf8", RuleIOCfgAttr, ErrRequestRule},
	{"cfg AT", "04000401 0000010f 03000100", RuleIOCfgAT, ErrRequestRule},
	{"cfg last BE", "44000001 000001ff 03000100 00000000", RuleLastBELength1, ErrByteEnables},
	{"MRd length 1 last BE", "00000001 010005ff fedc0010", RuleLastBELength1, ErrByteEnables},
	{"MRd zero first BE", "00000002 010005f0 fedc0010", RuleZeroBE, ErrByteEnables},
	{"MWr zero last BE", "40000002 0100050f fedc0010 00000000 00000000", RuleZeroBE, ErrByteEnables},
	{"all-zero TLP (MRd 1024 DW, BEs 0)", "00000000 00000000 00000000", RuleZeroBE, ErrByteEnables},
	{"MRd first BE gap", "00000003 010005f5 fedc0010", RuleBEContiguous, ErrByteEnables},
	{"MRd last BE gap", "00000002 0100055f fedc0004", RuleBEContiguous, ErrByteEnables},
	{"MRd crosses 4 KiB", "00000008 010005ff fedc0ff0", RuleCross4K, ErrCross4K},
	{"MWr 4DW crosses 4 KiB", "60000002 010005ff 00000001 00000ffc 00000000 00000000", RuleCross4K, ErrCross4K},
	{"MRd 1024 DW unaligned", "00000000 010005ff fedc0010", RuleCross4K, ErrCross4K},
	{"FetchAdd length 3", "4c000003 01000900 00001000 00000000 00000000 00000000", RuleAtomicSize, ErrAtomicOperand},
	{"CAS length 1", "4e000001 01000900 00001000 00000000", RuleAtomicSize, ErrAtomicOperand},
	{"CAS length 16", "4e000010 01000900 00001000" + strings.Repeat("00", 64), RuleAtomicSize, ErrAtomicOperand},
	{"Swap 64 misaligned", "4d000002 01000900 00001004 00000000 00000000", RuleAtomicAlign, ErrAtomicOperand},
	{"CAS 128 misaligned", "4e000008 01000900 00001008" + strings.Repeat("00", 32), RuleAtomicAlign, ErrAtomicOperand},
	{"Assert_INTA on TC 1", "34100000 03000020 00000000 00000000", RuleMessageTC, ErrMessageRule},
	{"ERR_FATAL on TC 7", "30700000 03000033 00000000 00000000", RuleMessageTC, ErrMessageRule},
	{"CplD beyond byte count", "4a000002 03000004 01000500 00000000 00000000", RuleCplByteCount, ErrByteCount},
}

func TestErrorVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range errorVectors {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(unhex(t, tc.hex))
			if err == nil {
				t.Fatal("Parse accepted it")
			}
			if got := RuleOf(err); got != tc.rule {
				t.Errorf("rule %q, want %q (%v)", got, tc.rule, err)
			}
			if !errors.Is(err, tc.sentinel) || !errors.Is(err, ErrMalformed) {
				t.Errorf("%v does not match %v and ErrMalformed", err, tc.sentinel)
			}
			if !strings.Contains(err.Error(), tc.rule) {
				t.Errorf("message %q does not name the rule", err)
			}
		})
	}
}

func TestErrorNamesFieldAndValue(t *testing.T) {
	t.Parallel()
	_, err := Parse(unhex(t, "04000002 0000010f 03000100"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T is not *Error", err)
	}
	if e.Field != "length" || e.Value != 2 || e.Kind != CfgRd0 {
		t.Errorf("got field %q value %d kind %v", e.Field, e.Value, e.Kind)
	}
	if !strings.Contains(e.Error(), "length=2") || !strings.Contains(e.Error(), "CfgRd0") {
		t.Errorf("message %q", e)
	}
}

func TestParseTruncated(t *testing.T) {
	t.Parallel()
	// A CplD of 64 DW cut at 16 bytes of payload, as a 128-byte snap
	// length leaves it.
	b := unhex(t, "4a000040 1b000100 19000000"+strings.Repeat("ab", 16))
	if _, err := Parse(b); !errors.Is(err, ErrTruncated) || RuleOf(err) != RuleLengthMismatch {
		t.Fatalf("Parse: %v", err)
	}
	v, trunc, err := ParseTruncated(b)
	if err != nil || !trunc {
		t.Fatalf("ParseTruncated: trunc %v err %v", trunc, err)
	}
	if got := len(v.Payload()); got != 16 {
		t.Errorf("payload %d bytes, want the 16 present", got)
	}
	var p Packet
	if err := p.Decode(v); err != nil || p.Length != 64 || len(p.Data) != 16 {
		t.Errorf("Decode: %v length %d data %d", err, p.Length, len(p.Data))
	}
	// Header rules still apply to a truncated TLP.
	if _, _, err := ParseTruncated(unhex(t, "00000000 00000000 00000000")); RuleOf(err) != RuleZeroBE {
		t.Errorf("all-zero: %v", err)
	}
	// A whole TLP is not truncated; a short header is still an error.
	if _, trunc, err := ParseTruncated(unhex(t, validVectors[0].hex)); err != nil || trunc {
		t.Errorf("whole TLP: trunc %v err %v", trunc, err)
	}
	if _, _, err := ParseTruncated(unhex(t, "4a000040 1b000100")); RuleOf(err) != RuleTruncatedHeader {
		t.Errorf("short header: %v", err)
	}
	// Too long is never "truncated".
	if _, _, err := ParseTruncated(unhex(t, "40000001 0100050f fedc0010 00000000 00000000")); RuleOf(err) != RuleLengthMismatch {
		t.Errorf("long: %v", err)
	}
}

func TestViewAccessors(t *testing.T) {
	t.Parallel()
	// DW0 with every bit of byte 1 and 2 set except Fmt/Type/Length.
	v := View(unhex(t, "40ffff01 0100050f fedc0013 00000000"))
	if v.TC() != 7 || v.Attr() != 7 || !v.TH() || !v.LN() || !v.TD() || !v.EP() || v.AT() != 3 {
		t.Errorf("tc %d attr %d th %v ln %v td %v ep %v at %d", v.TC(), v.Attr(), v.TH(), v.LN(), v.TD(), v.EP(), v.AT())
	}
	if v.Tag() != 0x305 || v.LengthField() != 0x301 || v.PH() != 3 || v.Address() != 0xfedc0010 {
		t.Errorf("tag %#x length %#x ph %d addr %#x", v.Tag(), v.LengthField(), v.PH(), v.Address())
	}
	// Only IDO set: byte 1 bit 2.
	if a := View(unhex(t, "40040001 0100050f fedc0010 00000000")).Attr(); a != AttrIDO {
		t.Errorf("IDO alone reads attr %d", a)
	}
	// TC 4 alone must not read as IDO.
	if a := View(unhex(t, "40400001 0100050f fedc0010 00000000")).Attr(); a != 0 {
		t.Errorf("TC 4 reads attr %d", a)
	}
	v = View(unhex(t, "40000001 0100050f fedc0010 00000000"))
	v.SetTag(0x3ff)
	v.SetRequesterID(NewID(0xab, 0x1f, 7))
	v.SetAddress(0x12345678)
	if v.Tag() != 0x3ff || v.RequesterID().String() != "ab:1f.7" || v.Address() != 0x12345678 {
		t.Errorf("setters: tag %#x id %s addr %#x", v.Tag(), v.RequesterID(), v.Address())
	}
}

func TestSplitPrefixes(t *testing.T) {
	t.Parallel()
	b := unhex(t, "90000001 8e000002 00000001 0100050f fedc0010")
	pre, rest, err := SplitPrefixes(b)
	if err != nil || len(pre) != 8 || len(rest) != 12 {
		t.Fatalf("pre %d rest %d err %v", len(pre), len(rest), err)
	}
	if _, err := Parse(rest); err != nil {
		t.Errorf("TLP after prefixes: %v", err)
	}
	if _, _, err := SplitPrefixes(unhex(t, "900000")); !errors.Is(err, ErrTruncated) {
		t.Errorf("short prefix: %v", err)
	}
}

// Every valid vector except the sparse-BE one takes Parse's fast path; the
// fuzz target checks that the fast path never accepts more than the full
// checks do.
func TestFastPathCoversValidVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range validVectors {
		if got := quickOK(unhex(t, tc.hex)); got != (tc.name != "MRd QW-aligned sparse BEs") {
			t.Errorf("%s: quickOK %v", tc.name, got)
		}
	}
	for _, tc := range errorVectors {
		if quickOK(unhex(t, tc.hex)) {
			t.Errorf("%s: fast path accepts it", tc.name)
		}
	}
}
