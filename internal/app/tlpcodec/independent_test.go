package tlpcodec

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// Independent audit of `dxpu tlp decode` / `dxpu tlp encode` against the
// field names and formats of issue 2, point 5. The vectors are derived by
// hand in tlp/independent_test.go (same hex, same derivations); here the
// check is on the command: one JSON object per line, exact field names,
// formats, error objects with their line numbers, exit codes, and
// encode(decode(x)) == x.

var (
	reID      = regexp.MustCompile(`^[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	reAddress = regexp.MustCompile(`^0x[0-9a-f]+$`)
	reHexData = regexp.MustCompile(`^([0-9a-f]{2})*$`)
	reECRC    = regexp.MustCompile(`^0x[0-9a-f]{8}$`)
)

// fieldsByKind lists, per kind, the fields the issue requires, beyond the
// DW0 ones every object has (kind fmt type tc attr th td ep ln at length).
var fieldsByKind = map[string][]string{
	"MRd": {"requester_id", "tag", "first_be", "last_be", "address", "ph"}, "MRdLk": {"requester_id", "tag", "first_be", "last_be", "address", "ph"},
	"MWr":  {"requester_id", "tag", "first_be", "last_be", "address", "ph", "data"},
	"IORd": {"requester_id", "tag", "first_be", "last_be", "address"}, "IOWr": {"requester_id", "tag", "first_be", "last_be", "address", "data"},
	"CfgRd0": {"requester_id", "tag", "first_be", "last_be", "target_id", "register"}, "CfgRd1": {"requester_id", "tag", "first_be", "last_be", "target_id", "register"},
	"CfgWr0": {"requester_id", "tag", "first_be", "last_be", "target_id", "register", "data"}, "CfgWr1": {"requester_id", "tag", "first_be", "last_be", "target_id", "register", "data"},
	"Msg": {"requester_id", "tag", "message_code", "routing"}, "MsgD": {"requester_id", "tag", "message_code", "routing", "data"},
	"Cpl":      {"completer_id", "status", "bcm", "byte_count", "requester_id", "tag", "lower_address"},
	"CplLk":    {"completer_id", "status", "bcm", "byte_count", "requester_id", "tag", "lower_address"},
	"CplD":     {"completer_id", "status", "bcm", "byte_count", "requester_id", "tag", "lower_address", "data"},
	"CplDLk":   {"completer_id", "status", "bcm", "byte_count", "requester_id", "tag", "lower_address", "data"},
	"FetchAdd": {"requester_id", "tag", "first_be", "last_be", "address", "data"},
	"Swap":     {"requester_id", "tag", "first_be", "last_be", "address", "data"},
	"CAS":      {"requester_id", "tag", "first_be", "last_be", "address", "data"},
}

func checkObjectFormat(t *testing.T, line string, o map[string]any) {
	t.Helper()
	kind, _ := o["kind"].(string)
	want, ok := fieldsByKind[kind]
	if !ok {
		t.Errorf("unknown kind in %s", line)
		return
	}
	for _, f := range append([]string{"fmt", "type", "tc", "attr", "at", "length"}, want...) {
		if _, ok := o[f]; !ok {
			t.Errorf("%s: field %q missing: %s", kind, f, line)
		}
	}
	for _, f := range []string{"th", "td", "ep", "ln"} {
		if _, ok := o[f].(bool); !ok {
			t.Errorf("%s: %q is not a boolean: %s", kind, f, line)
		}
	}
	for _, f := range []string{"requester_id", "completer_id", "target_id"} {
		if s, ok := o[f]; ok && !reID.MatchString(s.(string)) {
			t.Errorf("%s: %s %q is not bb:dd.f lowercase hex", kind, f, s)
		}
	}
	if s, ok := o["address"]; ok && !reAddress.MatchString(s.(string)) {
		t.Errorf("%s: address %q", kind, s)
	}
	if s, ok := o["data"]; ok && !reHexData.MatchString(s.(string)) {
		t.Errorf("%s: data %q is not lowercase hex", kind, s)
	}
	if o["td"] == true {
		if s, ok := o["ecrc"].(string); !ok || !reECRC.MatchString(s) {
			t.Errorf("%s: td without a 0x%%08x ecrc: %s", kind, line)
		}
	} else if _, ok := o["ecrc"]; ok {
		t.Errorf("%s: ecrc without td: %s", kind, line)
	}
	if attr, ok := o["attr"].(float64); !ok || attr < 0 || attr > 7 {
		t.Errorf("%s: attr %v", kind, o["attr"])
	}
	if tag, ok := o["tag"].(float64); ok && (tag < 0 || tag > 1023) {
		t.Errorf("%s: tag %v", kind, tag)
	}
	if r, ok := o["register"].(float64); ok && (r < 0 || r > 4095) {
		t.Errorf("%s: register %v", kind, r)
	}
	switch s := o["status"].(type) {
	case nil:
	case string:
		if s != "SC" && s != "UR" && s != "CRS" && s != "CA" {
			t.Errorf("status %q", s)
		}
	case float64:
		if s != 3 && s != 5 && s != 6 && s != 7 {
			t.Errorf("status %v: defined statuses print as names", s)
		}
	default:
		t.Errorf("status %v (%T)", s, s)
	}
}

func TestTLPIndependentDecodeEncode(t *testing.T) {
	t.Parallel()
	good := []string{
		"00fe3404 3fffa57e 80001000",                                       // MRd, every DW0 bit
		"00000001 01000000 fee00000",                                       // zero-length read
		"20010001 021c11a5 00000001 00000fff",                              // MRd 4DW TH, ST in BEs, PH 3
		"60010000 81825aff 00000001 23456001" + strings.Repeat("a5", 4096), // MWr 1024 DW
		"00008001 0100050f fedc0010 ba2b1e6e",                              // TD + ECRC
		"42000001 00f81001 00000060 aa000000",                              // IOWr
		"05000001 0000200f 05000104",                                       // CfgRd1, register 0x104
		"44008001 00000a0f 10ff0ffc 01020304 74ae3c6a",                     // CfgWr0, register 0xffc, TD
		"30000005 03000030 00000000 00000000",                              // Msg to RC, raw length 5
		"71000001 0100007f 00000001 00000100 11223344",                     // MsgD by address
		"32300000 0200007f 04011ab4 cafef00d",                              // VDM by ID
		"33000000 00000019 00000000 00000000",                              // broadcast
		"34000000 02000020 00000000 00000000",                              // local
		"35000000 0300001b 00000000 00000000",                              // gathered
		"4aa82010 65000000 0008ff40" + strings.Repeat("5a", 64),            // CplD, tag 1023, BC 4096
		"0a000000 01002004 00000700",                                       // Cpl UR
		"0a000000 01006004 00000700",                                       // Cpl reserved status 3
		"0b0003ff 0100efff 00000700",                                       // CplLk status 7, raw length 1023
		"6d000002 01000200 00000001 00000008 1122334455667788",             // Swap 64, 4DW
		"4e000008 01000300 20000010" + strings.Repeat("0f", 32),            // CAS 128
		"4c000001 01000100 00001000 01000000",                              // FetchAdd 32
		"4b000001 01001001 0000077f 11223344",                              // CplDLk, BCM
		"0x40000001 0100050f 00001000 DEADBEEF",                            // 0x prefix, uppercase hex in
	}
	in := strings.Join(good, "\n")
	out, errs, code := runTLPCmd(t, in, "tlp", "decode")
	if code != 0 {
		t.Fatalf("exit %d (%s):\n%s", code, errs, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(good) {
		t.Fatalf("%d objects for %d TLPs", len(lines), len(good))
	}
	for i, l := range lines {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, l)
		}
		checkObjectFormat(t, l, o)
	}
	// Spot checks of the rules on the output.
	for i, c := range []struct {
		line  int
		field string
		want  any
	}{
		{1, "tag", 933.0}, {1, "attr", 7.0}, {1, "address", "0x80001000"}, {1, "requester_id", "3f:1f.7"},
		{4, "length", 1024.0}, {4, "address", "0x123456000"}, {4, "ph", 1.0},
		{5, "ecrc", "0xba2b1e6e"}, {7, "register", 260.0}, {8, "register", 4092.0},
		{9, "length", 5.0}, {10, "address", "0x100000100"}, {11, "target_id", "04:00.1"},
		{15, "byte_count", 4096.0}, {15, "tag", 1023.0}, {16, "status", "UR"}, {17, "status", 3.0},
		{18, "length", 1023.0}, {18, "byte_count", 4095.0}, {22, "bcm", true}, {23, "data", "deadbeef"},
	} {
		var o map[string]any
		_ = json.Unmarshal([]byte(lines[c.line-1]), &o)
		if o[c.field] != c.want {
			t.Errorf("check %d, line %d: %s = %v, want %v", i, c.line, c.field, o[c.field], c.want)
		}
	}
	// encode(decode(x)) == x, in lowercase hex.
	enc, errs, code := runTLPCmd(t, out, "tlp", "encode")
	if code != 0 {
		t.Fatalf("encode exit %d: %s", code, errs)
	}
	got := strings.Split(strings.TrimSpace(enc), "\n")
	for i, h := range good {
		want := strings.ToLower(strings.TrimPrefix(strings.Join(strings.Fields(h), ""), "0x"))
		if i >= len(got) || got[i] != want {
			t.Errorf("line %d: encode(decode(x)) differs:\n got %.80s\nwant %.80s", i+1, got[min(i, len(got)-1)], want)
		}
	}
}

func TestTLPIndependentErrorObjects(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		"00000001 0100050f fedc0010",                  // 1 good
		"02000002 0100050f 00000cf8",                  // 2 IO Length 2
		"00000002 010005ff 00000ffc",                  // 3 crosses 4 KiB
		"36000000 01000020 00000000 00000000",         // 4 reserved routing
		"00008001 0100050f fedc0010 ba2b1e6f",         // 5 bad ECRC
		"4c000004 01000000 00001000",                  // 6 FetchAdd Length 4 without its data
		"",                                            // 7 blank: skipped
		"34100000 02000020 00000000 00000000",         // 8 INTx on TC 1
		"4a000002 01000004 00000500 1122334455667788", // 9 CplD beyond Byte Count
	}, "\n")
	out, _, code := runTLPCmd(t, in, "tlp", "decode")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	want := []struct {
		line float64
		rule string
		kind string
	}{
		{2, "io-cfg-length", "IORd"}, {3, "cross-4k", "MRd"}, {4, "reserved-message-routing", ""},
		{5, "ecrc-mismatch", "MRd"}, {6, "atomic-operand-size", "FetchAdd"}, {8, "message-tc", "Msg"},
		{9, "cpl-length-exceeds-byte-count", "CplD"},
	}
	if len(lines) != 1+len(want) {
		t.Fatalf("%d objects:\n%s", len(lines), out)
	}
	for i, w := range want {
		var o map[string]any
		if err := json.Unmarshal([]byte(lines[1+i]), &o); err != nil {
			t.Fatalf("%v: %s", err, lines[1+i])
		}
		if o["line"] != w.line || o["rule"] != w.rule {
			t.Errorf("object %d: line %v rule %v, want line %v rule %s: %s", i, o["line"], o["rule"], w.line, w.rule, lines[1+i])
		}
		if s, _ := o["error"].(string); !strings.Contains(s, w.rule) {
			t.Errorf("object %d: error %q does not name the rule", i, s)
		}
		if w.kind != "" && o["kind"] != w.kind {
			t.Errorf("object %d: readable fields missing (kind %v): %s", i, o["kind"], lines[1+i])
		}
		if _, ok := o["fmt"]; !ok {
			t.Errorf("object %d: DW0 fields missing: %s", i, lines[1+i])
		}
	}
}

// TLPs as tools print them: one 0x-prefixed DW per word, or bytes with
// colons or commas.
func TestTLPIndependentHexForms(t *testing.T) {
	t.Parallel()
	want := `"address":"0xfedc0010"`
	for _, in := range []string{
		"0x00000001 0x0100050f 0xfedc0010",
		"00:00:00:01:01:00:05:0f:fe:dc:00:10",
		"0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x05, 0x0f, 0xfe, 0xdc, 0x00, 0x10",
		"\t000000010100050FFEDC0010  ",
	} {
		out, _, code := runTLPCmd(t, in, "tlp", "decode")
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%q: exit %d, %s", in, code, out)
		}
	}
	out, _, code := runTLPCmd(t, "0x000000010x0100050f", "tlp", "decode")
	if code != 1 || !strings.Contains(out, `"rule":"hex"`) {
		t.Errorf("0x inside a word must be a hex error: exit %d %s", code, out)
	}
}
