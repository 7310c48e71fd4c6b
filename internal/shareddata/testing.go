package shareddata

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// unavailable skips the test, or fails it when Required.
func unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if Required() {
		tb.Fatalf(RequireEnv+"=1 but "+format, args...)
		return
	}
	tb.Skipf("skipping: "+format, args...)
}

// Dir returns the directory Root()/elem..., skipping (or failing) the test
// when it is absent.
func Dir(tb testing.TB, elem ...string) string {
	tb.Helper()
	root, err := Root()
	if err != nil {
		unavailable(tb, "%s: %v", filepath.Join(elem...), err)
		return ""
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	st, err := os.Stat(p)
	if err != nil {
		unavailable(tb, "shared directory absent: %v", err)
		return ""
	}
	if !st.IsDir() {
		unavailable(tb, "shared path %s is not a directory", p)
		return ""
	}
	return p
}

// File returns the regular file Root()/elem..., skipping (or failing) the
// test when it is absent.
func File(tb testing.TB, elem ...string) string {
	tb.Helper()
	root, err := Root()
	if err != nil {
		unavailable(tb, "%s: %v", filepath.Join(elem...), err)
		return ""
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	st, err := os.Stat(p)
	if err != nil {
		unavailable(tb, "shared file absent: %v", err)
		return ""
	}
	if !st.Mode().IsRegular() {
		unavailable(tb, "shared path %s is not a regular file", p)
		return ""
	}
	return p
}

// Files returns, in lexical order, the regular files under dir (searched
// recursively) whose names end in one of exts (".pcap", ".json.gz"; all
// files when exts is empty). It skips (or fails) the test when there are
// none or dir cannot be read (an empty dir counts as none).
func Files(tb testing.TB, dir string, exts ...string) []string {
	tb.Helper()
	if dir == "" {
		unavailable(tb, "no shared directory")
		return nil
	}
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !hasSuffix(d.Name(), exts) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// Follow links to files; skip links to directories.
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				return nil
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		unavailable(tb, "reading shared files: %v", err)
		return nil
	}
	if len(files) == 0 {
		unavailable(tb, "no %s files under %s", strings.Join(exts, "/"), dir)
		return nil
	}
	return files
}

func hasSuffix(name string, exts []string) bool {
	if len(exts) == 0 {
		return true
	}
	for _, e := range exts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// NetTLPCaptures returns every NetTLP capture (.pcap, .pcapng) under
// testdata/nettlp, or skips (or fails) the test.
func NetTLPCaptures(tb testing.TB) []string {
	tb.Helper()
	dir := Dir(tb, "testdata", "nettlp")
	if dir == "" {
		return nil
	}
	return Files(tb, dir, ".pcap", ".pcapng")
}

// Traces returns every profiler trace (.json.gz) under traces, or skips
// (or fails) the test.
func Traces(tb testing.TB) []string {
	tb.Helper()
	dir := Dir(tb, "traces")
	if dir == "" {
		return nil
	}
	return Files(tb, dir, ".json.gz")
}
