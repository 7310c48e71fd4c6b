package manager_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/dxpu/dxpu/fabric/manager"
)

// FuzzLoadTokenFile reads an arbitrary token file (mode 0600, so only its
// content is at stake). Invariants: a refusal is one non-empty line that
// names the file; an accepted token is the file's content without its
// surrounding white space, and is one word: no white space inside.
func FuzzLoadTokenFile(f *testing.F) {
	f.Add([]byte("3f1c0e4b9a7d2c6e8f01a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7\n"))
	f.Add([]byte("  tok \r\n"))
	f.Add([]byte("two words\n"))
	f.Add([]byte(""))
	f.Add([]byte(strings.Repeat("a", 4096)))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "admin.token")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		tok, err := manager.LoadTokenFile(path)
		if err != nil {
			if msg := err.Error(); !strings.Contains(msg, path) || strings.ContainsAny(msg, "\r\n") {
				t.Fatalf("refusal %q", msg)
			}
			return
		}
		if tok == "" || tok != strings.TrimSpace(string(data)) {
			t.Fatalf("%q read as token %q", data, tok)
		}
		if i := strings.IndexFunc(tok, unicode.IsSpace); i >= 0 {
			t.Fatalf("token %q accepted as one word, with white space %q at %d", tok, tok[i:i+1], i)
		}
		for i := 0; i < len(tok); i++ {
			if tok[i] < '!' || tok[i] > '~' {
				t.Fatalf("token %q accepted with byte %#02x at %d, which no HTTP header carries", tok, tok[i], i)
			}
		}
	})
}
