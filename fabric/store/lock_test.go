package store_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/store"
)

// TestBoltSecondOpenerNamesTheLock: a second manager on the same bbolt file
// is told which file is held and why, not bbolt's bare "timeout".
func TestBoltSecondOpenerNamesTheLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pool.db")
	first, err := store.OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, err = store.OpenBolt(path, 20*time.Millisecond)
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("second opener: %v, want ErrLocked", err)
	}
	for _, want := range []string{path, "another manager"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
