package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/oneline"
)

// TestRefusalOfAStrangeNameIsOneLine: a file name may hold a newline or
// an escape; the refusal stays one line and shows the name quoted.
func TestRefusalOfAStrangeNameIsOneLine(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a\nb", "k\r", "\x1b[2Jx", "caf\xe9"} {
		path := filepath.Join(dir, name)
		_, err := Open("--key-file", path)
		if err == nil {
			t.Fatalf("%q opened", path)
		}
		msg := err.Error()
		if strings.ContainsAny(msg, "\r\n\x1b") || !strings.Contains(msg, oneline.Name(path)) || !strings.HasPrefix(msg, "--key-file \"") {
			t.Errorf("refusal of %q: %q", path, msg)
		}
	}
	// A name that prints is said as given, unquoted.
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("--key-file", plain); err == nil || !strings.HasPrefix(err.Error(), "--key-file "+plain+": ") {
		t.Errorf("refusal of %s: %v", plain, err)
	}
	if oneline.Name("") != `""` {
		t.Errorf("empty path shown as %q", oneline.Name(""))
	}
}
