package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestManagerFlags: the flags reach the daemon and its refusals exit with
// status 2 (internal/app/managerd tests each refusal).
func TestManagerFlags(t *testing.T) {
	t.Parallel()
	good := filepath.Join(t.TempDir(), "tok")
	os.WriteFile(good, []byte("t0k\n"), 0o600)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--token-file is required"},
		{[]string{"--token-file", good, "--max-conns", "0"}, "--max-conns"},
		{[]string{"--token-file", good, "--etcd", "http://127.0.0.1:1", "--etcd-ca-file", good}, "no PEM"},
	} {
		_, _, err := runDxpu(t, "", append([]string{"manager", "--listen", "127.0.0.1:0"}, tc.args...)...)
		var ec exitCodeError
		if !errors.As(err, &ec) || ec.code != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("manager %v: %v, want exit 2 mentioning %q", tc.args, err, tc.want)
		}
	}
}
