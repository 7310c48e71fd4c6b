package managerd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/privtest"
)

// refusedBefore runs the daemon with o and wants a usage error exactly
// want. Run is in a goroutine: a regression that blocks (a FIFO read) or
// serves ends in this select, after 10s, not in a hung test binary.
func refusedBefore(t *testing.T, o Options, want string) {
	t.Helper()
	o.Listen, o.EtcdPrefix, o.LeaseTTL, o.MaxConns = "127.0.0.1:0", "/dxpu/", 3, 16
	if o.Store == "" {
		o.Store = filepath.Join(t.TempDir(), "m.db")
	}
	o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	select {
	case err := <-done:
		if !errors.Is(err, apperr.ErrUsage) || err.Error() != want {
			t.Errorf("%+v: %v, want the usage error %q", o, err, want)
		}
	case <-time.After(15 * time.Second):
		t.Errorf("%+v: still running after 15s, want the usage error %q", o, want)
	}
}

// TestTLSKeysThroughSecretfile: --tls-key and --etcd-key are read as the
// token files are: a key group or others can read, a FIFO (at once) or a
// directory is refused in one line naming the flag, the file and what is
// wrong. tls.LoadX509KeyPair took a 0644 key and served with it.
func TestTLSKeysThroughSecretfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := selfSigned(t, dir)
	body, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose.pem")
	if err := os.WriteFile(loose, body, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pem")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	mode := ": mode 0644 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)"
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{NoAuth: true, TLSCert: cert, TLSKey: loose}, "--tls-key " + loose + mode},
		{Options{NoAuth: true, TLSCert: cert, TLSKey: fifo}, "--tls-key " + fifo + ": not a regular file (a FIFO)"},
		{Options{NoAuth: true, TLSCert: cert, TLSKey: dir}, "--tls-key " + dir + ": not a regular file (a directory)"},
		{Options{NoAuth: true, Etcd: "http://127.0.0.1:1", EtcdCert: cert, EtcdKey: loose}, "--etcd-key " + loose + mode},
		{Options{NoAuth: true, TLSCert: filepath.Join(dir, "none.pem"), TLSKey: key}, "--tls-cert " + filepath.Join(dir, "none.pem") + ": no such file or directory"},
	} {
		refusedBefore(t, c.o, c.want)
	}
}

// TestTLSKeyOfAnotherUser: a 0600 --tls-key or --etcd-key another user
// owns is refused: its content is theirs to choose, or to read after a
// chmod.
func TestTLSKeyOfAnotherUser(t *testing.T) {
	privtest.Root(t)
	t.Parallel()
	cert, key, _ := selfSigned(t, t.TempDir())
	if err := os.Chown(key, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	theirs := ": owned by uid 1001, not by this process (uid 0)"
	refusedBefore(t, Options{NoAuth: true, TLSCert: cert, TLSKey: key}, "--tls-key "+key+theirs)
	refusedBefore(t, Options{NoAuth: true, Etcd: "http://127.0.0.1:1", EtcdCert: cert, EtcdKey: key}, "--etcd-key "+key+theirs)
}
