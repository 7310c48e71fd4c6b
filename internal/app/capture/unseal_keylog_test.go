package capture

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/privtest"
)

// unsealRefuses runs unseal with the key log keys and wants the usage
// error want, with no OUT written. A regression that blocks on a FIFO
// fails here after 10s.
func unsealRefuses(t *testing.T, keys, want string) {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.pcap")
	copyFile(t, mixPcap, in)
	out := filepath.Join(dir, "out.pcap")
	done := make(chan error, 1)
	go func() {
		done <- Unseal(UnsealOptions{In: in, Out: out, KeyLog: keys, UDPPort: 7001}, io.Discard, io.Discard)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, apperr.ErrUsage) || err.Error() != want {
			t.Errorf("--key-log %s: %v, want the usage error %q", keys, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("--key-log %s: still running after 10s, want the usage error %q", keys, want)
	}
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--key-log %s refused, yet OUT is there: %v", keys, err)
	}
}

// TestUnsealKeyLogThroughSecretfile: the key log holds traffic secrets,
// and is read as every secret file: one group or others can read, a FIFO
// (at once) or a directory is refused in one line naming --key-log, the
// file and what is wrong. os.Open took a 0644 key log.
func TestUnsealKeyLogThroughSecretfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loose := filepath.Join(dir, "keys.log")
	if err := os.WriteFile(loose, []byte("# no secrets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.log")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	kdir := filepath.Join(dir, "kdir")
	if err := os.Mkdir(kdir, 0o700); err != nil {
		t.Fatal(err)
	}
	unsealRefuses(t, loose, "unseal: --key-log "+loose+": mode 0644 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)")
	unsealRefuses(t, fifo, "unseal: --key-log "+fifo+": not a regular file (a FIFO)")
	unsealRefuses(t, kdir, "unseal: --key-log "+kdir+": not a regular file (a directory)")
	missing := filepath.Join(dir, "missing.log")
	unsealRefuses(t, missing, "unseal: --key-log "+missing+": no such file or directory")
}

// TestUnsealKeyLogOfAnotherUser: a 0600 key log another user owns (secrets
// of their choosing) is refused.
func TestUnsealKeyLogOfAnotherUser(t *testing.T) {
	privtest.Root(t)
	t.Parallel()
	theirs := filepath.Join(t.TempDir(), "keys.log")
	if err := os.WriteFile(theirs, []byte("# no secrets\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	unsealRefuses(t, theirs, "unseal: --key-log "+theirs+": owned by uid 1001, not by this process (uid 0)")
}
