package trace

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDecodeFileRefusesNonFiles: a directory and a FIFO given as a trace
// are refused by name (ErrNotAFile): the directory failed inside the
// decoder as "byte 0: read failed", and opening the FIFO blocked with no
// writer.
func TestDecodeFileRefusesNonFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{dir, fifo} {
		done := make(chan error, 1)
		go func() { _, err := DecodeFile(path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotAFile) {
				t.Errorf("DecodeFile(%s): %v, want ErrNotAFile", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("DecodeFile(%s) still blocked after 10s", path)
		}
	}
}
