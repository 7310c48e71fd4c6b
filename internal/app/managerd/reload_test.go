package managerd

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/secretfile"
	"github.com/dxpu/dxpu/internal/app/childproc"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/testbin"
	"github.com/dxpu/dxpu/internal/testcert"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// mgrProc is `dxpu manager` run as a process, its stderr (the log) kept
// line by line.
type mgrProc struct {
	cmd    *exec.Cmd
	addr   string // the listen address, from "manager serving"
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
	err    error // cmd.Wait's, once exited is closed
}

var listenRE = regexp.MustCompile(`msg="manager serving" listen=(\S+)`)

// startManagerBinary runs `dxpu manager` with an admin token file, a store
// in a temporary directory, a free loopback port and args, every other
// flag at its default, and waits until it serves.
func startManagerBinary(t *testing.T, args ...string) (*mgrProc, string) {
	t.Helper()
	dir := t.TempDir()
	admin, err := manager.CreateTokenFile(filepath.Join(dir, "admin.tok"))
	if err != nil {
		t.Fatal(err)
	}
	p := &mgrProc{exited: make(chan struct{})}
	p.cmd = exec.Command(testbin.Dxpu(t), append([]string{"manager", "--token-file", filepath.Join(dir, "admin.tok"),
		"--store", filepath.Join(dir, "m.db"), "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := childproc.Start(p.cmd, nil); err != nil {
		t.Fatal(err)
	}
	addrs := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1]
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("manager stderr:\n%s", strings.Join(p.logLines(""), "\n"))
		}
	})
	select {
	case p.addr = <-addrs:
	case <-p.exited:
		t.Fatalf("the manager ended before serving: %v", p.err)
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not serve within 30s")
	}
	return p, admin
}

// logLines are the lines logged so far that hold part.
func (p *mgrProc) logLines(part string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var got []string
	for _, l := range p.lines {
		if strings.Contains(l, part) {
			got = append(got, l)
		}
	}
	return got
}

// hup sends SIGHUP and waits for the n-th line holding part, failing if
// the manager exits first.
func (p *mgrProc) hup(t *testing.T, n int, part string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, fmt.Sprintf("line %d holding %q after SIGHUP", n, part), func() bool {
		select {
		case <-p.exited:
			t.Fatalf("the manager exited after SIGHUP: %v", p.err)
		default:
		}
		return len(p.logLines(part)) >= n
	})
}

// healthz sends GET /healthz with the admin token on c, an open TLS
// connection, and reads the answer.
func healthz(c *tls.Conn, br *bufio.Reader, admin string) (int, error) {
	c.SetDeadline(time.Now().Add(waitfor.Stall))
	if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: manager\r\nAuthorization: Bearer %s\r\n\r\n", admin); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestManagerReloadsTLSOnHUP: `dxpu manager --tls-cert --tls-key` serves a
// pair written over its files after SIGHUP to new handshakes (a
// connection open before keeps going), logging its serial; a reload that
// fails (the key made 0644, then a certificate that is not PEM) keeps the
// pair served, the manager running, and is one line naming the file.
// Before, the files were read once and SIGHUP ended the process.
func TestManagerReloadsTLSOnHUP(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := selfSignedSerial(t, dir, 1)
	p, admin := startManagerBinary(t, "--tls-cert", cert, "--tls-key", key)
	if s, err := testcert.ServedSerial(p.addr); err != nil || s != 1 {
		t.Fatalf("first handshake: serial %d, %v; want 1", s, err)
	}
	// A connection of the first pair, credentialed (kept past the
	// anonymous idle timeout), used again after the rotation.
	kept, err := tls.Dial("tcp", p.addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close()
	br := bufio.NewReader(kept)
	if code, err := healthz(kept, br, admin); err != nil || code != http.StatusOK {
		t.Fatalf("GET /healthz: %d, %v", code, err)
	}

	selfSignedSerial(t, dir, 2)
	p.hup(t, 1, "SIGHUP: TLS certificate")
	waitfor.Until(t, "serial 2 served after SIGHUP", func() bool {
		s, err := testcert.ServedSerial(p.addr)
		return err == nil && s == 2
	})
	if got := p.logLines("SIGHUP: TLS certificate reloaded"); len(got) != 1 || !strings.Contains(got[0], "file="+cert) ||
		!strings.Contains(got[0], "serial=2 ") || !strings.Contains(got[0], `subject="CN=managerd test"`) || !strings.Contains(got[0], "not_after=") {
		t.Errorf("reload logged %q, want one line with the file, subject, serial 2 and not_after", got)
	}
	if code, err := healthz(kept, br, admin); err != nil || code != http.StatusOK {
		t.Errorf("GET /healthz on the connection opened before the reload: %d, %v; want 200", code, err)
	} else if s := kept.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); s != 1 {
		t.Errorf("the connection opened before the reload shows serial %d, want 1", s)
	}

	const failed = "SIGHUP: TLS certificate not reloaded"
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	p.hup(t, 1, failed)
	if s, err := testcert.ServedSerial(p.addr); err != nil || s != 2 {
		t.Errorf("after a reload of a 0644 key: serial %d, %v; want 2 still served", s, err)
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p.hup(t, 2, failed)
	if s, err := testcert.ServedSerial(p.addr); err != nil || s != 2 {
		t.Errorf("after a reload of a garbage certificate: serial %d, %v; want 2 still served", s, err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(waitfor.Stall):
		t.Fatalf("the manager did not exit %v after SIGTERM", waitfor.Stall)
	}
	if p.err != nil {
		t.Errorf("manager exit after SIGTERM: %v, want 0", p.err)
	}
	got := p.logLines(failed)
	want := []string{"--tls-key " + key + ": mode 0644 lets group or others read or write it",
		"--tls-cert " + cert + ", --tls-key " + key + ": tls: failed to find any PEM data in certificate input"}
	if len(got) != len(want) {
		t.Fatalf("failed reloads logged %d lines, want %d (one each):\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) || !strings.Contains(got[i], "level=ERROR") {
			t.Errorf("failed reload %d logged %q, want an error line holding %q", i+1, got[i], w)
		}
	}
}

// TestManagerSurvivesHUPWithoutTLS: without TLS files SIGHUP is logged and
// the manager keeps serving (SIGHUP's default action ended it).
func TestManagerSurvivesHUPWithoutTLS(t *testing.T) {
	p, _ := startManagerBinary(t)
	p.hup(t, 1, "SIGHUP: no TLS files to re-read")
	resp, err := (&http.Client{Timeout: waitfor.Stall}).Get("http://" + p.addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz after SIGHUP: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz after SIGHUP: %d", resp.StatusCode)
	}
}

// TestReloadOnHUP: reloadOnHUP re-reads every pair per signal: a pair that
// does not load (a file missing, not PEM, a key not the certificate's, a
// key others can read or another user owns) is one error line naming
// the file and why, and the pair before stays in use; a good one
// replaces it, in one line with its serial.
func TestReloadOnHUP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := selfSignedSerial(t, dir, 1)
	k, err := secretfile.LoadKeyPair("--tls-cert", cert, "--tls-key", key)
	if err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	otherCert, _, _ := selfSignedSerial(t, otherDir, 9)
	certPEM, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	var log syncbuf.Buffer
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		reloadOnHUP(ctx, hup, []*secretfile.KeyPair{k}, slog.New(slog.NewTextHandler(&log, nil)))
		close(done)
	}()
	defer func() { cancel(); <-done }()
	n := 0
	// signal sends one SIGHUP and returns the one line it logged.
	signal := func() string {
		t.Helper()
		hup <- syscall.SIGHUP
		n++
		waitfor.Until(t, fmt.Sprintf("log line %d", n), func() bool { return len(log.Lines()) >= n })
		return log.Lines()[n-1]
	}
	serial := func() int64 { return k.Certificate().Leaf.SerialNumber.Int64() }

	type step struct {
		name         string
		break_, mend func() error
		want         string
	}
	steps := []step{
		{"missing certificate", func() error { return os.Rename(cert, cert+".away") }, func() error { return os.Rename(cert+".away", cert) },
			"--tls-cert " + cert + ": no such file or directory"},
		{"garbage certificate", func() error { return os.WriteFile(cert, []byte("garbage"), 0o600) }, func() error { return os.WriteFile(cert, certPEM, 0o600) },
			"--tls-cert " + cert + ", --tls-key " + key + ": tls: failed to find any PEM data in certificate input"},
		{"certificate of another key", func() error { return copyFile(otherCert, cert) }, func() error { return os.WriteFile(cert, certPEM, 0o600) },
			"--tls-cert " + cert + ", --tls-key " + key + ": tls: private key does not match public key"},
		{"key mode 0644", func() error { return os.Chmod(key, 0o644) }, func() error { return os.Chmod(key, 0o600) },
			"--tls-key " + key + ": mode 0644 lets group or others read or write it; want 0600 or 0400 (chmod 600 it)"},
	}
	if os.Geteuid() == 0 {
		steps = append(steps, step{"key of another user", func() error { return os.Chown(key, 1001, 1001) }, func() error { return os.Chown(key, 0, 0) },
			"--tls-key " + key + ": owned by uid 1001, not by this process (uid 0)"})
	}
	for _, s := range steps {
		if err := s.break_(); err != nil {
			t.Fatal(err)
		}
		line := signal()
		if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "not reloaded") || !strings.Contains(line, s.want) {
			t.Errorf("%s: logged %q, want one error line holding %q", s.name, line, s.want)
		}
		if got := serial(); got != 1 {
			t.Errorf("%s: serial %d in use, want 1 (the pair before)", s.name, got)
		}
		if err := s.mend(); err != nil {
			t.Fatal(err)
		}
	}

	selfSignedSerial(t, dir, 2)
	line := signal()
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "TLS certificate reloaded") || !strings.Contains(line, "serial=2 ") ||
		!strings.Contains(line, "file="+cert) || !strings.Contains(line, "flag=--tls-cert") {
		t.Errorf("good pair: logged %q, want the reload with its file and serial 2", line)
	}
	if c, err := k.GetCertificate(nil); err != nil || c.Leaf.SerialNumber.Int64() != 2 {
		t.Errorf("GetCertificate after the reload: %v, %v; want serial 2", c, err)
	}
	if got := log.Lines(); len(got) != n {
		t.Errorf("%d signals logged %d lines, want one each:\n%s", n, len(got), strings.Join(got, "\n"))
	}
}

// TestReloadOnHUPWithoutTLS: with no pair a SIGHUP is one line, not a
// crash or a reload of nothing in silence.
func TestReloadOnHUPWithoutTLS(t *testing.T) {
	t.Parallel()
	var log syncbuf.Buffer
	hup := make(chan os.Signal, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reloadOnHUP(ctx, hup, nil, slog.New(slog.NewTextHandler(&log, nil)))
	hup <- syscall.SIGHUP
	waitfor.Until(t, "the SIGHUP logged", func() bool { return strings.Contains(strings.Join(log.Lines(), "\n"), "no TLS files to re-read") })
}

// TestEtcdClientCertReloads: the etcd client configuration takes the
// --etcd-cert pair read last: a server asking for a client certificate
// sees the new one after Reload, and the old one still after a reload
// that fails.
func TestEtcdClientCertReloads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key, _ := selfSignedSerial(t, dir, 1)
	et, err := etcdTLS("", cert, key)
	if err != nil {
		t.Fatal(err)
	}
	tc, k := et.tls, et.pair
	sc, sk, _ := selfSignedSerial(t, t.TempDir(), 100)
	srvCert, err := tls.LoadX509KeyPair(sc, sk)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientAuth: tls.RequireAnyClientCert})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	seen := make(chan int64, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tcn := c.(*tls.Conn)
			if tcn.Handshake() == nil {
				seen <- tcn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
			}
			c.Close()
		}
	}()
	clientSerial := func() int64 {
		t.Helper()
		cfg := tc.Clone()
		cfg.InsecureSkipVerify = true // the server is not what is tested
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-seen:
			return s
		case <-time.After(waitfor.Stall):
			t.Fatal("the server saw no client certificate")
		}
		return 0
	}
	if s := clientSerial(); s != 1 {
		t.Fatalf("client certificate serial %d, want 1", s)
	}
	selfSignedSerial(t, dir, 2)
	if _, err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if s := clientSerial(); s != 2 {
		t.Fatalf("after Reload: client certificate serial %d, want 2", s)
	}
	if err := os.WriteFile(key, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Reload(); err == nil || !strings.HasPrefix(err.Error(), "--etcd-cert "+cert+", --etcd-key "+key+": ") {
		t.Fatalf("Reload of a garbage key: %v, want the error naming both files", err)
	}
	if s := clientSerial(); s != 2 {
		t.Fatalf("after a failed Reload: client certificate serial %d, want 2", s)
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}
