package secretfile

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/internal/testcert"
)

// twoCAs writes CA A and CA B (serials 0xA, 0xB), each in its own
// directory, and a server pair for 127.0.0.1 and right.example that B
// signs.
func twoCAs(t *testing.T) (a, b, server testcert.Pair) {
	t.Helper()
	a = testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xA, CommonName: "CA A", CA: true})
	b = testcert.Write(t, t.TempDir(), testcert.Options{Serial: 0xB, CommonName: "CA B", CA: true})
	server = testcert.Write(t, t.TempDir(), testcert.Options{Serial: 7, CommonName: "server", Issuer: &b,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNS: []string{"right.example"}})
	return a, b, server
}

// tlsServer serves https with pair on loopback: every request is 200.
func tlsServer(t *testing.T, pair testcert.Pair) *httptest.Server {
	t.Helper()
	c, err := tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{c}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refusals are the tests'
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// get is a GET of url through rt.
func get(rt http.RoundTripper, url string) error {
	resp, err := (&http.Client{Transport: rt, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// TestCAPoolReload: a pool of CA A refuses a server B signs; after the
// file holds A and B, Reload counts 2 and a new request is accepted. A
// file that does not load (gone, not PEM, a PEM key, a directory, a FIFO)
// is an error naming the flag and the file, the pool before stays, and
// the FIFO does not hang the reload.
func TestCAPoolReload(t *testing.T) {
	t.Parallel()
	a, b, server := twoCAs(t)
	srv := tlsServer(t, server)
	file := filepath.Join(t.TempDir(), "ca.pem")
	write(t, file, string(a.PEM()), 0o644)
	p, err := LoadCAPool("--agent-ca-file", file)
	if err != nil || p.Len() != 1 {
		t.Fatalf("LoadCAPool: %v, %v; want 1 certificate", p, err)
	}
	rt := p.Transport(http.DefaultTransport.(*http.Transport))
	var uae x509.UnknownAuthorityError
	if err := get(rt, srv.URL); !errors.As(err, &uae) {
		t.Fatalf("GET from a server CA B signs, trusting A: %v, want x509.UnknownAuthorityError", err)
	}
	write(t, file, string(a.PEM())+"junk between\n"+string(b.PEM()), 0o644)
	if n, err := p.Reload(); n != 2 || err != nil {
		t.Fatalf("Reload of A and B: %d, %v; want 2", n, err)
	}
	if err := get(rt, srv.URL); err != nil {
		t.Fatalf("GET after the reload of A and B: %v", err)
	}

	dir := filepath.Join(t.TempDir(), "a-dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(b.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path, content string // content "": leave path as it is
		want                string
		is                  error
	}{
		{"gone", filepath.Join(t.TempDir(), "missing.pem"), "", "no such file or directory", fs.ErrNotExist},
		{"garbage", file, "garbage\n", "holds no PEM certificate", nil},
		{"a key", file, string(keyPEM), "holds no PEM certificate", nil},
		{"a directory", dir, "", "not a regular file (a directory)", ErrNotRegular},
		{"a FIFO", fifo, "", "not a regular file (a FIFO)", ErrNotRegular},
	} {
		if c.content != "" {
			write(t, c.path, c.content, 0o644)
		}
		q := &CAPool{flag: "--agent-ca-file", file: c.path}
		q.cur.Store(p.cur.Load())
		n, err := q.Reload()
		if want := "--agent-ca-file " + c.path + ": " + c.want; err == nil || err.Error() != want || n != 0 {
			t.Errorf("%s: Reload = %d, %v; want %q", c.name, n, err, want)
		} else if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v does not wrap %v", c.name, err, c.is)
		}
		if q.Len() != 2 || q.Pool() != p.Pool() {
			t.Errorf("%s: the pool changed after a failed reload (%d certificates)", c.name, q.Len())
		}
		if _, err := LoadCAPool("--agent-ca-file", c.path); err == nil {
			t.Errorf("%s: LoadCAPool: no error", c.name)
		}
	}
	if _, err := p.Reload(); err == nil { // file holds the key now
		t.Fatal("Reload of a key: no error")
	}
	if err := get(rt, srv.URL); err != nil || p.Len() != 2 {
		t.Fatalf("GET after a failed reload: %v (%d certificates); want A and B still trusted", err, p.Len())
	}
}

// TestCAPoolReloadAndLog: one line per reload: the flag, the file and the
// number of certificates, or the error.
func TestCAPoolReloadAndLog(t *testing.T) {
	t.Parallel()
	a, b, _ := twoCAs(t)
	file := filepath.Join(t.TempDir(), "ca.pem")
	write(t, file, string(a.PEM()), 0o644)
	p, err := LoadCAPool("--manager-ca-file", file)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, nil))
	write(t, file, string(a.PEM())+string(b.PEM()), 0o644)
	if err := p.ReloadAndLog(lg, "SIGHUP"); err != nil {
		t.Fatal(err)
	}
	want := `level=INFO msg="SIGHUP: CA file reloaded" flag=--manager-ca-file file=` + file + " certificates=2\n"
	if !strings.HasSuffix(buf.String(), want) || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("logged %q, want one line ending %q", buf.String(), want)
	}
	buf.Reset()
	write(t, file, "garbage", 0o644)
	if err := p.ReloadAndLog(lg, "SIGHUP"); err == nil {
		t.Error("ReloadAndLog of garbage: no error")
	}
	want = `level=ERROR msg="SIGHUP: CA file not reloaded; the previous CAs stay in use" err="--manager-ca-file ` + file + `: holds no PEM certificate"` + "\n"
	if !strings.HasSuffix(buf.String(), want) || strings.Count(buf.String(), "\n") != 1 {
		t.Errorf("failed reload logged %q, want one line ending %q", buf.String(), want)
	}
	if p.Len() != 2 {
		t.Errorf("%d certificates after a failed reload, want 2", p.Len())
	}
}

// TestCAPoolTransportChecksName: the Transport's requests are verified by
// crypto/tls against the pool: a server certificate for another name is
// refused.
func TestCAPoolTransportChecksName(t *testing.T) {
	t.Parallel()
	_, b, server := twoCAs(t)
	srv := tlsServer(t, server)
	file := filepath.Join(t.TempDir(), "ca.pem")
	write(t, file, string(b.PEM()), 0o644)
	p, err := LoadCAPool("--manager-ca-file", file)
	if err != nil {
		t.Fatal(err)
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = &tls.Config{ServerName: "wrong.example"}
	var he x509.HostnameError
	if err := get(p.Transport(base), srv.URL); !errors.As(err, &he) {
		t.Errorf("GET from a server whose certificate is not for wrong.example: %v, want x509.HostnameError", err)
	}
	if base.TLSClientConfig.RootCAs != nil {
		t.Error("Transport changed its base's TLS configuration")
	}
}

// TestCAPoolReloadWhileVerifying: handshakes and requests running while
// the pool is reloaded each see a whole pool, the old or the new (run
// with -race): both hold B, so every one succeeds.
func TestCAPoolReloadWhileVerifying(t *testing.T) {
	t.Parallel()
	a, b, server := twoCAs(t)
	srv := tlsServer(t, server)
	file := filepath.Join(t.TempDir(), "ca.pem")
	write(t, file, string(b.PEM()), 0o644)
	p, err := LoadCAPool("--etcd-ca-file", file)
	if err != nil {
		t.Fatal(err)
	}
	rt := p.Transport(http.DefaultTransport.(*http.Transport))
	done := make(chan struct{})
	reloaded := make(chan int)
	go func() {
		n := 0
		for i := 0; ; i++ {
			select {
			case <-done:
				reloaded <- n
				return
			default:
			}
			content := string(b.PEM())
			if i%2 == 0 {
				content = string(a.PEM()) + content
			}
			if err := os.WriteFile(file+".new", []byte(content), 0o644); err != nil {
				t.Error(err)
			}
			if err := os.Rename(file+".new", file); err != nil {
				t.Error(err)
			}
			if _, err := p.Reload(); err != nil {
				t.Error(err)
			}
			n++
		}
	}()
	for range 20 {
		conn, err := tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{ServerName: "right.example", RootCAs: p.Pool()})
		if err != nil {
			t.Errorf("handshake during reloads: %v", err)
		} else {
			conn.Close()
		}
		if err := get(rt, srv.URL); err != nil {
			t.Errorf("GET during reloads: %v", err)
		}
	}
	close(done)
	if n := <-reloaded; n == 0 {
		t.Error("no reload ran during the handshakes")
	}
}
