package manager_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
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
	for name, body := range map[string]string{"empty": " \n", "two words": "a b\n", "huge": strings.Repeat("x", 5000)} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(body), 0o600)
		if _, err := manager.LoadTokenFile(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want an error naming %s", name, err, path)
		}
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
