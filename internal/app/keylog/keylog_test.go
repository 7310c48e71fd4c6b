package keylog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp/encap"
)

// TestKeyLogFile: the file is created 0600 and appended to (a restarted
// daemon keeps the earlier lines); each secret is one line that reads
// back; a file others may read is refused.
func TestKeyLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.log")
	s := seal.Secret{Handshake: true, PairID: 4, Generation: 1, Role: encap.RoleHost, Mode: seal.ModeGCM, PRK: bytes.Repeat([]byte{9}, 32)}
	for range 2 {
		k, err := Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		k.Log(s)
		if err := k.Close(); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	if n := strings.Count(string(b), "\n"); n != 2 {
		t.Fatalf("%d lines after two runs, want 2:\n%s", n, b)
	}
	got, err := seal.ReadKeyLog(bytes.NewReader(b))
	if err != nil || len(got) != 1 || got[0].PairID != 4 || !bytes.Equal(got[0].PRK, s.PRK) {
		t.Fatalf("read back %+v, %v", got, err)
	}

	open := filepath.Join(t.TempDir(), "open.log")
	if err := os.WriteFile(open, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(open, nil); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Fatalf("a 0644 key log: %v, want a refusal naming 0600", err)
	}
}

// TestKeyLogRefusesPlantedFiles: finding F5 and F6 of the attack trial. An
// empty key log another user owns (mode 0600, in a shared directory), a
// symbolic link (to a file of ours: the link's owner would choose where our
// secrets go), a dangling link (Open must not create its target) and a
// FIFO (it hung the bridge) are refused in one line naming --key-log and
// the path, and nothing is written to them.
func TestKeyLogRefusesPlantedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mine := filepath.Join(dir, "mine")
	if err := os.WriteFile(mine, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(mine, link)
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "planted"), dangling)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		link:     "--key-log " + link + ": a symbolic link; give the file itself",
		dangling: "--key-log " + dangling + ": a symbolic link; give the file itself",
		fifo:     "--key-log " + fifo + ": not a regular file (a FIFO)",
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		os.WriteFile(theirs, nil, 0o600)
		if err := os.Chown(theirs, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		cases[theirs] = "--key-log " + theirs + ": owned by uid 1001, not by this process (uid 0)"
	}
	s := seal.Secret{Handshake: true, PairID: 4, Generation: 1, Role: encap.RoleHost, Mode: seal.ModeGCM, PRK: bytes.Repeat([]byte{9}, 32)}
	for path, want := range cases {
		done := make(chan error, 1)
		go func() {
			k, err := Open(path, nil)
			if err == nil {
				k.Log(s)
				k.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || err.Error() != want {
				t.Errorf("%v, want %q", err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Open still blocked after 5s", path)
		}
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Size() != 0 {
			t.Errorf("%s: secrets written (%d bytes)", path, fi.Size())
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "planted")); err == nil {
		t.Error("Open created the file a dangling link names")
	}
	privtest.Root(t) // the owner case ran above only as root
}
