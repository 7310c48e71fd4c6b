package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVersionFlag: --version prints the line from this binary's build
// information and exits 0.
func TestVersionFlag(t *testing.T) {
	t.Parallel()
	out, _, err := runDxpu(t, "", "--version")
	if err != nil || !strings.HasPrefix(out, "dxpu ") || !strings.Contains(out, "go1.") {
		t.Fatalf("--version: %q %v", out, err)
	}
}

// TestManPages: dxpu man writes one page per command, each starting with
// the roff title, and one for the units topic; it refuses a missing --dir.
func TestManPages(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "man1")
	if _, _, err := runDxpu(t, "", "man", "--dir", dir); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"dxpu.1", "dxpu-bridge.1", "dxpu-ctl-box-add.1", "dxpu-bench-link.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(b), ".nh\n.TH \"DXPU\" \"1\"") || !strings.Contains(string(b), ".SH NAME") {
			t.Errorf("%s does not look like a man page: %.80q", page, b)
		}
	}
	// The units topic has a page too, its columns kept (no fill) and its
	// invocation `dxpu help units`.
	b, err := os.ReadFile(filepath.Join(dir, "dxpu-units.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".TH \"DXPU-UNITS\" \"1\"", "\\fBdxpu help units\\fP", ".nf\n", "_gbps Gbit/s", "  --added-rtt DURATION\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("dxpu-units.1 lacks %q", want)
		}
	}
	if _, _, err := runDxpu(t, "", "man"); err == nil || !strings.Contains(err.Error(), "--dir") {
		t.Errorf("man without --dir: %v", err)
	}
}
