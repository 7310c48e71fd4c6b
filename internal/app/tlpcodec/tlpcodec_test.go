package tlpcodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/shareddata"
	"github.com/dxpu/dxpu/tlp/pcapio"
)

// runTLPCmd runs `dxpu tlp decode [--pcap FILE] [HEX...]` or `dxpu tlp
// encode` through Decode and Encode and returns stdout, stderr and the
// exit status the command line gives the error.
func runTLPCmd(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	var err error
	switch args[1] {
	case "decode":
		pcap, hexTLPs := "", args[2:]
		if len(hexTLPs) >= 2 && hexTLPs[0] == "--pcap" {
			pcap, hexTLPs = hexTLPs[1], hexTLPs[2:]
		}
		err = Decode(hexTLPs, pcap, strings.NewReader(stdin), &out)
	case "encode":
		err = Encode(strings.NewReader(stdin), &out, &errb)
	default:
		t.Fatalf("no such command %v", args)
	}
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.Is(err, apperr.ErrFailed):
		return out.String(), errb.String(), 1
	}
	return out.String(), errb.String(), 2
}

func TestTLPDecodeStdin(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		"# a comment, then a blank line",
		"",
		"00000001 0100050f fedc0010",         // line 3: MRd
		"0x4a000001030000040100051011223344", // line 4: CplD
		"00000000 00000000 00000000",         // line 5: all-zero MRd, zero BEs
		"zz",                                 // line 6: not hex
		"a0007b00000000000000000000000000",   // line 7: Fmt 101
	}, "\n")
	out, _, code := runTLPCmd(t, in, "tlp", "decode")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines:\n%s", len(lines), out)
	}
	want0 := `{"kind":"MRd","fmt":0,"type":0,"tc":0,"attr":0,"th":false,"td":false,"ep":false,"ln":false,"at":0,"length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"last_be":0,"address":"0xfedc0010","ph":0}`
	if lines[0] != want0 {
		t.Errorf("line 3:\n got %s\nwant %s", lines[0], want0)
	}
	objs := make([]map[string]any, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &objs[i]); err != nil {
			t.Fatalf("output %d is not JSON: %v\n%s", i, err, l)
		}
	}
	if objs[1]["kind"] != "CplD" || objs[1]["data"] != "11223344" || objs[1]["byte_count"] != 4.0 {
		t.Errorf("CplD: %v", objs[1])
	}
	for i, w := range []struct {
		line float64
		rule string
	}{{5, "zero-be-with-length-over-1"}, {6, "hex"}, {7, "reserved-fmt"}} {
		o := objs[2+i]
		if o["line"] != w.line || o["rule"] != w.rule || !strings.Contains(o["error"].(string), w.rule) {
			t.Errorf("error object %d: %v, want line %v rule %s", i, o, w.line, w.rule)
		}
	}
	// The fields that could be read come with the error.
	if objs[2]["kind"] != "MRd" || objs[2]["length"] != 1024.0 || objs[4]["fmt"] != 5.0 {
		t.Errorf("readable fields missing: %v / %v", objs[2], objs[4])
	}
}

func TestTLPDecodeArgsExitZero(t *testing.T) {
	t.Parallel()
	out, _, code := runTLPCmd(t, "", "tlp", "decode", "0a000000 00002004 00f80700")
	if code != 0 || !strings.Contains(out, `"status":"UR"`) {
		t.Errorf("exit %d, out %s", code, out)
	}
}

func TestTLPEncodeRoundTrip(t *testing.T) {
	t.Parallel()
	hexes := []string{
		"000000010100050ffedc0010",
		"20b030201a08a5ff0000001234567800",
		"400c40020011003c00001004deadbeef01020304",
		"72000001 0100007f 02008086 00000001 cafef00d",
		"4a800001030060000100ff0000000000",
		"6e000008 01000d00 00000001 00000010" + strings.Repeat("00", 32),
	}
	dec, _, code := runTLPCmd(t, strings.Join(hexes, "\n"), "tlp", "decode")
	if code != 0 {
		t.Fatalf("decode exit %d:\n%s", code, dec)
	}
	enc, errs, code := runTLPCmd(t, dec, "tlp", "encode")
	if code != 0 {
		t.Fatalf("encode exit %d: %s", code, errs)
	}
	got := strings.Split(strings.TrimSpace(enc), "\n")
	for i, h := range hexes {
		want := strings.ReplaceAll(h, " ", "")
		if i >= len(got) || got[i] != want {
			t.Errorf("line %d: encode(decode(x)) = %q, want %q", i+1, got[min(i, len(got)-1)], want)
		}
	}
	// A TD TLP: encode computes the ECRC and checks a given one.
	td := `{"kind":"MRd","td":true,"length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"address":"0xfedc0010"}`
	enc, _, code = runTLPCmd(t, td, "tlp", "encode")
	if code != 0 || strings.TrimSpace(enc) != "000080010100050ffedc0010ba2b1e6e" {
		t.Errorf("TD encode: exit %d %q", code, enc)
	}
	bad := strings.Replace(td, `"td":true`, `"td":true,"ecrc":"0x12345678"`, 1)
	_, errs, code = runTLPCmd(t, bad+"\n"+td+"\n{\"kind\":\"Nope\"}\n", "tlp", "encode")
	if code != 1 || !strings.Contains(errs, "line 1") || !strings.Contains(errs, "ecrc") || !strings.Contains(errs, "line 3") {
		t.Errorf("bad ecrc / kind: exit %d, stderr %s", code, errs)
	}
}

func TestTLPDecodePcap(t *testing.T) {
	t.Parallel()
	out, _, code := runTLPCmd(t, "", "tlp", "decode", "--pcap", shareddata.File(t, "testdata", "nettlp", "nic-and-nvme", "pm1725", "pm1725-read-8blk.pcap"))
	if code != 1 {
		t.Errorf("exit %d, want 1 (the capture holds spec-breaking TLPs)", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 167 {
		t.Fatalf("%d lines, want 167", len(lines))
	}
	rules := map[string]int{}
	truncated := 0
	for i, l := range lines {
		var o map[string]any
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		if o["frame"] != float64(i+1) || o["encap"] != "nettlp" {
			t.Fatalf("line %d: frame %v encap %v", i, o["frame"], o["encap"])
		}
		if r, ok := o["rule"].(string); ok {
			rules[r]++
		}
		if o["truncated"] == true {
			truncated++
		}
	}
	if rules["zero-be-with-length-over-1"] != 39 || rules["reserved-fmt"] != 2 || len(rules) != 2 {
		t.Errorf("rules %v", rules)
	}
	if truncated != 126 {
		t.Errorf("%d truncated MWr, want 126", truncated)
	}
	out, _, code = runTLPCmd(t, "", "tlp", "decode", "--pcap", shareddata.File(t, "testdata", "nettlp", "nic-and-nvme", "x520", "x520-64B-1pkt.pcap"))
	if code != 0 || strings.Count(out, "\n") != 2 {
		t.Errorf("x520 64B: exit %d\n%s", code, out)
	}
}

func TestTLPDecodeUsage(t *testing.T) {
	t.Parallel()
	if _, _, code := runTLPCmd(t, "", "tlp", "decode", "--pcap", "/nonexistent.pcap"); code != 2 {
		t.Errorf("missing capture: exit %d, want 2", code)
	}
	if _, _, code := runTLPCmd(t, "", "tlp", "decode", "--pcap", "x.pcap", "0000"); code != 2 {
		t.Errorf("hex and --pcap: exit %d, want 2", code)
	}
}

// TestDecodeErrorOutputIsBounded: a file of nothing but broken TLPs prints
// at most MaxErrorLines error objects and one summary, whatever its size.
func TestDecodeErrorOutputIsBounded(t *testing.T) {
	t.Parallel()
	const n = MaxErrorLines * 5
	var in strings.Builder
	for range n {
		in.WriteString("0000000f01000500\n") // 8 bytes: shorter than any TLP header
	}
	var out strings.Builder
	err := Decode(nil, "", strings.NewReader(in.String()), &out)
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), fmt.Sprintf("%d of %d", n, n)) {
		t.Fatalf("Decode: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != MaxErrorLines+1 {
		t.Fatalf("%d lines printed, want %d errors and a summary", len(lines), MaxErrorLines)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, fmt.Sprintf(`"suppressed_errors":%d`, n-MaxErrorLines)) {
		t.Fatalf("summary %s", last)
	}
}

// TestTLPEncodeJSONErrors: a line of the wrong JSON shape is reported with
// its line and column and what was expected, in JSON's words: no Go type
// (tlp.jsonPacket, uint16) from encoding/json.
func TestTLPEncodeJSONErrors(t *testing.T) {
	t.Parallel()
	in := `{"kind":"MRd","tag":"x"}` + "\n[1]\n" + `{"kind":"MRd","tagg":1}` + "\n" + `{"kind":"MRd",` + "\n"
	_, errs, code := runTLPCmd(t, in, "tlp", "encode")
	for _, want := range []string{
		"line 1 col 21: field tag: expected a whole number from 0 to 65535, found a string\n",
		"line 2 col 1: expected an object with fields kind, fmt, type,",
		`line 3 col 15: unknown field "tagg"` + "\n",
		"line 4 col 15: the JSON ends before its value is complete\n",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if code != 1 || strings.Contains(errs, "Go ") || strings.Contains(errs, "jsonPacket") || strings.Contains(errs, "uint16") {
		t.Errorf("exit %d:\n%s", code, errs)
	}
}

// TestDecodeRefusesOtherLinkTypes: a capture of another link layer holds
// no TLP frames; decoding it is bad input named with its link type, not an
// empty success.
func TestDecodeRefusesOtherLinkTypes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "raw.pcap")
	w, err := pcapio.Create(path, pcapio.WriterOptions{LinkType: layers.LinkTypeRaw})
	if err != nil {
		t.Fatal(err)
	}
	w.WritePacket(gopacket.CaptureInfo{}, make([]byte, 60))
	w.Close()
	var out strings.Builder
	err = Decode(nil, path, strings.NewReader(""), &out)
	if !errors.Is(err, apperr.ErrFailed) || !errors.Is(err, pcapio.ErrLinkType) || !strings.Contains(err.Error(), path+": unsupported link type Raw") {
		t.Fatalf("Decode: %v, want a failure naming %s and its link type", err, path)
	}
	if out.Len() > 0 {
		t.Fatalf("printed %q", out.String())
	}
}

// TestOverlongLinesSkipped: a line over the bound is reported by number
// and skipped, and the lines after it are still read, as the help says
// ("bufio.Scanner: token too long" ended both commands there).
func TestOverlongLinesSkipped(t *testing.T) {
	t.Parallel()
	mrd := "00000001 0100050f fedc0010"
	in := strings.Join([]string{mrd, strings.Repeat("0", maxDecodeLine+1), mrd}, "\n")
	out, _, code := runTLPCmd(t, in, "tlp", "decode")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 1 || len(lines) != 3 || !strings.HasPrefix(lines[2], `{"kind":"MRd"`) ||
		lines[1] != `{"line":2,"error":"longer than 1048576 bytes: skipped","rule":"hex"}` {
		t.Fatalf("decode: exit %d, output:\n%.300s", code, out)
	}
	js := `{"kind":"MRd","length":1,"requester_id":"01:00.0","tag":5,"first_be":15,"address":"0xfedc0010"}`
	in = strings.Join([]string{js, `{"kind":"` + strings.Repeat("M", maxEncodeLine) + `"}`, js}, "\n")
	out, errOut, code := runTLPCmd(t, in, "tlp", "encode")
	if code != 1 || strings.Count(out, "\n") != 2 || !strings.Contains(errOut, "line 2: longer than 4194304 bytes: skipped") {
		t.Fatalf("encode: exit %d, stdout %q, stderr %.300q", code, out, errOut)
	}
}
