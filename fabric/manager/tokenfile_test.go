package manager_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/privtest"
)

func TestCreateTokenFileMakesA0600FileThatLoads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "admin.token")
	tok, err := manager.CreateTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(tok) != 2*manager.TokenBytes {
		t.Fatalf("token %q: %d hex digits, want %d (256 bits)", tok, len(tok), 2*manager.TokenBytes)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("created with mode %#o, want 0600", fi.Mode().Perm())
	}
	got, err := manager.LoadTokenFile(path)
	if err != nil || got != tok {
		t.Fatalf("loaded %q %v, want %q", got, err, tok)
	}
	// A second init must not replace the token in use.
	if _, err := manager.CreateTokenFile(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want fs.ErrExist", err)
	}
	if again, _ := manager.LoadTokenFile(path); again != tok {
		t.Fatal("second create changed the token")
	}
	other, err := manager.CreateTokenFile(filepath.Join(t.TempDir(), "b"))
	if err != nil || other == tok {
		t.Fatalf("two fresh tokens are equal (%q) or %v", other, err)
	}
}

func TestLoadTokenFileRefusesOpenModes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o606} {
		path := filepath.Join(dir, "tok-"+mode.String())
		if err := os.WriteFile(path, []byte("abc\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := manager.LoadTokenFile(path)
		if !errors.Is(err, manager.ErrTokenFileMode) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), fmt.Sprintf("%#o", mode)) {
			t.Errorf("mode %#o: %v, want ErrTokenFileMode naming the file and its mode", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		path := filepath.Join(dir, "ok-"+mode.String())
		os.WriteFile(path, []byte("  tok-1 \n"), 0o600)
		os.Chmod(path, mode)
		if tok, err := manager.LoadTokenFile(path); err != nil || tok != "tok-1" {
			t.Errorf("mode %v: %q %v", mode, tok, err)
		}
	}
}

func TestLoadTokenFileRefusesBadContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{"empty": " \n", "two words": "a b\n", "huge": strings.Repeat("x", 5000),
		"escape": "\x1b[2Jtoken\r\n", "not ascii": "caf\xc3\xa9\n", "nul": "a\x00b"} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(body), 0o600)
		if _, err := manager.LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s", name, err, path)
		}
	}
	// A token no HTTP header can carry is refused, naming its first bad byte.
	path := filepath.Join(dir, "escaped")
	os.WriteFile(path, []byte("ab\x1bcd\n"), 0o600)
	if _, err := manager.LoadTokenFile(path); !errors.Is(err, manager.ErrTokenChars) || !strings.Contains(err.Error(), "byte 0x1b at offset 2") {
		t.Errorf("a token holding an escape: %v", err)
	}
	// A file of no bytes at all is "empty" too, not a bare "EOF".
	for _, body := range []string{"", " \n"} {
		path := filepath.Join(dir, "nothing")
		os.WriteFile(path, []byte(body), 0o600)
		if _, err := manager.LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), path+" is empty: expected one token") {
			t.Errorf("%q: %v", body, err)
		}
	}
	if _, err := manager.LoadTokenFile(dir); err == nil || !strings.Contains(err.Error(), "regular") {
		t.Errorf("a directory: %v", err)
	}
	if _, err := manager.LoadTokenFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestLoadTokenFileRefusesPlantedFiles: finding F5 and F6 of the attack
// trial. A 0600 token another user owns (planted in a shared directory
// before the manager ran --init-token), a FIFO (it hung the manager, deaf
// to SIGTERM) and a symbolic link are refused, in one line naming the flag
// and the path; --init-token never writes through a link.
func TestLoadTokenFileRefusesPlantedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := manager.LoadTokenFileFor("--token-file", fifo); done <- err }()
	select {
	case err := <-done:
		if want := "--token-file " + fifo + ": not a regular file (a FIFO)"; err == nil || err.Error() != want {
			t.Errorf("a FIFO: %v, want %q", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a FIFO: LoadTokenFileFor still blocked after 5s")
	}

	real := filepath.Join(dir, "real")
	os.WriteFile(real, []byte("tok\n"), 0o600)
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	if tok, err := manager.LoadTokenFileFor("--read-token-file", link); err != nil || tok != "tok" {
		t.Errorf("a link to a good file (as Kubernetes secret volumes hand them): %q, %v", tok, err)
	}
	dangling := filepath.Join(dir, "dangling")
	os.Symlink(filepath.Join(dir, "planted"), dangling)
	if _, err := manager.CreateTokenFileFor("--token-file", dangling); !errors.Is(err, fs.ErrExist) {
		t.Errorf("create through a dangling link: %v, want fs.ErrExist", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "planted")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("--init-token wrote through a link: %v", err)
	}
	if _, err := manager.LoadTokenFileFor("--token-file", filepath.Join(dir, "g")); err == nil {
		t.Error("a missing file loaded")
	}
	grp := filepath.Join(dir, "grp")
	os.WriteFile(grp, []byte("tok\n"), 0o600)
	os.Chmod(grp, 0o640)
	if _, err := manager.LoadTokenFileFor("--token-file", grp); !errors.Is(err, manager.ErrTokenFileMode) || !strings.HasPrefix(err.Error(), "--token-file "+grp+": mode 0640") {
		t.Errorf("mode 0640: %v", err)
	}

	privtest.Root(t) // the rest chowns a file to another user
	theirs := filepath.Join(dir, "theirs")
	os.WriteFile(theirs, []byte("attackerchosentoken\n"), 0o600)
	if err := os.Chown(theirs, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	if tok, err := manager.LoadTokenFileFor("--token-file", theirs); err == nil || err.Error() != "--token-file "+theirs+": owned by uid 1001, not by this process (uid 0)" {
		t.Errorf("another user's file: %q %v", tok, err)
	}
}
