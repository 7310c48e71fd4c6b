package capture

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestInfoTextAndJSON: pcap info prints a block of short labelled lines
// per capture (no line near the old 500-character tally), and with
// --json for several captures one object per capture and line whose
// counts add up to the tally; for one capture, one object indented as
// every command's one result (it printed a single line).
func TestInfoTextAndJSON(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "..", "testdata", "pcap")
	paths := []string{filepath.Join(dir, "dxpu-eth-vlan.pcap"), filepath.Join(dir, "nettlp-vlan-snap128.pcap")}
	var out, errs bytes.Buffer
	if err := Info(paths, 8855, false, &out, &errs); err != nil {
		t.Fatal(err, errs.String())
	}
	text := out.String()
	t.Log("\n" + text)
	for _, line := range strings.Split(text, "\n") {
		if len(line) > 80 {
			t.Errorf("line of %d characters: %q", len(line), line)
		}
	}
	for _, want := range []string{paths[0] + "\n", "frames           64 (64 VLAN-tagged, 0 sealed, 0 did not parse)",
		"messages         ACK 2, CREDIT 1, NAK 1", "TLPs by kind     MWr 45, CplD 38,", "48 (2 cut by the snap length)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	out.Reset()
	if err := Info(paths, 8855, true, &out, &errs); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
	n := 0
	for ; sc.Scan(); n++ {
		var in InfoJSON
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			t.Fatalf("line %d: %v: %s", n+1, err, sc.Text())
		}
		s, err := Tally(paths[n], nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0
		for _, c := range in.TLPsByKind {
			sum += c
		}
		if in.File != paths[n] || in.Frames != s["frames"] || in.TLPs != sum || sum == 0 || in.TruncatedTLPs != s["truncated"] ||
			in.FramesByEncap["dxpu-eth"] != s["encap:dxpu-eth"] || in.MessagesByType["ACK"] != s["msg:ACK"] {
			t.Errorf("line %d: %+v, tally %v", n+1, in, s)
		}
	}
	if n != len(paths) {
		t.Errorf("%d JSON lines for %d captures", n, len(paths))
	}

	out.Reset()
	if err := Info(paths[:1], 8855, true, &out, &errs); err != nil {
		t.Fatal(err)
	}
	var in InfoJSON
	if err := json.Unmarshal(out.Bytes(), &in); err != nil || in.File != paths[0] || in.Frames == 0 {
		t.Fatalf("one capture: %+v (%v)\n%s", in, err, out.String())
	}
	if !strings.HasPrefix(out.String(), "{\n  \"file\": ") || !strings.HasSuffix(out.String(), "\n}\n") {
		t.Errorf("one capture: want one object indented by two spaces:\n%s", out.String())
	}
}
