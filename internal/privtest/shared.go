package privtest

import (
	"testing"

	"github.com/dxpu/dxpu/internal/shareddata"
)

// RequireSharedEnv names the environment variable that, set to "1", turns
// every skip for missing shared files into a failure.
const RequireSharedEnv = shareddata.RequireEnv

// SharedRequired reports whether missing shared files must fail tests
// instead of skipping them.
func SharedRequired() bool { return shareddata.Required() }

// sharedUnavailable skips the test, or fails it when SharedRequired.
func sharedUnavailable(tb testing.TB, err error) {
	tb.Helper()
	if SharedRequired() {
		tb.Fatalf(RequireSharedEnv+"=1 but %v", err)
		return
	}
	tb.Skipf("skipping: %v", err)
}

// SharedDir returns the shared directory elem... (see shareddata.FindDir),
// skipping (or failing) the test when it is absent.
func SharedDir(tb testing.TB, elem ...string) string {
	tb.Helper()
	p, err := shareddata.FindDir(elem...)
	if err != nil {
		sharedUnavailable(tb, err)
	}
	return p
}

// SharedFile returns the shared regular file elem... (see
// shareddata.FindFile), skipping (or failing) the test when it is absent.
func SharedFile(tb testing.TB, elem ...string) string {
	tb.Helper()
	p, err := shareddata.FindFile(elem...)
	if err != nil {
		sharedUnavailable(tb, err)
	}
	return p
}

// SharedFiles returns the files under dir ending in one of exts (see
// shareddata.FindFiles), skipping (or failing) the test when there are none.
func SharedFiles(tb testing.TB, dir string, exts ...string) []string {
	tb.Helper()
	files, err := shareddata.FindFiles(dir, exts...)
	if err != nil {
		sharedUnavailable(tb, err)
	}
	return files
}

// NetTLPCaptures returns every shared NetTLP capture (.pcap, .pcapng) under
// testdata/nettlp, or skips (or fails) the test.
func NetTLPCaptures(tb testing.TB) []string {
	tb.Helper()
	dir := SharedDir(tb, "testdata", "nettlp")
	if dir == "" {
		return nil
	}
	return SharedFiles(tb, dir, ".pcap", ".pcapng")
}

// Traces returns every shared profiler trace (.json.gz) under traces, or
// skips (or fails) the test.
func Traces(tb testing.TB) []string {
	tb.Helper()
	dir := SharedDir(tb, "traces")
	if dir == "" {
		return nil
	}
	return SharedFiles(tb, dir, ".json.gz")
}
