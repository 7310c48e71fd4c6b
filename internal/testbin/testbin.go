// Package testbin builds the dxpu binary for tests that run it as a
// process, once per test binary. DXPU_TEST_BIN names a binary built
// already instead (one built with a fix reverted, to see a test fail).
// Only tests import it (internal/layering keeps it out of the binary).
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Env names the environment variable that gives a prebuilt dxpu.
const Env = "DXPU_TEST_BIN"

var (
	once  sync.Once
	path  string
	err   error
	built bool // path is ours to remove
)

// Dxpu returns the path of the dxpu binary, building cmd/dxpu on its first
// call; a failed build fails tb (and every later call).
func Dxpu(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		if path = os.Getenv(Env); path != "" {
			return
		}
		dir, e := os.MkdirTemp("", "dxpu-testbin-")
		if e != nil {
			err = e
			return
		}
		path, built = filepath.Join(dir, "dxpu"), true
		if out, e := exec.Command("go", "build", "-o", path, "github.com/dxpu/dxpu/cmd/dxpu").CombinedOutput(); e != nil {
			err = fmt.Errorf("go build: %v\n%s", e, out)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Remove deletes what Dxpu built, not a binary DXPU_TEST_BIN names. A
// TestMain calls it after m.Run.
func Remove() {
	if built {
		os.RemoveAll(filepath.Dir(path))
	}
}
