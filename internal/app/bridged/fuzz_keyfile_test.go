package bridged

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadKeyFile reads an arbitrary pair key file (mode 0600, so only its
// content is at stake). Invariants: a refusal wraps ErrKeyFile and is one
// non-empty line that names the file; an accepted key is 32 bytes: the
// file itself when it is 32 bytes long, else the 64 hex digits it holds.
func FuzzLoadKeyFile(f *testing.F) {
	f.Add(bytes.Repeat([]byte{0xab}, 32))
	f.Add([]byte(strings.Repeat("ab", 32) + "\n"))
	f.Add([]byte(" " + strings.Repeat("0F", 32) + "\r\n"))
	f.Add([]byte(strings.Repeat("ab", 31) + "zz\n"))
	f.Add([]byte("secret\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "pair.key")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadKeyFile(path)
		if err != nil {
			if msg := err.Error(); !errors.Is(err, ErrKeyFile) || !strings.Contains(msg, path) || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
			return
		}
		if len(k) != 32 {
			t.Fatalf("key of %d bytes", len(k))
		}
		if len(data) == 32 {
			if !bytes.Equal(k, data) {
				t.Fatal("32-byte file read as another key")
			}
			return
		}
		if want, herr := hex.DecodeString(strings.TrimSpace(string(data))); herr != nil || !bytes.Equal(k, want) {
			t.Fatalf("%q read as key %x", data, k)
		}
	})
}
