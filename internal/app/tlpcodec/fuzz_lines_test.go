package tlpcodec

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

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
	"# comment",
	"zz",
}

// FuzzDecodeLines runs `dxpu tlp decode` on arbitrary standard input.
// Invariants: one JSON object per line of output, at most one per input
// line (plus the closing count of suppressed errors), output bounded by
// the input; every TLP that decodes encodes back to the bytes of its hex
// line (`dxpu tlp encode` reads what decode writes); the error, if any, is
// one non-empty line.
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
		// Every line decoded: each object encodes back to its line's bytes.
		i := 0
		for _, l := range lines {
			b, ok, herr := parseHexLine(l)
			if !ok {
				continue
			}
			if herr != nil || i >= len(got) {
				t.Fatalf("line %q: %v, %d objects", l, herr, len(got))
			}
			re, eerr := tlp.EncodeJSON(nil, []byte(got[i]))
			if eerr != nil || !bytes.Equal(re, withoutReserved(b)) {
				t.Fatalf("hex %x decodes to %s, which encodes to %x (%v)", b, got[i], re, eerr)
			}
			i++
		}
	})
}

// FuzzEncodeLines runs `dxpu tlp encode` on arbitrary standard input.
// Invariants: every line of output is hex of a TLP that parses; every line
// of stderr names its input line and is one line; no more of either than
// input lines; the error, if any, is one non-empty line.
func FuzzEncodeLines(f *testing.F) {
	f.Add(`{"kind":"MRd","td":true,"length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"address":"0xfedc0010"}`)
	f.Add(`{"kind":"MWr","requester_id":"01:00.0","address":"0x1000","first_be":15,"last_be":15,"data":"0011223344556677"}` + "\n# c\n\n{\"kind\":\"Nope\"}\n{\"kind\":\"MRd\",\"x\":1}\n{\"kind\":\"MRd\",\"tag\":\"7\"}\n{")
	f.Add(`{"fmt":3,"type":18,"data":"00"}`)
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
	})
}

// withoutReserved is TLP b with the header bits the codec reads as
// reserved cleared, as it encodes them (receivers ignore reserved bits):
// address bits 1:0 of an IO request, DW2 bits 31:28 (the byte 10 nibble
// above the extended register number) and 1:0 of a config request, and
// the bit above a completion's 7-bit lower address.
// Every other bit of a TLP that decodes comes back as it was.
func withoutReserved(b []byte) []byte {
	v := tlp.View(b)
	if len(b) < 12 {
		return b
	}
	switch k := v.Kind(); {
	case k.IsIO():
		b = append([]byte(nil), b...)
		b[11] &^= 3
	case k.IsConfig():
		b = append([]byte(nil), b...)
		b[10] &= 0x0f
		b[11] &^= 3
	case k.IsCompletion():
		b = append([]byte(nil), b...)
		b[11] &= 0x7f
	}
	return b
}
