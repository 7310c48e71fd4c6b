package secretfile

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// serialOf is the serial of c's leaf, -1 for none.
func serialOf(c *tls.Certificate) int64 {
	if c == nil || c.Leaf == nil {
		return -1
	}
	return c.Leaf.SerialNumber.Int64()
}

// TestKeyPairReload: Reload replaces the pair GetCertificate and
// GetClientCertificate hand out; one that fails (a certificate not PEM, a
// key others can read, a file gone) is an error naming the flag and the
// file, and the pair before stays.
func TestKeyPairReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := keyPairSerial(t, dir, 1)
	k, err := LoadKeyPair("--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	if s := serialOf(k.Certificate()); s != 1 {
		t.Fatalf("loaded serial %d, want 1", s)
	}
	keyPairSerial(t, dir, 2)
	leaf, err := k.Reload()
	if err != nil || leaf.SerialNumber.Int64() != 2 {
		t.Fatalf("Reload: %v, %v; want serial 2", leaf, err)
	}
	sc, _ := k.GetCertificate(nil)
	cc, _ := k.GetClientCertificate(nil)
	if serialOf(sc) != 2 || serialOf(cc) != 2 {
		t.Fatalf("after Reload: GetCertificate serial %d, GetClientCertificate %d; want 2", serialOf(sc), serialOf(cc))
	}

	certPEM, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	write(t, cert, "garbage", 0o600)
	if _, err := k.Reload(); err == nil || err.Error() != "--tls-cert "+cert+", --tls-key "+key+": tls: failed to find any PEM data in certificate input" {
		t.Errorf("Reload of a garbage certificate: %v", err)
	}
	write(t, cert, string(certPEM), 0o600)
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Reload(); !errors.Is(err, ErrMode) || !strings.HasPrefix(err.Error(), "--tls-key "+key+": mode 0644") {
		t.Errorf("Reload of a 0644 key: %v", err)
	}
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Reload(); !errors.Is(err, fs.ErrNotExist) || err.Error() != "--tls-key "+key+": no such file or directory" {
		t.Errorf("Reload of a key gone: %v", err)
	}
	if s := serialOf(k.Certificate()); s != 2 {
		t.Errorf("after failed reloads: serial %d, want 2 (the pair before)", s)
	}
	if _, err := LoadKeyPair("--tls-cert", cert, "--tls-key", key); err == nil {
		t.Error("LoadKeyPair of a key gone: no error")
	}
}

// TestKeyPairReloadAndLog: one line per reload, the new certificate's
// flag, file, subject, serial (hex) and expiry on success, the error on
// failure.
func TestKeyPairReloadAndLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := keyPairSerial(t, dir, 1)
	k, err := LoadKeyPair("--agent-cert", cert, "--agent-key", key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	keyPairSerial(t, dir, 0xAB)
	if err := k.ReloadAndLog(log, "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	line := buf.String()
	for _, w := range []string{`level=INFO msg="SIGHUP: TLS certificate reloaded" flag=--agent-cert file=` + cert,
		`subject="CN=secretfile test" serial=AB not_after=`} {
		if !strings.Contains(line, w) {
			t.Errorf("logged %q, want %q in it", line, w)
		}
	}
	buf.Reset()
	if err := os.Chmod(key, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := k.ReloadAndLog(log, "SIGHUP"); !errors.Is(err, ErrMode) {
		t.Errorf("ReloadAndLog of a 0640 key: %v", err)
	}
	want := `level=ERROR msg="SIGHUP: TLS certificate not reloaded; the previous one stays in use" err="--agent-key ` + key + `: mode 0640`
	if lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"); len(lines) != 1 || !strings.Contains(lines[0], want) {
		t.Errorf("failed reload logged %q, want one line holding %q", buf.String(), want)
	}
	if s := serialOf(k.Certificate()); s != 0xAB {
		t.Errorf("serial %d after a failed reload, want %d", s, 0xAB)
	}
}

// TestKeyPairReloadWhileServing: handshakes running while pairs are
// reloaded each get a whole pair, the old or the new (run with -race).
func TestKeyPairReloadWhileServing(t *testing.T) {
	t.Parallel()
	pairs := []string{t.TempDir(), t.TempDir()} // serials 1 and 2
	keyPairSerial(t, pairs[0], 1)
	keyPairSerial(t, pairs[1], 2)
	live := t.TempDir()
	cert, key, _ := keyPairSerial(t, live, 1)
	k, err := LoadKeyPair("--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c, _ := k.GetCertificate(nil); serialOf(c) != 1 && serialOf(c) != 2 {
					t.Errorf("GetCertificate during reloads: serial %d", serialOf(c))
					return
				}
			}
		})
	}
	for i := range 50 {
		for _, f := range []string{"cert.pem", "key.pem"} {
			b, err := os.ReadFile(filepath.Join(pairs[(i+1)%2], f))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(live, f), string(b), 0o600)
		}
		if leaf, err := k.Reload(); err != nil || leaf.SerialNumber.Int64() != int64((i+1)%2+1) {
			t.Fatalf("reload %d: %v, %v; want serial %d", i, leaf, err, (i+1)%2+1)
		}
	}
	close(stop)
	wg.Wait()
}
