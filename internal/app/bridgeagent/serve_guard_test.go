package bridgeagent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/testcert"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// runAPI runs the agent (Run, as the daemon does) with o and returns the
// API's address.
func runAPI(t *testing.T, o Options) string {
	t.Helper()
	if !guardtest.IsLoopbackAliasUsable() {
		t.Skip("127.0.0.2 is not usable here")
	}
	o.Role, o.AgentListen, o.Credential = bridge.RoleHost, "127.0.0.1:0", "cred"
	o.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, func(_ *Agent, api net.Addr) { ready <- api }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case a := <-ready:
		return a.String()
	case err := <-done:
		t.Fatalf("agent stopped before it served: %v", err)
	}
	return ""
}

// TestAPIDefaultsBounded: the agent API runs with every limit set.
func TestAPIDefaultsBounded(t *testing.T) {
	t.Parallel()
	c := httpguard.Config{}.WithDefaults(APIDefaults)
	if c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0 || c.MaxHeaderBytes <= 0 ||
		c.MaxConns <= 0 || c.MaxConnsPerAddr <= 0 || c.MaxConnsPerAddr >= c.MaxConns {
		t.Errorf("agent API limits %+v", c)
	}
}

// TestAPIConnectionCaps (finding F3): 8000 connections from one address,
// each one tokenless request and then idle, were all held. The agent API
// caps connections per address: the excess is refused at once, a client
// on another address is still served, idle connections are closed after
// the idle timeout.
func TestAPIConnectionCaps(t *testing.T) {
	t.Parallel()
	const perAddr, idle = 3, 300 * time.Millisecond
	addr := runAPI(t, Options{Insecure: true, APIServer: httpguard.Config{MaxConnsPerAddr: perAddr, IdleTimeout: idle}})
	guardtest.CheckServer(t, addr, "/agent/v1/status", perAddr, idle, http.StatusUnauthorized)
}

// TestAPIManagerNotLockedOut (F3): an anonymous flood from the manager's
// own address (each connection one tokenless request, then idle) holds
// at most the per-address cap; the manager's next connection, with the
// credential, is served (an idle anonymous one makes room), and from
// then on it is exempt from the cap.
func TestAPIManagerNotLockedOut(t *testing.T) {
	t.Parallel()
	const perAddr = 4
	addr := runAPI(t, Options{Insecure: true, APIServer: httpguard.Config{MaxConnsPerAddr: perAddr}})
	var flood []net.Conn
	for i := range 3 * perAddr {
		c := guardtest.Dial(t, "127.0.0.1", addr)
		if code, err := guardtest.Get(c, "/agent/v1/status"); err == nil && code == http.StatusUnauthorized {
			flood = append(flood, c)
		} else if i < perAddr {
			t.Fatalf("anonymous connection %d: %d, %v", i, code, err)
		}
	}
	// Not a race: the listener closes the connection it cuts to make room
	// in Accept, before the newcomer is served, and every connection
	// dialled above had its answer (or refusal), so was accepted, before
	// this loop: each cut connection's close is already in its socket,
	// and one still open after a short look is one the server holds.
	open := 0
	for _, c := range flood {
		if guardtest.WaitClosed(c, 100*time.Millisecond) != nil {
			open++
		}
	}
	if open > perAddr {
		t.Errorf("%d anonymous connections from one address held, cap %d", open, perAddr)
	}
	mgr := guardtest.Served(t, "127.0.0.1", addr, "/agent/v1/status", http.StatusOK, "Authorization: Bearer cred")
	for range 2 * perAddr { // more flood: the manager's connection stays
		c := guardtest.Dial(t, "127.0.0.1", addr)
		guardtest.Get(c, "/agent/v1/status")
	}
	if code, err := guardtest.Get(mgr, "/agent/v1/status", "Authorization: Bearer cred"); err != nil || code != http.StatusOK {
		t.Fatalf("the manager's keep-alive connection after more flood: %d, %v; want 200", code, err)
	}
}

// TestAPIHandshakeErrorsInSlog (finding F7): with --agent-cert, junk
// handshakes were one line each in Go's default log format; they go to the
// agent's slog logger, one line a second.
func TestAPIHandshakeErrorsInSlog(t *testing.T) {
	t.Parallel()
	certFile, keyFile := selfSigned(t)
	var log syncbuf.Buffer
	addr := runAPI(t, Options{CertFile: certFile, KeyFile: keyFile, Log: slog.New(slog.NewTextHandler(&log, nil))})
	for range 50 {
		c := guardtest.Dial(t, "127.0.0.2", addr)
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		guardtest.WaitClosed(c, 5*time.Second)
		c.Close()
	}
	waitfor.Until(t, "a TLS handshake error in the agent's log", func() bool { return strings.Contains(log.String(), "TLS handshake error") })
	var lines int
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "handshake") {
			lines++
			if !strings.Contains(l, "level=WARN") || !strings.Contains(l, "agent API") {
				t.Errorf("handshake error not in the agent's slog form: %s", l)
			}
		}
	}
	if lines == 0 || lines > 3 {
		t.Errorf("50 junk handshakes gave %d slog lines, want 1 (a few with the counts):\n%s", lines, log.String())
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key in a new
// directory.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	p := testcert.Write(t, t.TempDir(), testcert.Options{CommonName: "agent", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	return p.CertFile, p.KeyFile
}
