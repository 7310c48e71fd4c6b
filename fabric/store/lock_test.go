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
// is told which file is held and why, not bbolt's bare "timeout", and how
// long it waited as `dxpu help units` spells durations (500us, not 500µs).
func TestBoltSecondOpenerNamesTheLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pool.db")
	first, err := store.OpenBolt(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	for _, wait := range []struct {
		d    time.Duration
		text string
	}{{20 * time.Millisecond, "(waited 20ms)"}, {500 * time.Microsecond, "(waited 500us)"}} {
		_, err = store.OpenBolt(path, wait.d)
		if !errors.Is(err, store.ErrLocked) {
			t.Fatalf("second opener: %v, want ErrLocked", err)
		}
		for _, want := range []string{path, "another manager", wait.text} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
}
