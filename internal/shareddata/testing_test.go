package shareddata

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeTB records skips and failures instead of ending the test, so the
// helpers' behaviour can be observed. Methods not overridden here are not
// expected to be called; the embedded nil TB makes them panic if they are.
type fakeTB struct {
	testing.TB
	skips, fatals []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skips = append(f.skips, fmt.Sprintf(format, args...))
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
}

// TestUnavailableSkipsOrFails calls each helper where the shared files it
// asks for cannot exist: without DXPU_REQUIRE_SHARED=1 it skips, with it
// it fails, once, naming what is missing.
func TestUnavailableSkipsOrFails(t *testing.T) {
	empty := t.TempDir()
	mkfile(t, empty, "notes.txt", "not a capture")
	missing := filepath.Join(empty, "gone")
	calls := []struct {
		name string
		want string // in the message
		call func(tb testing.TB) bool
	}{
		{"Dir", "no-such-dir-7f3a", func(tb testing.TB) bool { return Dir(tb, "no-such-dir-7f3a") == "" }},
		{"Dir of a file", "", func(tb testing.TB) bool {
			// traces/SOURCE.md is a file where shared exists; otherwise Root fails.
			return Dir(tb, "traces", "SOURCE.md") == ""
		}},
		{"File", "no-such-file-7f3a", func(tb testing.TB) bool { return File(tb, "no-such-file-7f3a") == "" }},
		{"File of a dir", "", func(tb testing.TB) bool { return File(tb, "traces") == "" }},
		{"Files none matching", empty, func(tb testing.TB) bool { return Files(tb, empty, ".pcap") == nil }},
		{"Files missing dir", missing, func(tb testing.TB) bool { return Files(tb, missing) == nil }},
		{"Files no dir", "no shared directory", func(tb testing.TB) bool { return Files(tb, "") == nil }},
	}
	for _, env := range []string{"", "0", "true", "1"} {
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
				if len(got) != 1 || len(other) != 0 {
					t.Fatalf("skips %q, fatals %q", f.skips, f.fatals)
				}
				if !strings.Contains(got[0], c.want) {
					t.Errorf("message %q does not name %q", got[0], c.want)
				}
				if env == "1" && !strings.HasPrefix(got[0], RequireEnv+"=1 but ") {
					t.Errorf("failure %q does not say why it is not a skip", got[0])
				}
				t.Log(got[0])
			})
		}
	}
}

func TestFiles(t *testing.T) {
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
		f := &fakeTB{}
		got := Files(f, dir, c.exts...)
		if len(f.skips)+len(f.fatals) != 0 {
			t.Errorf("exts %q: skips %q fatals %q", c.exts, f.skips, f.fatals)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("exts %q: got %q, want %q", c.exts, got, c.want)
		}
	}
}

// TestShared uses the real shared files when they are there (and, like
// every user of this package, skips or fails when they are not).
func TestShared(t *testing.T) {
	t.Run("NetTLPCaptures", func(t *testing.T) {
		files := NetTLPCaptures(t)
		for _, p := range files {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || !strings.HasSuffix(p, ".pcap") && !strings.HasSuffix(p, ".pcapng") {
				t.Errorf("%s: %v", p, err)
			}
		}
		t.Logf("%d captures under %s", len(files), Dir(t, "testdata", "nettlp"))
	})
	t.Run("Traces", func(t *testing.T) {
		files := Traces(t)
		for _, p := range files {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || !strings.HasSuffix(p, ".json.gz") {
				t.Errorf("%s: %v", p, err)
			}
		}
		t.Logf("%d traces under %s", len(files), Dir(t, "traces"))
	})
	t.Run("File", func(t *testing.T) {
		p := File(t, "traces", "SOURCE.md")
		if filepath.Dir(p) != Dir(t, "traces") {
			t.Errorf("File %s is not in Dir %s", p, Dir(t, "traces"))
		}
	})
}
