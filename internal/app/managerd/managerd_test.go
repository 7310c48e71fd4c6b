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

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/privtest"
)

// run runs the daemon with o over the defaults the flags have, under a
// deadline (a refusal that regresses serves until it, and the test fails).
func run(t *testing.T, o Options) error {
	t.Helper()
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	return runWithin(t, o, 30*time.Second)
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
		{Options{TokenFile: good, MaxConnsPerCredential: -1}, "--max-conns-per-credential"},
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

// TestInitTokenRefusesPlantedToken: findings F5 and F6 of the attack
// trial. Another user's 0600 file at --token-file in a sticky shared
// directory (their token) is refused with --init-token, not adopted; a
// FIFO at --token-file or --read-token-file is refused at once (it blocked
// the manager, deaf to SIGTERM).
func TestInitTokenRefusesPlantedToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("t0k\n"), 0o600)
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		o    Options
		want string
	}{
		{Options{TokenFile: fifo, InitToken: true}, "--token-file " + fifo + ": not a regular file (a FIFO)"},
		{Options{TokenFile: good, ReadTokenFile: fifo}, "--read-token-file " + fifo + ": not a regular file (a FIFO)"},
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(dir, "theirs")
		os.WriteFile(theirs, []byte("attackerchosentoken\n"), 0o600)
		if err := os.Chown(theirs, 1001, 1001); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct {
			o    Options
			want string
		}{Options{TokenFile: theirs, InitToken: true}, "--token-file " + theirs + ": owned by uid 1001, not by this process (uid 0)"})
	}
	for _, tc := range cases {
		refusedBefore(t, tc.o, tc.want)
	}
	privtest.Root(t) // the owner case ran above only as root
}

// runBounded runs the daemon with o exactly as given (Listen, Log and the
// store excepted) and fails the test if it is still serving after 10s.
func runBounded(t *testing.T, o Options) error {
	t.Helper()
	return runWithin(t, o, 10*time.Second)
}

// runWithin runs the daemon with o on a free loopback port, a store in a
// temporary directory unless o names one, no log, and fails the test if it
// is still serving after d.
func runWithin(t *testing.T, o Options, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	o.Listen, o.EtcdPrefix, o.LeaseTTL = "127.0.0.1:0", "/dxpu/", 3
	if o.Store == "" {
		o.Store = filepath.Join(t.TempDir(), "m.db")
	}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	err := Run(ctx, o)
	if ctx.Err() != nil {
		t.Fatalf("%+v: still serving at the deadline", o)
	}
	return err
}

// TestRefusalsOfLimitsAndTLSKey: --max-conns 0, a negative
// --unreachable-after and --tls-key without --tls-cert are usage errors.
func TestRefusalsOfLimitsAndTLSKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "tok")
	os.WriteFile(good, []byte("t0k\n"), 0o600)
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{TokenFile: good, MaxConns: 0}, "--max-conns"},
		{Options{TokenFile: good, MaxConns: 16, UnreachableAfter: -time.Second}, "--unreachable-after"},
		{Options{TokenFile: good, MaxConns: 16, TLSKey: good}, "go together"},
	} {
		if err := runBounded(t, tc.o); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error mentioning %q", tc.o, err, tc.want)
		}
	}
}

// TestInitTokenKeepsFileAndGoesOn: --init-token with a token file already
// there keeps it and carries on (here to the store, which fails).
func TestInitTokenKeepsFileAndGoesOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	if _, err := manager.CreateTokenFile(tok); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(tok)
	err := runBounded(t, Options{InitToken: true, TokenFile: tok, MaxConns: 16, Store: filepath.Join(dir, "nodir", "x.db")})
	if err == nil || !strings.Contains(err.Error(), "x.db") {
		t.Fatalf("--init-token over an existing token file: %v, want the store's error", err)
	}
	if after, _ := os.ReadFile(tok); string(after) != string(before) {
		t.Fatal("--init-token replaced an existing token")
	}
}

// TestDamagedStoreIsFailed: a store file that is not bbolt is a failed run
// (exit 1), not a usage error.
func TestDamagedStoreIsFailed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.WriteFile(tok, []byte("t0k\n"), 0o600)
	db := filepath.Join(dir, "m.db")
	if err := os.WriteFile(db, []byte(strings.Repeat("not a bbolt file ", 2048)), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runBounded(t, Options{TokenFile: tok, MaxConns: 16, Store: db})
	if !errors.Is(err, apperr.ErrFailed) || errors.Is(err, apperr.ErrUsage) {
		t.Fatalf("damaged store: %v (failed %v, usage %v), want a failed run", err, errors.Is(err, apperr.ErrFailed), errors.Is(err, apperr.ErrUsage))
	}
}

// TestInitTokenCreatesAndServesWithIt: --init-token where no file is
// makes one and the daemon then requires that token: a call without it is
// refused, one with it served.
func TestInitTokenCreatesAndServesWithIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "admin.tok")
	lw := &serveLog{urls: make(chan string, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{InitToken: true, TokenFile: tokFile, Store: filepath.Join(dir, "m.db"), Listen: "127.0.0.1:0",
			EtcdPrefix: "/dxpu/", LeaseTTL: 3, MaxConns: 16, ReconcileInterval: 30 * time.Second, Log: slog.New(slog.NewJSONHandler(lw, nil))})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var base string
	select {
	case base = <-lw.urls:
	case err := <-done:
		done <- err
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not serve within 30s")
	}
	tok, err := manager.LoadTokenFile(tokFile)
	if err != nil {
		t.Fatalf("the token file --init-token made: %v", err)
	}
	if _, err := ctlclient.New(base, "").Stats(t.Context()); err == nil {
		t.Fatal("stats without a token served: the created token is not required")
	}
	if _, err := ctlclient.New(base, tok).Stats(t.Context()); err != nil {
		t.Fatalf("stats with the created token: %v", err)
	}
}
