package secretfile

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/waitfor"
)

type reloaded struct {
	serial int64
	err    error
}

func reloadAsync(k *KeyPair) chan reloaded {
	ch := make(chan reloaded, 1)
	go func() {
		leaf, err := k.Reload()
		r := reloaded{serial: -1, err: err}
		if leaf != nil {
			r.serial = leaf.SerialNumber.Int64()
		}
		ch <- r
	}()
	return ch
}

// waitingForReload reports whether a goroutine waits for the lock of
// KeyPair.Reload.
func waitingForReload() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte("sync.(*Mutex).Lock")) && bytes.Contains(g, []byte("secretfile.(*KeyPair).Reload(")) {
			return true
		}
	}
	return false
}

// TestKeyPairReloadsInOrder: a Reload that started while another still
// reads the files (a slow disk: here a FIFO the test feeds) waits for it,
// so the pair read last is the one in use, never the older read stored
// after it.
func TestKeyPairReloadsInOrder(t *testing.T) {
	live, next := t.TempDir(), t.TempDir()
	cert, key, _ := keyPairSerial(t, live, 1)
	k, err := LoadKeyPair("--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	oldPEM, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	newCert, newKey, _ := keyPairSerial(t, next, 2)

	// The first Reload reads the key, then blocks reading the certificate.
	if err := os.Remove(cert); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(cert, 0o600); err != nil {
		t.Fatal(err)
	}
	first := reloadAsync(k)
	var fifo *os.File
	waitfor.Until(t, "the first Reload opening the certificate", func() bool {
		f, err := os.OpenFile(cert, os.O_WRONLY|unix.O_NONBLOCK, 0) // ENXIO until a reader opened it
		fifo = f
		return err == nil
	})
	defer fifo.Close()

	// Meanwhile the pair is rotated and reloaded again.
	for from, to := range map[string]string{newKey: key, newCert: cert} {
		if err := os.Rename(from, to); err != nil {
			t.Fatal(err)
		}
	}
	second := reloadAsync(k)
	var early *reloaded
	waitfor.Until(t, "the second Reload waiting for the first, or done", func() bool {
		select {
		case r := <-second:
			early = &r
			return true
		default:
		}
		return waitingForReload()
	})
	if _, err := fifo.Write(oldPEM); err != nil {
		t.Fatal(err)
	}
	fifo.Close()
	r1 := <-first
	r2 := reloaded{}
	if early != nil {
		r2 = *early
	} else {
		r2 = <-second
	}
	if r1.err != nil || r1.serial != 1 || r2.err != nil || r2.serial != 2 {
		t.Fatalf("reloads: first %d, %v; second %d, %v; want serials 1 and 2", r1.serial, r1.err, r2.serial, r2.err)
	}
	if s := serialOf(k.Certificate()); s != 2 {
		t.Fatalf("after both reloads the pair in use has serial %d, want 2: the older read replaced the newer one", s)
	}
}

// TestKeyPairReloadParsesLeaf: with GODEBUG x509keypairleaf=0
// X509KeyPair leaves Leaf nil; Reload parses it, as its callers read it.
func TestKeyPairReloadParsesLeaf(t *testing.T) {
	t.Setenv("GODEBUG", "x509keypairleaf=0")
	dir := t.TempDir()
	cert, key, _ := keyPairSerial(t, dir, 7)
	k, err := LoadKeyPair("--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	if s := serialOf(k.Certificate()); s != 7 {
		t.Fatalf("with x509keypairleaf=0: serial %d (-1: no Leaf), want 7", s)
	}
	keyPairSerial(t, dir, 8)
	if err := k.ReloadAndLog(slog.New(slog.DiscardHandler), "SIGHUP"); err != nil || serialOf(k.Certificate()) != 8 {
		t.Fatalf("ReloadAndLog with x509keypairleaf=0: %v, serial %d; want 8", err, serialOf(k.Certificate()))
	}
}

// TestKeyPairReloadLogsExpiry: the reload's line gives the new
// certificate's expiry, in UTC.
func TestKeyPairReloadLogsExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := keyPairSerial(t, dir, 1)
	k, err := LoadKeyPair("--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	keyPairSerial(t, filepath.Dir(cert), 2)
	var buf bytes.Buffer
	if err := k.ReloadAndLog(slog.New(slog.NewTextHandler(&buf, nil)), "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	want := "not_after=" + k.Certificate().Leaf.NotAfter.UTC().Format(time.RFC3339)
	if !strings.Contains(buf.String(), want) || !strings.HasSuffix(want, "Z") {
		t.Fatalf("logged %q, want %q in it", buf.String(), want)
	}
}
