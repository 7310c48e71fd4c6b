package tlpcodec

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/tlp"
)

var fuzzHexLines = []string{
	"000000010100050ffedc0010",
	"20b030201a08a5ff0000001234567800",
	"400c40020011003c00001004deadbeef01020304",
	"72000001 0100007f 02008086 00000001 cafef00d",
	"0x4a800001 0x030060000 100ff0000000000",
	"6e000008:01000d00:00000001:00000010" + strings.Repeat("00", 32),
	"000080010100050ffedc0010ba2b1e6e",
	"4a000001000004000100008800000000",         // CplD, bit 7 of byte 11 (above Lower Address)
	"04000001 01000a0f 0100f0ff",               // CfgRd0, DW2 bits 31:28 and 1:0
	"02000001 01000a0f fedc0013",               // IORd, address bits 1:0
	"4a0080010000000401000588112233443b2ee991", // CplD with TD: the ECRC covers the reserved bit
	"# comment",
	"zz",
}

// FuzzDecodeLines runs `dxpu tlp decode` on arbitrary standard input.
// Invariants: one JSON object per line of output, at most one per input
// line (plus the closing count of suppressed errors), output bounded by
// the input; every TLP that decodes encodes back to the bytes of its hex
// line, reserved bits included (`dxpu tlp encode` reads what decode
// writes); the error, if any, is one non-empty line.
func FuzzDecodeLines(f *testing.F) {
	f.Add(strings.Join(fuzzHexLines, "\n"))
	for _, h := range fuzzHexLines {
		f.Add(h)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var out bytes.Buffer
		err := Decode(nil, "", strings.NewReader(in), &out)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
		}
		lines := strings.Split(in, "\n")
		got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			got = nil
		}
		if len(got) > len(lines)+1 || out.Len() > 1024*(len(lines)+1)+4*len(in) {
			t.Fatalf("%d input lines (%d bytes) gave %d output lines (%d bytes)", len(lines), len(in), len(got), out.Len())
		}
		for _, g := range got {
			if !json.Valid([]byte(g)) || !strings.HasPrefix(g, "{") {
				t.Fatalf("output line is not a JSON object: %q", g)
			}
		}
		if err != nil || len(in) > 64<<10 {
			return // a failure's objects are error objects; a long line may stop the scan
		}
		// Every line decoded: `dxpu tlp encode` gives back each line's
		// bytes, reserved bits included.
		var enc, errs bytes.Buffer
		if eerr := Encode(&out, &enc, &errs); eerr != nil {
			t.Fatalf("decode gave objects that do not encode: %v\n%s", eerr, errs.String())
		}
		hx := strings.Split(strings.TrimSuffix(enc.String(), "\n"), "\n")
		i := 0
		for _, l := range lines {
			b, ok, herr := parseHexLine(l)
			if !ok {
				continue
			}
			if herr != nil || i >= len(got) || i >= len(hx) {
				t.Fatalf("line %q: %v, %d objects, %d encoded", l, herr, len(got), len(hx))
			}
			if want := hex.EncodeToString(b); hx[i] != want {
				t.Fatalf("hex %s decodes to %s, which encodes to %s", want, got[i], hx[i])
			}
			i++
		}
	})
}

// FuzzEncodeLines runs `dxpu tlp encode` on arbitrary standard input.
// Invariants: every line of output is hex of a TLP that parses, and that
// decode then encode give back (so reserved_bits sets only bits decode
// shows as reserved); every line of stderr names its input line and is one
// line; no more of either than input lines; the error, if any, is one
// non-empty line.
func FuzzEncodeLines(f *testing.F) {
	f.Add(`{"kind":"MRd","td":true,"length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"address":"0xfedc0010"}`)
	f.Add(`{"kind":"MWr","requester_id":"01:00.0","address":"0x1000","first_be":15,"last_be":15,"data":"0011223344556677"}` + "\n# c\n\n{\"kind\":\"Nope\"}\n{\"kind\":\"MRd\",\"x\":1}\n{\"kind\":\"MRd\",\"tag\":\"7\"}\n{")
	f.Add(`{"fmt":3,"type":18,"data":"00"}`)
	// reserved_bits: set, over a field, too long, not hex, first member,
	// with td and a given ecrc (right, then wrong).
	cpld := `"kind":"CplD","length":1,"completer_id":"00:00.0","byte_count":1024,"requester_id":"01:00.0","lower_address":8,"data":"00000000"`
	f.Add(`{` + cpld + `,"reserved_bits":"000000000000000000000080"}` + "\n" +
		`{` + cpld + `,"reserved_bits":"000000000000000000000001"}` + "\n" +
		`{` + cpld + `,"reserved_bits":"00000000000000000000008000"}` + "\n" +
		`{` + cpld + `,"reserved_bits":"0x80"}` + "\n" +
		`{"reserved_bits":"00000000000000000000f003", "kind":"CfgRd0","requester_id":"01:00.0","first_be":15,"target_id":"01:00.0","register":252}`)
	f.Add(`{"kind":"CplD","td":true,"length":1,"completer_id":"00:00.0","byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":8,"data":"11223344","ecrc":"0x3b2ee991","reserved_bits":"000000000000000000000080"}` + "\n" +
		`{"kind":"CplD","td":true,"length":1,"completer_id":"00:00.0","byte_count":4,"requester_id":"01:00.0","tag":5,"lower_address":8,"data":"11223344","ecrc":"0x0b2ee991","reserved_bits":"000000000000000000000080"}`)
	f.Fuzz(func(t *testing.T, in string) {
		var out, errs bytes.Buffer
		err := Encode(strings.NewReader(in), &out, &errs)
		if err != nil {
			if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
		}
		lines := strings.Count(in, "\n") + 1
		o := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			o = nil
		}
		e := strings.Split(strings.TrimSuffix(errs.String(), "\n"), "\n")
		if errs.Len() == 0 {
			e = nil
		}
		if len(o)+len(e) > lines {
			t.Fatalf("%d input lines gave %d TLPs and %d error lines", lines, len(o), len(e))
		}
		for _, l := range e {
			if !strings.HasPrefix(l, "dxpu tlp encode: line ") || strings.Contains(l, "\r") {
				t.Fatalf("stderr line %q", l)
			}
		}
		for _, l := range o {
			b, ok, herr := parseHexLine(l)
			if !ok || herr != nil {
				t.Fatalf("output line %q is not hex", l)
			}
			if _, perr := tlp.Parse(b); perr != nil {
				t.Fatalf("encoded %x does not parse: %v", b, perr)
			}
		}
		if len(o) == 0 {
			return
		}
		var dec, re, rerrs bytes.Buffer
		if derr := Decode(nil, "", &out, &dec); derr != nil {
			t.Fatalf("encoded TLPs do not decode: %v\n%s", derr, dec.String())
		}
		decoded := dec.String()
		if rerr := Encode(&dec, &re, &rerrs); rerr != nil || re.String() != strings.Join(o, "\n")+"\n" {
			t.Fatalf("encode(decode(encoded)) = %q (%v %s), want %q", re.String(), rerr, rerrs.String(), o)
		}
		if err != nil && !errors.Is(err, apperr.ErrFailed) {
			return // a line too long stopped the scan
		}
		// Decode shows the reserved_bits each line gave, padded to the
		// header: encode took none that is not reserved.
		failed := map[int]bool{}
		for _, l := range e {
			var n int
			fmt.Sscanf(l, "dxpu tlp encode: line %d", &n)
			failed[n] = true
		}
		d := strings.Split(decoded, "\n")
		i := 0
		for n, l := range strings.Split(in, "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") || failed[n+1] {
				continue
			}
			var given struct {
				R *string `json:"reserved_bits"`
			}
			json.NewDecoder(strings.NewReader(l)).Decode(&given)
			var shown struct {
				R string `json:"reserved_bits"`
			}
			if i >= len(d) || json.Unmarshal([]byte(d[i]), &shown) != nil {
				t.Fatalf("line %d: no decoded object (%d)", n+1, len(d))
			}
			want := ""
			if given.R != nil && strings.Trim(*given.R, "0") != "" {
				want = strings.ToLower(*given.R)
			}
			if !strings.HasPrefix(shown.R, want) || strings.Trim(shown.R[len(want):], "0") != "" {
				t.Fatalf("line %d gives reserved_bits %q; its TLP %s decodes with %q", n+1, want, o[i], shown.R)
			}
			i++
		}
	})
}
