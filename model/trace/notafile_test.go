package trace

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestDecodeFileRefusesADirectory: a directory given as a trace is
// refused by name (ErrNotAFile); it failed inside the decoder as "byte 0:
// read failed". A pipe is still read as a stream.
func TestDecodeFileRefusesADirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := DecodeFile(dir); !errors.Is(err, ErrNotAFile) {
		t.Fatalf("DecodeFile(%s): %v, want ErrNotAFile", dir, err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	go func() {
		w.Write([]byte(`{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":0,"dur":10,"pid":0,"tid":7}]}`))
		w.Close()
	}()
	wl, err := DecodeFile(filepath.Join("/proc/self/fd", strconv.Itoa(int(r.Fd()))))
	if err != nil || wl == nil {
		t.Fatalf("a trace through a pipe: %v", err)
	}
}
