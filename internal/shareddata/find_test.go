package shareddata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestFindFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, rel := range []string{"a/x.pcap", "a/b/y.pcapng", "a/z.txt", "c.json.gz", "d.json", "e.pcap/f.txt"} {
		mkfile(t, dir, rel, rel)
	}
	if err := os.Symlink(filepath.Join(dir, "a", "x.pcap"), filepath.Join(dir, "g.pcap")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "h.pcap")); err != nil {
		t.Fatal(err)
	}
	abs := func(rels ...string) []string {
		var ps []string
		for _, r := range rels {
			ps = append(ps, filepath.Join(dir, r))
		}
		return ps
	}
	for _, c := range []struct {
		exts []string
		want []string
	}{
		{[]string{".pcap", ".pcapng"}, abs("a/b/y.pcapng", "a/x.pcap", "g.pcap")},
		{[]string{".pcap"}, abs("a/x.pcap", "g.pcap")},
		{[]string{".json.gz"}, abs("c.json.gz")},
		{nil, abs("a/b/y.pcapng", "a/x.pcap", "a/z.txt", "c.json.gz", "d.json", "e.pcap/f.txt", "g.pcap")},
	} {
		got, err := FindFiles(dir, c.exts...)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("exts %q: got %q, %v; want %q", c.exts, got, err, c.want)
		}
	}
}

// TestFindNotFound: every way of not finding shared files is an error
// wrapping ErrNotFound that names what was asked for.
func TestFindNotFound(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	mkfile(t, empty, "notes.txt", "not a capture")
	missing := filepath.Join(empty, "gone")
	for _, c := range []struct {
		name, want string
		find       func() (any, error)
	}{
		{"FindDir", "no-such-dir-7f3a", func() (any, error) { return FindDir("no-such-dir-7f3a") }},
		// traces/SOURCE.md is a file where shared exists; otherwise Root fails.
		{"FindDir of a file", "SOURCE.md", func() (any, error) { return FindDir("traces", "SOURCE.md") }},
		{"FindFile", "no-such-file-7f3a", func() (any, error) { return FindFile("no-such-file-7f3a") }},
		{"FindFile of a dir", "traces", func() (any, error) { return FindFile("traces") }},
		{"FindFiles none matching", empty, func() (any, error) { return FindFiles(empty, ".pcap") }},
		{"FindFiles missing dir", missing, func() (any, error) { return FindFiles(missing) }},
		{"FindFiles no dir", "no shared directory", func() (any, error) { return FindFiles("") }},
	} {
		got, err := c.find()
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: %v, %v; want ErrNotFound", c.name, got, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q does not name %q", c.name, err, c.want)
		}
	}
}

// fakeTB records skips and failures instead of ending the test.
type fakeTB struct{ skips, fatals []string }

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skips = append(f.skips, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// TestDeprecatedHelpers: the old test helpers still skip, or fail under
// DXPU_REQUIRE_SHARED=1, once, naming what is missing.
func TestDeprecatedHelpers(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	calls := []struct {
		name, want string
		call       func(tb TB) bool
	}{
		{"Dir", "no-such-dir-7f3a", func(tb TB) bool { return Dir(tb, "no-such-dir-7f3a") == "" }},
		{"File", "no-such-file-7f3a", func(tb TB) bool { return File(tb, "no-such-file-7f3a") == "" }},
		{"Files", missing, func(tb TB) bool { return Files(tb, missing) == nil }},
	}
	for _, env := range []string{"", "1"} {
		for _, c := range calls {
			t.Run(fmt.Sprintf("%s/%s=%q", c.name, RequireEnv, env), func(t *testing.T) {
				t.Setenv(RequireEnv, env)
				f := &fakeTB{}
				if !c.call(f) {
					t.Fatal("returned a path")
				}
				got, other := f.skips, f.fatals
				if env == "1" {
					got, other = f.fatals, f.skips
				}
				if len(got) != 1 || len(other) != 0 || !strings.Contains(got[0], c.want) {
					t.Fatalf("skips %q, fatals %q; want one naming %q", f.skips, f.fatals, c.want)
				}
			})
		}
	}
}
