package shareddata

// The test helpers below are the package's old API, kept so that callers not
// yet moved to internal/privtest still compile. They take a minimal TB (so
// this package need not import testing) and decide skip-or-fail exactly as
// privtest does. New tests call privtest.SharedDir, SharedFile, SharedFiles
// and NetTLPCaptures instead.

// TB is the part of testing.TB the deprecated helpers use.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// unavailable skips the test, or fails it when Required.
func unavailable(tb TB, err error) {
	tb.Helper()
	if Required() {
		tb.Fatalf(RequireEnv+"=1 but %v", err)
		return
	}
	tb.Skipf("skipping: %v", err)
}

// Dir is FindDir for tests: it skips (or fails) the test when the directory
// is absent.
//
// Deprecated: use privtest.SharedDir.
func Dir(tb TB, elem ...string) string {
	tb.Helper()
	p, err := FindDir(elem...)
	if err != nil {
		unavailable(tb, err)
	}
	return p
}

// File is FindFile for tests: it skips (or fails) the test when the file is
// absent.
//
// Deprecated: use privtest.SharedFile.
func File(tb TB, elem ...string) string {
	tb.Helper()
	p, err := FindFile(elem...)
	if err != nil {
		unavailable(tb, err)
	}
	return p
}

// Files is FindFiles for tests: it skips (or fails) the test when there
// are none.
//
// Deprecated: use privtest.SharedFiles.
func Files(tb TB, dir string, exts ...string) []string {
	tb.Helper()
	files, err := FindFiles(dir, exts...)
	if err != nil {
		unavailable(tb, err)
	}
	return files
}

// NetTLPCaptures returns every NetTLP capture under testdata/nettlp, or
// skips (or fails) the test.
//
// Deprecated: use privtest.NetTLPCaptures.
func NetTLPCaptures(tb TB) []string {
	tb.Helper()
	dir := Dir(tb, "testdata", "nettlp")
	if dir == "" {
		return nil
	}
	return Files(tb, dir, ".pcap", ".pcapng")
}
