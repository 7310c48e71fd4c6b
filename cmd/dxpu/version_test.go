package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFromBuildInfo: every field of the build information reaches
// the line, and a build without VCS stamping says so.
func TestVersionFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/dxpu/dxpu", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionFrom(bi).String()
	for _, want := range []string{"dxpu v0.3.0", "revision abc123 (modified)", "committed 2026-01-02T03:04:05Z", "go1.26.0", "module github.com/dxpu/dxpu"} {
		if !strings.Contains(got, want) {
			t.Errorf("version %q lacks %q", got, want)
		}
	}
	bare := versionFrom(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "m"}}).String()
	if !strings.Contains(bare, "(devel)") || !strings.Contains(bare, "without VCS stamping") || strings.Contains(bare, "modified") {
		t.Errorf("unstamped version %q", bare)
	}
}

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
// the roff title, and refuses a missing --dir.
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
	if _, _, err := runDxpu(t, "", "man"); err == nil || !strings.Contains(err.Error(), "--dir") {
		t.Errorf("man without --dir: %v", err)
	}
}
