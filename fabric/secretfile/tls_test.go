package secretfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/testcert"
)

// keyPair writes a self-signed certificate and its private key, both mode
// 0600, to dir and returns their paths and the certificate's DER.
func keyPair(t *testing.T, dir string) (certFile, keyFile string, der []byte) {
	t.Helper()
	return keyPairSerial(t, dir, 1)
}

// keyPairSerial is keyPair with the certificate's serial: a new pair over
// the files of the last one in dir.
func keyPairSerial(t *testing.T, dir string, serial int64) (certFile, keyFile string, der []byte) {
	t.Helper()
	p := testcert.Write(t, dir, testcert.Options{Serial: serial, CommonName: "secretfile test"})
	return p.CertFile, p.KeyFile, p.Cert.Raw
}

// TestLoadX509KeyPairAccepts: a 0600 or 0400 key of this user, given or
// through a link, loads with its certificate; the certificate may be
// world-readable (it is public).
func TestLoadX509KeyPairAccepts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, der := keyPair(t, dir)
	if err := os.Chmod(cert, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "key-link.pem")
	if err := os.Symlink(key, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		mode os.FileMode
	}{{key, 0o600}, {key, 0o400}, {link, 0o600}} {
		if err := os.Chmod(key, c.mode); err != nil {
			t.Fatal(err)
		}
		tc, err := LoadX509KeyPair("--tls-cert", cert, "--tls-key", c.key)
		if err != nil || len(tc.Certificate) != 1 || string(tc.Certificate[0]) != string(der) || tc.PrivateKey == nil {
			t.Errorf("key %s mode %#o: %v, want the pair loaded", c.key, c.mode, err)
		}
	}
}

// TestLoadX509KeyPairRefuses: a key that group or others can access, a
// FIFO (at once, not hanging) or a directory at the key's path is refused
// in one line naming the key's flag and path, as every secret file
// (tls.LoadX509KeyPair read the first two and hung on the FIFO).
func TestLoadX509KeyPairRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := keyPair(t, dir)
	body, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(dir, "loose.pem")
	write(t, loose, string(body), 0o644)
	group := filepath.Join(dir, "group.pem")
	write(t, group, string(body), 0o640)
	fifo := filepath.Join(dir, "fifo.pem")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	kdir := filepath.Join(dir, "kdir")
	if err := os.Mkdir(kdir, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path   string
		reason error
		what   string
	}{
		{loose, ErrMode, "mode 0644 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)"},
		{group, ErrMode, "mode 0640 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)"},
		{fifo, ErrNotRegular, "not a regular file (a FIFO)"},
		{kdir, ErrNotRegular, "not a regular file (a directory)"},
	}
	for _, c := range cases {
		err := within(t, func() error { _, err := LoadX509KeyPair("--agent-cert", cert, "--agent-key", c.path); return err })
		refused(t, filepath.Base(c.path), err, c.reason, "--agent-key "+c.path+": "+c.what)
	}
}

// TestLoadX509KeyPairOtherOwner: another user's 0600 key is refused (a
// key they chose, or can chmod and read), whatever its mode.
func TestLoadX509KeyPairOtherOwner(t *testing.T) {
	privtest.Root(t)
	t.Parallel()
	cert, key, _ := keyPair(t, t.TempDir())
	if err := os.Chown(key, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	_, err := LoadX509KeyPair("--tls-cert", cert, "--tls-key", key)
	refused(t, "another user's key", err, ErrOwner, "--tls-key "+key+": owned by uid 1001, not by this process (uid 0)")
}

// TestLoadX509KeyPairErrors: a missing certificate or key, a certificate
// that is not the key's and a key file over the bound are one line each,
// naming the flag and path at fault.
func TestLoadX509KeyPairErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := keyPair(t, dir)
	other := t.TempDir()
	cert2, _, _ := keyPair(t, other)
	missing := filepath.Join(dir, "missing.pem")
	huge := filepath.Join(dir, "big.pem")
	write(t, huge, strings.Repeat("x", maxKeyFile+1), 0o600)

	_, err := LoadX509KeyPair("--tls-cert", missing, "--tls-key", key)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "--tls-cert "+missing+": no such file or directory" {
		t.Errorf("missing certificate: %v", err)
	}
	_, err = LoadX509KeyPair("--tls-cert", cert, "--tls-key", missing)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "--tls-key "+missing+": no such file or directory" {
		t.Errorf("missing key: %v", err)
	}
	_, err = LoadX509KeyPair("--etcd-cert", cert2, "--etcd-key", key)
	if err == nil || !strings.HasPrefix(err.Error(), "--etcd-cert "+cert2+", --etcd-key "+key+": tls: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("certificate of another key: %v, want one line naming both", err)
	}
	_, err = LoadX509KeyPair("--tls-cert", cert, "--tls-key", huge)
	if err == nil || !strings.HasPrefix(err.Error(), "--tls-key "+huge+": larger than ") {
		t.Errorf("key file over the bound: %v", err)
	}
}
