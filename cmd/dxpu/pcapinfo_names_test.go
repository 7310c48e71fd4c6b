package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPcapInfoReadsAllBeforePrinting: with several captures, one that
// cannot be read fails the command before any report reaches stdout (a
// failed command prints no result); a capture whose name holds a line
// break or an escape gets its name quoted in the text report.
func TestPcapInfoReadsAllBeforePrinting(t *testing.T) {
	t.Parallel()
	good, err := os.ReadFile("../../testdata/pcap/mix.pcap")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.pcap")
	odd := filepath.Join(dir, "a\nb\x1b[31m.pcap")
	if err := os.WriteFile(cut, good[:len(good)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, good, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"pcap", "info", odd, cut}, {"pcap", "info", "--json", odd, cut}} {
		var out, errb strings.Builder
		code := run(context.Background(), newEnv(strings.NewReader(""), &out, &errb, args, noEnv))
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "cut.pcap") {
			t.Errorf("dxpu %q: exit %d, stdout %d bytes, stderr %q: want exit 2, nothing on stdout, an error naming cut.pcap", args, code, out.Len(), errb.String())
		}
	}
	var out, errb strings.Builder
	code := run(context.Background(), newEnv(strings.NewReader(""), &out, &errb, []string{"pcap", "info", odd}, noEnv))
	first, _, _ := strings.Cut(out.String(), "\n")
	if code != 0 || first != `"`+dir+`/a\nb\x1b[31m.pcap"` {
		t.Errorf("pcap info of %q: exit %d, first line %q (stderr %q)", odd, code, first, errb.String())
	}
}
