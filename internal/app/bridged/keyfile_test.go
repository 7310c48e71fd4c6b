package bridged

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/privtest"
)

func TestLoadKeyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := bytes.Repeat([]byte{0xab}, 32)
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	for name, tc := range map[string]struct {
		path string
		want []byte
		err  string
	}{
		"raw":     {write("raw", raw, 0o600), raw, ""},
		"hex":     {write("hex", []byte(strings.Repeat("ab", 32)+"\n"), 0o400), raw, ""},
		"loose":   {write("loose", raw, 0o644), nil, "mode 0644"},
		"short":   {write("short", raw[:16], 0o600), nil, "16 bytes, not 32; expected 32 raw bytes, or 64 hex digits"},
		"bad hex": {write("badhex", []byte(strings.Repeat("zz", 32)), 0o600), nil, "not hex: 'z' at offset 0"},
		// 64 characters and a newline: the hex form with a typo, named as
		// such, not "found 65 bytes".
		"hex typo":  {write("typo", []byte(strings.Repeat("ab", 20)+"ag"+strings.Repeat("ab", 11)+"\n"), 0o600), nil, "typo: not hex: 'g' at offset 41; expected 32 raw bytes, or 64 hex digits"},
		"short hex": {write("shorthex", []byte(strings.Repeat("ab", 31)+"\n"), 0o600), nil, "62 characters of text, not 64 hex digits"},
		"empty":     {write("empty", nil, 0o600), nil, "empty is empty: expected 32 raw bytes"},
		"missing":   {filepath.Join(dir, "nope"), nil, "no such file"},
		"directory": {dir, nil, "not a regular file"},
	} {
		k, err := LoadKeyFile(tc.path)
		if tc.err == "" {
			if err != nil || !bytes.Equal(k, tc.want) {
				t.Errorf("%s: %x %v", name, k, err)
			}
			continue
		}
		if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want ErrKeyFile mentioning %q", name, err, tc.err)
		}
	}
}

// TestLoadKeyFileRefusesPlantedFiles: findings F5 and F6 of the attack
// trial for --key-file. A FIFO (it hung the bridge), a symbolic link, a
// group-readable key and one another user owns are refused in one line
// naming the flag and the path, each wrapping ErrKeyFile.
func TestLoadKeyFileRefusesPlantedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := []byte(strings.Repeat("ab", 32) + "\n")
	real := filepath.Join(dir, "real")
	if err := os.WriteFile(real, key, 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	grp := filepath.Join(dir, "grp")
	os.WriteFile(grp, key, 0o600)
	os.Chmod(grp, 0o640)
	if _, err := LoadKeyFileFor("--key-file", link); err != nil {
		t.Errorf("a link to a good key file: %v", err)
	}
	cases := map[string]string{
		fifo: "--key-file " + fifo + ": not a regular file (a FIFO)",
		grp:  "--key-file " + grp + ": mode 0640 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)",
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		os.WriteFile(theirs, key, 0o600)
		if err := os.Chown(theirs, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		cases[theirs] = "--key-file " + theirs + ": owned by uid 1001, not by this process (uid 0)"
	}
	for path, want := range cases {
		done := make(chan error, 1)
		go func() { _, err := LoadKeyFileFor("--key-file", path); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrKeyFile) || err.Error() != want {
				t.Errorf("%v, want %q wrapping ErrKeyFile", err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: still blocked after 5s", path)
		}
	}
	if k, err := LoadKeyFileFor("--key-file", real); err != nil || len(k) != 32 {
		t.Errorf("the real key: %x %v", k, err)
	}
	privtest.Root(t) // the owner case ran above only as root
}
