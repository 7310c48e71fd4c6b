package managerd

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// Tests from hand-made bugs in managerd.go: each fails with a small change
// to Run's checks or to how it wires the options into the server.

// serveLog is the daemon's JSON log; it hands over the advertised URL.
type serveLog struct {
	mu   sync.Mutex
	buf  []byte
	urls chan string
}

func (w *serveLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			return len(p), nil
		}
		var line struct {
			Msg       string `json:"msg"`
			Advertise string `json:"advertise"`
		}
		if json.Unmarshal(w.buf[:i], &line) == nil && line.Msg == "manager serving" {
			select {
			case w.urls <- line.Advertise:
			default:
			}
		}
		w.buf = w.buf[i+1:]
	}
}

// daemon is Run in this process.
type daemon struct {
	base  string
	admin string
	stop  func() error // ends the run and returns Run's error
}

// startDaemon runs the daemon with o in this process (an admin token file
// made for it unless o names one or NoAuth) and waits until it serves.
func startDaemon(t *testing.T, o Options) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{}
	if o.TokenFile == "" && !o.NoAuth {
		o.TokenFile = filepath.Join(dir, "admin.tok")
		tok, err := manager.CreateTokenFile(o.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		d.admin = tok
	} else if o.TokenFile != "" {
		tok, err := manager.LoadTokenFile(o.TokenFile)
		if err != nil {
			t.Fatal(err)
		}
		d.admin = tok
	}
	if o.Store == "" {
		o.Store = filepath.Join(dir, "m.db")
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.MaxConns == 0 {
		o.MaxConns = 16
	}
	if o.ReconcileInterval == 0 {
		o.ReconcileInterval = 30 * time.Second
	}
	o.EtcdPrefix, o.LeaseTTL = "/dxpu/", 3
	lw := &serveLog{urls: make(chan string, 1)}
	o.Log = slog.New(slog.NewJSONHandler(lw, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	var once sync.Once
	var runErr error
	d.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(30 * time.Second):
				runErr = errors.New("Run did not return 30s after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() { d.stop() })
	select {
	case d.base = <-lw.urls:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon did not serve within 30s")
	}
	return d
}

// runBounded runs the daemon with o exactly as given (Listen, Log and the
// store excepted) and fails the test if it is still serving after 10s.
func runBounded(t *testing.T, o Options) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, der []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "managerd test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IsCA: true, BasicConstraintsValid: true}
	der, err = x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, der
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

// TestEtcdTLSFromFlags: a client certificate alone (no CA) is used, and
// one half of it alone is refused.
func TestEtcdTLSFromFlags(t *testing.T) {
	t.Parallel()
	cert, key, _ := selfSigned(t, t.TempDir())
	tc, err := etcdTLS("", cert, key)
	if err != nil || tc == nil || len(tc.Certificates) != 1 || tc.RootCAs != nil {
		t.Fatalf("etcdTLS(\"\", cert, key) = %+v, %v; want one client certificate and the system CAs", tc, err)
	}
	if tc.MinVersion < tls.VersionTLS12 {
		t.Fatalf("MinVersion %x, want TLS 1.2 at least", tc.MinVersion)
	}
	for _, c := range [][2]string{{cert, ""}, {"", key}} {
		if tc, err := etcdTLS("", c[0], c[1]); err == nil || !strings.Contains(err.Error(), "go together") {
			t.Errorf("etcdTLS(\"\", %q, %q) = %v, %v; want the refusal", c[0], c[1], tc, err)
		}
	}
	if tc, err := etcdTLS(cert, "", ""); err != nil || tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 0 {
		t.Fatalf("etcdTLS(ca, \"\", \"\") = %+v, %v; want the CA alone", tc, err)
	}
}

// TestServesTLS: with --tls-cert/--tls-key the API is served over TLS with
// that certificate, and the advertised URL is https.
func TestServesTLS(t *testing.T) {
	t.Parallel()
	cert, key, der := selfSigned(t, t.TempDir())
	d := startDaemon(t, Options{TLSCert: cert, TLSKey: key})
	if !strings.HasPrefix(d.base, "https://") {
		t.Fatalf("advertised %q, want https://", d.base)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(c)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := hc.Get(d.base + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz over TLS: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 || !resp.TLS.PeerCertificates[0].Equal(c) {
		t.Fatalf("GET /healthz over TLS: %d, TLS %v; want 200 with the configured certificate", resp.StatusCode, resp.TLS != nil)
	}
	if err := d.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// openConns opens n connections to base from 127.0.0.1 that send nothing,
// and returns them once all are made.
func openConns(t *testing.T, base string, n int) []net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	var cs []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// refusedWith reads what the daemon writes, unasked, on c: a 503 refusal
// mentioning want, within 3s.
func refusedWith(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("connection over the limit: %v, want a 503 refusal", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(b), want) {
		t.Fatalf("connection over the limit: %d %s, want 503 mentioning %q", resp.StatusCode, b, want)
	}
}

// getOn sends one keep-alive GET with tok ("" for none) on c and returns
// the status and body of its answer.
func getOn(t *testing.T, c net.Conn, path, tok string) (int, string) {
	t.Helper()
	auth := ""
	if tok != "" {
		auth = "Authorization: Bearer " + tok + "\r\n"
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: m\r\n%s\r\n", path, auth)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestConnLimitsFromOptions: --max-conns, --max-anon-conns-per-client and
// --max-conns-per-credential reach the listener.
func TestConnLimitsFromOptions(t *testing.T) {
	t.Parallel()
	t.Run("max-conns", func(t *testing.T) {
		t.Parallel()
		// Two connections that showed the admin token (never cut) hold
		// the listener; the third is refused.
		d := startDaemon(t, Options{MaxConns: 2})
		cs := openConns(t, d.base, 2)
		for _, c := range cs {
			if status, body := getOn(t, c, "/v1/stats", d.admin); status != http.StatusOK {
				t.Fatalf("admin connection: %d %s", status, body)
			}
		}
		cs = openConns(t, d.base, 1)
		refusedWith(t, cs[0], "holds 2 connections")
	})
	t.Run("max-anon-conns-per-client", func(t *testing.T) {
		t.Parallel()
		// 2 anonymous connections; the third from the address is on
		// probation, so its tokenless request is refused.
		d := startDaemon(t, Options{MaxConns: 16, MaxAnonConnsPerClient: 2})
		cs := openConns(t, d.base, 3)
		if status, body := getOn(t, cs[2], "/healthz", ""); status != http.StatusServiceUnavailable || !strings.Contains(body, "credential") {
			t.Fatalf("third anonymous connection of the address: %d %s, want 503 naming the credential", status, body)
		}
	})
	t.Run("max-conns-per-credential", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		readFile := filepath.Join(dir, "read.tok")
		read, err := manager.CreateTokenFile(readFile)
		if err != nil {
			t.Fatal(err)
		}
		d := startDaemon(t, Options{MaxConns: 64, MaxConnsPerCredential: 2, ReadTokenFile: readFile})
		cs := openConns(t, d.base, 3)
		for i, c := range cs {
			status, body := getOn(t, c, "/v1/stats", read)
			if i < 2 && status != http.StatusOK || i == 2 && (status != http.StatusServiceUnavailable || !strings.Contains(body, "read-only token holds 2 connections")) {
				t.Fatalf("read-only connection %d: %d %s", i, status, body)
			}
		}
	})
}

// TestUnreachableAfterFromOptions: --unreachable-after reaches the
// manager: a box whose agent refuses every connection is reported
// unreachable well before the 30s default.
func TestUnreachableAfterFromOptions(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String()
	ln.Close()
	d := startDaemon(t, Options{ReconcileInterval: 20 * time.Millisecond, UnreachableAfter: 100 * time.Millisecond})
	c := ctlclient.New(d.base, d.admin)
	if _, _, err := c.RegisterBoxAgent(t.Context(), pool.Box{ID: "box0", AgentURL: dead,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	u := waitUnreachable(t, c, "box0", 8*time.Second)
	t.Logf("unreachable: %s", u.Reason)
}

func waitUnreachable(t *testing.T, c *ctlclient.Client, box string, within time.Duration) *pool.Unreachable {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		boxes, err := c.Boxes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range boxes {
			if b.ID == box && b.Unreachable != nil {
				return b.Unreachable
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("box %s not reported unreachable within %v: %+v", box, within, boxes)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInsecureAgentNotCalledWithoutFlag: a box registered over plain http
// while --allow-insecure-agents was on is not called once the manager runs
// without it (the agent's credential would cross the network in clear).
func TestInsecureAgentNotCalledWithoutFlag(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer agent.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "admin.tok")
	if _, err := manager.CreateTokenFile(tok); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "m.db")

	d := startDaemon(t, Options{TokenFile: tok, Store: db, AllowInsecureAgents: true, ReconcileInterval: time.Hour})
	c := ctlclient.New(d.base, d.admin)
	if _, _, err := c.RegisterBoxAgent(t.Context(), pool.Box{ID: "box0", AgentURL: agent.URL,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	calls.Store(0)
	d = startDaemon(t, Options{TokenFile: tok, Store: db, ReconcileInterval: 20 * time.Millisecond, UnreachableAfter: 100 * time.Millisecond})
	u := waitUnreachable(t, ctlclient.New(d.base, d.admin), "box0", 8*time.Second)
	if n := calls.Load(); n != 0 {
		t.Fatalf("the http agent was called %d times by a manager without --allow-insecure-agents (unreachable: %s)", n, u.Reason)
	}
	t.Logf("unreachable: %s", u.Reason)
}

// TestDegradedAfterFromOptions: --degraded-after 50ms degrades a pair its
// agent reports down well before the 10s default.
func TestDegradedAfterFromOptions(t *testing.T) {
	gpuAPI, hostAPI := agentapi.NewServer(fakeagent.New("gpu")), agentapi.NewServer(fakeagent.New("host"))
	gpuSrv, hostSrv := httptest.NewTLSServer(gpuAPI), httptest.NewTLSServer(hostAPI)
	defer gpuSrv.Close()
	defer hostSrv.Close()
	ca := filepath.Join(t.TempDir(), "agents-ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gpuSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, Options{AgentCAFile: ca, DegradedAfter: 50 * time.Millisecond})
	c := ctlclient.New(d.base, d.admin)
	ctx := t.Context()
	_, boxCred, err := c.RegisterBoxAgent(ctx, pool.Box{ID: "box0", AgentURL: gpuSrv.URL,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}})
	if err != nil {
		t.Fatal(err)
	}
	gpuAPI.SetCredential(boxCred)
	_, hostCred, err := c.RegisterHostAgent(ctx, pool.Host{ID: "h1", AgentURL: hostSrv.URL,
		Bridge: pool.Endpoint{SwitchPort: "veth-h1", MAC: "02:00:00:00:02:01"}, Ports: pool.MinHostPorts})
	if err != nil {
		t.Fatal(err)
	}
	hostAPI.SetCredential(hostCred)
	a, err := c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/link-down", d.base, a.GPUs[0].Pair), strings.NewReader(`{"reason":"peer silent"}`))
	req.Header.Set("Authorization", "Bearer "+boxCred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("link-down report: %d", resp.StatusCode)
	}
	start := time.Now()
	for {
		got, err := c.Allocation(ctx, a.ID)
		if err == nil && got.State == pool.StateDegraded {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("allocation %+v %v not degraded 5s after the report (--degraded-after 50ms)", got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShutdownFinishesRequestInProgress: SIGTERM lets a request whose body
// is still arriving finish and be answered before the daemon exits.
func TestShutdownFinishesRequestInProgress(t *testing.T) {
	dir := t.TempDir()
	admin, err := manager.CreateTokenFile(filepath.Join(dir, "admin.tok"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := manager.CreateTokenFile(filepath.Join(dir, "read.tok")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	lw := &serveLog{urls: make(chan string, 1)}
	go io.Copy(lw, stdout)
	var base string
	select {
	case base = <-lw.urls:
	case <-exited:
		t.Fatal("the manager ended before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("the manager did not serve within 30s")
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"host":"h0","box":"nobox","rtt":"5µs"}`
	fmt.Fprintf(c, "PUT /v1/rtt HTTP/1.1\r\nHost: manager\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", admin, len(body), body[:5])
	time.Sleep(300 * time.Millisecond) // the handler waits for the rest of the body
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	io.WriteString(c, body[5:])
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("request in progress at SIGTERM: %v, want an answer", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("answered %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the manager did not exit 10s after SIGTERM")
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
