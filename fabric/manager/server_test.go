package manager_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// stall bounds how long a test waits for something that should happen in
// milliseconds: past it, nothing moved and the test fails.
const stall = 10 * time.Second

// hardened serves a manager through NewServer on a LimitListener.
func hardened(t *testing.T, cfg manager.ServerConfig, maxConns int) (*manager.Manager, string) {
	t.Helper()
	return hardenedWith(t, cfg, manager.ConnLimits{MaxConns: maxConns})
}

// hardenedWith serves a manager through NewServer on LimitListenerWith(lim).
func hardenedWith(t *testing.T, cfg manager.ServerConfig, lim manager.ConnLimits) (*manager.Manager, string) {
	t.Helper()
	m, addr, _ := hardenedServe(t, cfg, lim)
	return m, addr
}

// hardenedServe is hardenedWith that also follows which connections the
// server holds idle. The manager has the admin token and readToken.
func hardenedServe(t *testing.T, cfg manager.ServerConfig, lim manager.ConnLimits) (*manager.Manager, string, *serverIdle) {
	t.Helper()
	m, err := manager.New(manager.Config{Token: token, ReadToken: readToken, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := manager.NewServer(m, cfg)
	idle := watchIdle(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(manager.LimitListenerWith(ln, lim)) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
		m.Close()
	})
	return m, ln.Addr().String(), idle
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends one keep-alive request on c and reads its answer.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer %s\r\n\r\n", path, token)
	c.SetReadDeadline(time.Now().Add(stall))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// closedByServer waits for the server to close c, reading whatever it
// sends first; it fails if c stays open for the stall bound.
func closedByServer(t *testing.T, c net.Conn, what string) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(stall))
	got, err := io.ReadAll(c)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: connection still open after %v", what, stall)
	}
	return string(got)
}

// TestIdleConnectionIsClosed repeats the attack "idle keep-alive
// connections stay open indefinitely".
func TestIdleConnectionIsClosed(t *testing.T) {
	t.Parallel()
	_, addr := hardened(t, manager.ServerConfig{IdleTimeout: 50 * time.Millisecond}, 0)
	c := dial(t, addr)
	br := bufio.NewReader(c)
	if resp := roundTrip(t, c, br, "/v1/stats"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first request: %d close=%v", resp.StatusCode, resp.Close)
	}
	start := time.Now()
	closedByServer(t, c, "idle keep-alive")
	t.Logf("idle connection closed after %v", time.Since(start).Round(time.Millisecond))
}

// TestUnsentBodyIsCutOff repeats the attack "GETs that declare a body they
// never send stay open", and the same for headers never finished.
func TestUnsentBodyIsCutOff(t *testing.T) {
	t.Parallel()
	_, addr := hardened(t, manager.ServerConfig{ReadTimeout: 100 * time.Millisecond, ReadHeaderTimeout: 100 * time.Millisecond}, 0)
	for name, req := range map[string]string{
		"GET declaring a body":    "GET /v1/stats HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer " + token + "\r\nContent-Length: 1000\r\n\r\n",
		"POST sending half":       "POST /v1/hosts HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer " + token + "\r\nContent-Length: 1000\r\n\r\n{\"id\":",
		"headers never finished":  "GET /v1/stats HTTP/1.1\r\nHost: m\r\n",
		"watch declaring a body ": "GET /v1/table?watch=1&version=1&timeout=1h HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer " + token + "\r\nContent-Length: 10\r\n\r\n",
	} {
		c := dial(t, addr)
		io.WriteString(c, req)
		start := time.Now()
		closedByServer(t, c, name)
		t.Logf("%s: cut off after %v", name, time.Since(start).Round(time.Millisecond))
	}
}

// TestConnectionsBeyondTheCapAreRefused repeats the attack "200 idle
// keep-alive connections exhaust descriptors": with a cap of 3, the fourth
// is answered 503 and closed at once, the three held keep working, and a
// slot frees when one closes.
func TestConnectionsBeyondTheCapAreRefused(t *testing.T) {
	t.Parallel()
	_, addr := hardened(t, manager.ServerConfig{}, 3)
	var held []net.Conn
	var readers []*bufio.Reader
	for i := 0; i < 3; i++ {
		c := dial(t, addr)
		br := bufio.NewReader(c)
		if resp := roundTrip(t, c, br, "/healthz"); resp.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i, resp.StatusCode)
		}
		held, readers = append(held, c), append(readers, br)
	}
	extra := dial(t, addr)
	fmt.Fprintf(extra, "GET /healthz HTTP/1.1\r\nHost: m\r\n\r\n")
	got := closedByServer(t, extra, "connection over the cap")
	if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, manager.CodeUnavailable) || !strings.Contains(got, "limit") {
		t.Fatalf("connection over the cap got %q, want 503 unavailable naming the limit", got)
	}
	for i, c := range held {
		if resp := roundTrip(t, c, readers[i], "/v1/stats"); resp.StatusCode != 200 {
			t.Fatalf("held connection %d after the refusal: %d", i, resp.StatusCode)
		}
	}
	// Closing one frees its slot once the server sees the close; each try
	// is refused at once until then.
	held[0].Close()
	deadline := time.Now().Add(stall)
	for {
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no slot freed %v after closing a connection (last: %v)", stall, err)
		}
	}
}

// watchesInProgress reads the dxpu_api_watches gauge.
func watchesInProgress(t *testing.T, addr string) string {
	t.Helper()
	return metric(t, addr, "dxpu_api_watches")
}

// clientFrom is an API client whose connections come from local address ip.
func clientFrom(base, ip string) *ctlclient.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c := ctlclient.New(base, token)
	c.HTTP = &http.Client{Timeout: time.Minute, Transport: &http.Transport{DialContext: d.DialContext}}
	return c
}

// TestWatchesPerClientAreCapped repeats the attack "tokenless table watches
// stay open indefinitely" for a client with a token: its third watch is 429
// while its two are served, other calls and other clients go on, and a
// watch ends before the server's write deadline whatever timeout it asks.
func TestWatchesPerClientAreCapped(t *testing.T) {
	t.Parallel()
	_, addr := hardened(t, manager.ServerConfig{MaxWatchesPerClient: 2}, 0)
	base := "http://" + addr
	one, other := clientFrom(base, "127.0.0.1"), clientFrom(base, "127.0.0.2")
	ctx := context.Background()
	_, since, err := one.Events(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 3)
	watch := func(c *ctlclient.Client) {
		evs, _, err := c.Events(ctx, since, "", time.Hour)
		if err == nil && len(evs) == 0 {
			err = errors.New("watch ended without the event")
		}
		results <- err
	}
	go watch(one)
	go watch(one)
	deadline := time.Now().Add(stall)
	for watchesInProgress(t, addr) != "2" {
		if time.Now().After(deadline) {
			t.Fatalf("the two watches did not start within %v", stall)
		}
	}
	_, _, err = one.Events(ctx, since, "", time.Hour)
	var ae *ctlclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Code != manager.CodeTooManyWatches || !strings.Contains(ae.Message, "127.0.0.1") {
		t.Fatalf("third watch: %v, want 429 too_many_watches naming the client", err)
	}
	if _, err := one.Stats(ctx); err != nil {
		t.Fatalf("a plain call from the capped client: %v", err)
	}
	go watch(other) // another client is not capped by the first
	for watchesInProgress(t, addr) != "3" {
		if time.Now().After(deadline) {
			t.Fatalf("the other client's watch did not start within %v", stall)
		}
	}
	if _, err := one.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	// The slots are free again.
	if _, _, err := one.Events(ctx, 0, "", time.Hour); err != nil {
		t.Fatalf("a watch after the others ended: %v", err)
	}
}

// TestWatchEndsBeforeTheWriteDeadline: a watch asking for an hour under a
// 1.2s write timeout answers (unchanged) instead of being cut: a reply the
// server wrote after its write deadline never arrives, so the client's
// error is what catches a watch held too long.
func TestWatchEndsBeforeTheWriteDeadline(t *testing.T) {
	t.Parallel()
	_, addr := hardened(t, manager.ServerConfig{WriteTimeout: 1200 * time.Millisecond}, 0)
	c := ctlclient.New("http://"+addr, token)
	ctx := context.Background()
	t0, err := c.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	t1, err := c.WatchTable(ctx, t0.Version, time.Hour)
	if err != nil || t1.Version != t0.Version {
		t.Fatalf("watch under a short write timeout: %+v %v, want the unchanged table", t1, err)
	}
	// An answer written past the write deadline would not reach the client
	// (the error above); how long it took is not the test's business.
	t.Logf("watch answered after %v", time.Since(start).Round(time.Millisecond))
}

// TestShutdownEndsWatches: a watch in progress does not hold Shutdown (the
// manager's SIGTERM) for MaxWatch: its request's context ends when
// Shutdown starts, the watch answers and Shutdown returns before its own
// deadline.
func TestShutdownEndsWatches(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := manager.NewServer(m, manager.ServerConfig{})
	go srv.Serve(ln)
	tbl, err := ctlclient.New("http://"+ln.Addr().String(), token).Table(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, ln.Addr().String())
	fmt.Fprintf(c, "GET /v1/table?watch=1&version=%d&timeout=1h HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer %s\r\n\r\n", tbl.Version, token)
	// The watch is in progress once the server counts it.
	waitfor.Until(t, "the watch starts", func() bool { return watchesInProgress(t, ln.Addr().String()) == "1" })
	ctx, cancel := context.WithTimeout(context.Background(), stall)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown with a watch in progress: %v (the watch held it)", err)
	}
}

// TestConnectionErrorsAreRateLimited repeats finding F7 against the
// manager: 200 plaintext connections to its TLS port logged 200 "TLS
// handshake error" lines; now one a second is logged, the rest counted,
// and the counts, written out every second, add up to every failed
// handshake.
func TestConnectionErrorsAreRateLimited(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	m, err := manager.New(manager.Config{Token: token, Logger: slog.New(slog.NewTextHandler(logs, nil)), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = manager.NewServer(m, manager.ServerConfig{})
	ts.StartTLS()
	t.Cleanup(ts.Close)
	addr := ts.Listener.Addr().String()
	const conns = 200
	start := time.Now()
	for range conns {
		c := dial(t, addr)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: m\r\n\r\n")
		closedByServer(t, c, "a plaintext connection to the TLS port")
		c.Close()
	}
	elapsed := time.Since(start)
	// The server logs after it closed the connection: wait for the last.
	count := func() (logged, held int) {
		for _, line := range logs.Lines() {
			if !strings.Contains(line, "TLS handshake error") {
				continue
			}
			if _, n, ok := strings.Cut(line, " suppressed="); ok {
				v, _ := strconv.Atoi(strings.Fields(n)[0])
				held += v
			} else {
				logged++
			}
		}
		return logged, held
	}
	// The counts held back come out within a second or two (the server
	// flushes them every second).
	waitfor.Until(t, "every failed handshake logged or counted", func() bool {
		logged, held := count()
		return logged+held >= conns
	})
	logged, held := count()
	if most := 2 * (int(elapsed/time.Second) + 2); logged > most || logged+held != conns {
		t.Fatalf("%d failed handshakes in %v: %d lines logged and %d counted, want at most %d lines and all %d accounted for:\n%s",
			conns, elapsed.Round(time.Millisecond), logged, held, most, conns, strings.Join(logs.Lines()[:min(8, len(logs.Lines()))], "\n"))
	}
	t.Logf("%d failed handshakes in %v: %d lines, %d counted", conns, elapsed.Round(time.Millisecond), logged, held)
}
