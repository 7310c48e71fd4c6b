package managerd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/apperr"
)

// run runs the daemon with o over the defaults the flags have, under a
// deadline (a refusal that regresses serves until it, and the test fails).
func run(t *testing.T, o Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.Listen, o.EtcdPrefix, o.LeaseTTL = "127.0.0.1:0", "/dxpu/", 3
	if o.Store == "" {
		o.Store = filepath.Join(t.TempDir(), "m.db")
	}
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	err := Run(ctx, o)
	if ctx.Err() != nil {
		t.Fatalf("%+v: still serving at the deadline", o)
	}
	return err
}

// TestRefusals checks the refusals that happen before the daemon serves:
// no token source, both sources, an empty token file.
func TestRefusals(t *testing.T) {
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
		o    Options
		want string
	}{
		{Options{}, "--token-file is required"},
		{Options{TokenFile: good, NoAuth: true}, "exclude each other"},
		{Options{TokenFile: loose}, "0644"},
		{Options{TokenFile: good, ReadTokenFile: loose}, "0644"},
		{Options{InitToken: true}, "--init-token needs --token-file"},
		{Options{TokenFile: good, MaxConns: -1}, "--max-conns"},
		{Options{TokenFile: good, MaxAnonConnsPerClient: -1}, "--max-anon-conns-per-client"},
		{Options{TokenFile: good, DegradedAfter: -time.Second}, "--degraded-after"},
		{Options{TokenFile: empty}, "is empty"},
		{Options{TokenFile: filepath.Join(dir, "missing")}, "no such file"},
		{Options{TokenFile: good, Store: filepath.Join(dir, "nodir", "x.db")}, "x.db"},
		{Options{TokenFile: good, TLSCert: good}, "go together"},
		{Options{TokenFile: good, TLSCert: good, TLSKey: good}, "tls"},
		{Options{TokenFile: good, Etcd: "http://127.0.0.1:1", EtcdCAFile: good}, "no PEM"},
	} {
		if err := run(t, tc.o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error mentioning %q", tc.o, err, tc.want)
		}
	}
}

// TestInitToken: InitToken makes a 0600 token file that the manager then
// accepts; an existing file is kept as it is.
func TestInitToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	// The store path is unusable, so the daemon stops right after the token
	// step; what matters is the file it left.
	o := Options{InitToken: true, TokenFile: tok, Store: filepath.Join(dir, "nodir", "x.db")}
	if err := run(t, o); err == nil || !strings.Contains(err.Error(), "x.db") {
		t.Fatalf("manager: %v, want the store error after the token was made", err)
	}
	fi, err := os.Stat(tok)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() < 64 {
		t.Fatalf("token file: %v %v", fi, err)
	}
	before, _ := os.ReadFile(tok)
	run(t, o)
	if after, _ := os.ReadFile(tok); string(after) != string(before) {
		t.Fatal("--init-token replaced an existing token")
	}
}
