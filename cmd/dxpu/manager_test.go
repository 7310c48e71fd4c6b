package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManagerFlags checks the refusals that happen before the daemon
// serves: no token source, both sources, an empty token file.
func TestManagerFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("  \n"), 0o600)
	good := filepath.Join(dir, "tok")
	os.WriteFile(good, []byte("t0k\n"), 0o600)
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, []byte("t0k\n"), 0o600)
	os.Chmod(loose, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--token-file is required"},
		{[]string{"--token-file", good, "--no-auth"}, "exclude each other"},
		{[]string{"--token-file", loose}, "0644"},
		{[]string{"--token-file", good, "--read-token-file", loose}, "0644"},
		{[]string{"--init-token"}, "--init-token needs --token-file"},
		{[]string{"--token-file", good, "--max-conns", "0"}, "--max-conns"},
		{[]string{"--token-file", empty}, "is empty"},
		{[]string{"--token-file", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"--token-file", good, "--store", filepath.Join(dir, "nodir", "x.db")}, "x.db"},
		{[]string{"--token-file", good, "--tls-cert", good}, "go together"},
		{[]string{"--token-file", good, "--tls-cert", good, "--tls-key", good}, "tls"},
		{[]string{"--token-file", good, "--etcd", "http://127.0.0.1:1", "--etcd-ca-file", good}, "no PEM"},
	} {
		_, _, err := runDxpu(t, "", append([]string{"manager", "--listen", "127.0.0.1:0"}, tc.args...)...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("manager %v: %v, want exit 2 mentioning %q", tc.args, err, tc.want)
		}
	}
}

// TestManagerInitToken: --init-token makes a 0600 token file that the
// manager then accepts; an existing file is kept as it is.
func TestManagerInitToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	// The store path is unusable, so the daemon stops right after the token
	// step; what matters is the file it left.
	_, _, err := runDxpu(t, "", "manager", "--listen", "127.0.0.1:0", "--init-token", "--token-file", tok, "--store", filepath.Join(dir, "nodir", "x.db"))
	if err == nil || !strings.Contains(err.Error(), "x.db") {
		t.Fatalf("manager: %v, want the store error after the token was made", err)
	}
	fi, err := os.Stat(tok)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() < 64 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	before, _ := os.ReadFile(tok)
	runDxpu(t, "", "manager", "--listen", "127.0.0.1:0", "--init-token", "--token-file", tok, "--store", filepath.Join(dir, "nodir", "x.db"))
	if after, _ := os.ReadFile(tok); string(after) != string(before) {
		t.Fatal("--init-token replaced an existing token")
	}
}
