package privtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeTB records skips and failures instead of ending the test, so the
// gate's behaviour can be observed. Methods not overridden here are not
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

// checkGate runs call against a fakeTB with env set to each value: it must
// skip once unless env is "1", then fail once, saying why it is not a
// skip, and name want either way.
func checkGate(t *testing.T, env, want string, call func(tb testing.TB) bool) {
	t.Helper()
	for _, v := range []string{"", "0", "true", "1"} {
		t.Run(fmt.Sprintf("%s=%q", env, v), func(t *testing.T) {
			t.Setenv(env, v)
			f := &fakeTB{}
			if !call(f) {
				t.Fatal("returned a result")
			}
			got, other := f.skips, f.fatals
			if v == "1" {
				got, other = f.fatals, f.skips
			}
			if len(got) != 1 || len(other) != 0 {
				t.Fatalf("skips %q, fatals %q", f.skips, f.fatals)
			}
			if !strings.Contains(got[0], want) {
				t.Errorf("message %q does not name %q", got[0], want)
			}
			if v == "1" && !strings.HasPrefix(got[0], env+"=1 but ") {
				t.Errorf("failure %q does not say why it is not a skip", got[0])
			}
		})
	}
}

// TestSharedGate calls each shared-file helper where what it asks for
// cannot exist: without DXPU_REQUIRE_SHARED=1 it skips, with it it fails.
func TestSharedGate(t *testing.T) {
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("not a capture"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(empty, "gone")
	for _, c := range []struct {
		name, want string
		call       func(tb testing.TB) bool
	}{
		{"SharedDir", "no-such-dir-7f3a", func(tb testing.TB) bool { return SharedDir(tb, "no-such-dir-7f3a") == "" }},
		{"SharedDir of a file", "SOURCE.md", func(tb testing.TB) bool { return SharedDir(tb, "traces", "SOURCE.md") == "" }},
		{"SharedFile", "no-such-file-7f3a", func(tb testing.TB) bool { return SharedFile(tb, "no-such-file-7f3a") == "" }},
		{"SharedFile of a dir", "traces", func(tb testing.TB) bool { return SharedFile(tb, "traces") == "" }},
		{"SharedFiles none matching", empty, func(tb testing.TB) bool { return SharedFiles(tb, empty, ".pcap") == nil }},
		{"SharedFiles missing dir", missing, func(tb testing.TB) bool { return SharedFiles(tb, missing) == nil }},
	} {
		t.Run(c.name, func(t *testing.T) { checkGate(t, RequireSharedEnv, c.want, c.call) })
	}
}

// TestPrivilegeGate: a missing tool skips, or fails under
// DXPU_REQUIRE_PRIVILEGED=1.
func TestPrivilegeGate(t *testing.T) {
	checkGate(t, RequirePrivilegedEnv, "no-such-tool-7f3a", func(tb testing.TB) bool {
		return Tool(tb, "no-such-tool-7f3a") == ""
	})
}

// TestOptIn: an unset opt-in variable skips whatever the switches say; a
// set one is returned.
func TestOptIn(t *testing.T) {
	t.Setenv(RequirePrivilegedEnv, "1")
	t.Setenv(RequireSharedEnv, "1")
	t.Setenv("DXPU_TEST_OPTIN_7F3A", "")
	f := &fakeTB{}
	OptIn(f, "DXPU_TEST_OPTIN_7F3A", "build it")
	if len(f.skips) != 1 || len(f.fatals) != 0 || !strings.Contains(f.skips[0], "DXPU_TEST_OPTIN_7F3A") {
		t.Fatalf("skips %q, fatals %q", f.skips, f.fatals)
	}
	t.Setenv("DXPU_TEST_OPTIN_7F3A", "/opt/x")
	f = &fakeTB{}
	if v := OptIn(f, "DXPU_TEST_OPTIN_7F3A", "build it"); v != "/opt/x" || len(f.skips)+len(f.fatals) != 0 {
		t.Fatalf("OptIn = %q; skips %q, fatals %q", v, f.skips, f.fatals)
	}
}

// TestShared uses the real shared files when they are there (and, like
// every user of the gate, skips or fails when they are not).
func TestShared(t *testing.T) {
	t.Parallel()
	t.Run("NetTLPCaptures", func(t *testing.T) {
		files := NetTLPCaptures(t)
		for _, p := range files {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || !strings.HasSuffix(p, ".pcap") && !strings.HasSuffix(p, ".pcapng") {
				t.Errorf("%s: %v", p, err)
			}
		}
		t.Logf("%d captures under %s", len(files), SharedDir(t, "testdata", "nettlp"))
	})
	t.Run("Traces", func(t *testing.T) {
		files := Traces(t)
		for _, p := range files {
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() || !strings.HasSuffix(p, ".json.gz") {
				t.Errorf("%s: %v", p, err)
			}
		}
		t.Logf("%d traces under %s", len(files), SharedDir(t, "traces"))
	})
	t.Run("SharedFile", func(t *testing.T) {
		p := SharedFile(t, "traces", "SOURCE.md")
		if filepath.Dir(p) != SharedDir(t, "traces") {
			t.Errorf("SharedFile %s is not in SharedDir %s", p, SharedDir(t, "traces"))
		}
	})
}
