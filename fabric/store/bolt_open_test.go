package store

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A store file in a directory that does not exist is one error naming the
// file once (the new user's trial: "store: open X: open X: no such file").
func TestOpenBoltNamesFileOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "missing", "x.db")
	_, err := OpenBolt(path, time.Second)
	if err == nil {
		t.Fatal("opened a store in a directory that does not exist")
	}
	if msg := err.Error(); strings.Count(msg, path) != 1 || !strings.Contains(msg, "no such file") {
		t.Errorf("error %q: want the file named once and why", msg)
	}
}
