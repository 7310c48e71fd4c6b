package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestFrom: every field of the build information reaches
// the line, and a build without VCS stamping says so.
func TestFrom(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/dxpu/dxpu", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := From(bi).String()
	for _, want := range []string{"dxpu v0.3.0", "revision abc123 (modified)", "committed 2026-01-02T03:04:05Z", "go1.26.0", "module github.com/dxpu/dxpu"} {
		if !strings.Contains(got, want) {
			t.Errorf("version %q lacks %q", got, want)
		}
	}
	bare := From(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "m"}}).String()
	if !strings.Contains(bare, "(devel)") || !strings.Contains(bare, "without VCS stamping") || strings.Contains(bare, "modified") {
		t.Errorf("unstamped version %q", bare)
	}
}
