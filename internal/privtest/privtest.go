// Package privtest is the one gate for tests that need root, network
// namespaces, clang, bpftool or tshark. On a machine without them the test is
// skipped; with DXPU_REQUIRE_PRIVILEGED=1 (set by .ci/run) it fails instead,
// so CI can never pass by skipping.
package privtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// Required reports whether missing privileges must fail tests instead of
// skipping them.
func Required() bool { return os.Getenv("DXPU_REQUIRE_PRIVILEGED") == "1" }

func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf("DXPU_REQUIRE_PRIVILEGED=1 but "+format, args...)
	}
	tb.Skipf("skipping: "+format, args...)
}

// Root skips (or fails) the test unless it runs as root on Linux.
func Root(tb testing.TB) {
	tb.Helper()
	if runtime.GOOS != "linux" {
		unavailable(tb, "needs Linux, running on %s", runtime.GOOS)
		return
	}
	if os.Geteuid() != 0 {
		unavailable(tb, "needs root (euid %d)", os.Geteuid())
	}
}

// Tool skips (or fails) the test unless each named program is on PATH, and
// returns the path of the first one.
func Tool(tb testing.TB, names ...string) string {
	tb.Helper()
	first := ""
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			unavailable(tb, "needs %s on PATH", n)
			return ""
		}
		if first == "" {
			first = p
		}
	}
	return first
}

// NetNS skips (or fails) the test unless it may create network namespaces.
func NetNS(tb testing.TB) {
	tb.Helper()
	Root(tb)
	if err := unix.Access("/proc/self/ns/net", unix.R_OK); err != nil {
		unavailable(tb, "no network namespace support: %v", err)
	}
	Tool(tb, "ip")
}

// BPF skips (or fails) the test unless it may load BPF programs: root and a
// mounted bpffs are enough here; the loader reports finer errors itself.
func BPF(tb testing.TB) {
	tb.Helper()
	Root(tb)
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err != nil {
		unavailable(tb, "no /sys/fs/bpf: %v", err)
	}
}

// File skips (or fails) the test unless a file matches the glob pattern
// (a guest kernel, a static busybox), and returns the last match in
// lexical order (the newest of versioned names).
func File(tb testing.TB, pattern string) string {
	tb.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		unavailable(tb, "needs a file matching %s", pattern)
		return ""
	}
	sort.Strings(m)
	return m[len(m)-1]
}
