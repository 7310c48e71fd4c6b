// Package privtest is the one gate through which a test may skip. A test
// skips only when something outside the product is missing: a privilege
// (root, network namespaces, bpffs), a tool on PATH (clang, etcd, tshark),
// an address space (the 127.0.0.0/8 loopback net beyond 127.0.0.1, which
// only Linux routes to lo), or the shared files beside the checkout
// (../shared: NetTLP captures, profiler traces).
//
// On a machine without them the test is skipped; with
// DXPU_REQUIRE_PRIVILEGED=1 (privileges, tools, addresses) or
// DXPU_REQUIRE_SHARED=1 (shared files), both set by .ci/run, it fails
// instead, so CI can never pass by skipping. A product or configuration
// error is never a reason to skip: tests report it with t.Fatal.
//
// Two skips are not about the machine and ignore the switches: Short (a
// long test under go test -short) and OptIn (a test that needs something
// CI cannot install, asked for by an environment variable).
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

// RequirePrivilegedEnv names the environment variable that, set to "1",
// turns every skip for a missing privilege, tool or address into a failure.
const RequirePrivilegedEnv = "DXPU_REQUIRE_PRIVILEGED"

// Required reports whether missing privileges must fail tests instead of
// skipping them.
func Required() bool { return os.Getenv(RequirePrivilegedEnv) == "1" }

func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf(RequirePrivilegedEnv+"=1 but "+format, args...)
		return
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

// Loopback skips (or fails) the test unless every address of 127.0.0.0/8
// reaches the local host without configuration, as on Linux. Tests that
// bind 127.0.x.y call it first; after it, failing to bind is a failure.
func Loopback(tb testing.TB) {
	tb.Helper()
	if runtime.GOOS != "linux" {
		unavailable(tb, "binds 127.0.0.0/8 addresses beyond 127.0.0.1, which only Linux routes to lo (running on %s)", runtime.GOOS)
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
