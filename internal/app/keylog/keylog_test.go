package keylog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/bridge/seal"
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
