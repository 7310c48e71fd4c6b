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
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--token-file is required"},
		{[]string{"--token-file", good, "--no-auth"}, "exclude each other"},
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
