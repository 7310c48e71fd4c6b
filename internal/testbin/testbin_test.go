package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDxpu: one build, a binary that runs, removed by Remove; with
// DXPU_TEST_BIN set, that binary, no build, and Remove leaves it.
func TestDxpu(t *testing.T) {
	p := Dxpu(t)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatalf("Dxpu returned %s: %v", p, err)
	}
	if q := Dxpu(t); q != p {
		t.Errorf("second call: %s, want %s again", q, p)
	}
	if fi2, err := os.Stat(p); err != nil || !os.SameFile(fi, fi2) || !fi2.ModTime().Equal(fi.ModTime()) {
		t.Errorf("second call built again: %v", err)
	}
	out, err := exec.Command(p, "--help").CombinedOutput()
	if !strings.Contains(string(out), "dxpu") {
		t.Errorf("%s --help: %v, %q; want the usage", p, err, out)
	}
	Remove()
	_, err = os.Stat(p)
	if given := os.Getenv(Env); given != "" {
		if p != given || err != nil {
			t.Errorf("with %s=%s: Dxpu gave %s, after Remove %v; want the binary given, left in place", Env, given, p, err)
		}
		return
	}
	if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
		t.Errorf("after Remove: %v, want %s gone", err, filepath.Dir(p))
	}
}
