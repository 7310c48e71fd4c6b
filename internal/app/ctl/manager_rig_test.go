package ctl

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/dxpu/dxpu/fabric/manager"
)

// testManager serves a manager of cfg (Token "tok" unless set) until t
// ends, and returns Options that reach it with the token in a 0600 file,
// and a directory for the test's files.
func testManager(t *testing.T, cfg manager.Config) (Options, string) {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = "tok"
	}
	m, err := manager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte(cfg.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Options{Manager: srv.URL, TokenFile: tokFile}, dir
}
