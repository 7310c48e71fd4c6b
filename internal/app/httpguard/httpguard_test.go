package httpguard_test

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/app/httpguard"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
	"github.com/dxpu/dxpu/internal/syncbuf"
	"github.com/dxpu/dxpu/internal/waitfor"
)

func serve(t *testing.T, cfg httpguard.Config, log *slog.Logger) string {
	t.Helper()
	if !guardtest.IsLoopbackAliasUsable() {
		t.Skip("127.0.0.2 is not usable here")
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer good" {
			httpguard.Trust(r.Context())
		}
		w.Write([]byte("ok\n"))
	})
	srv := httpguard.New("test", h, cfg, httpguard.MetricsDefaults, log)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln, nil) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := httpguard.Config{}.WithDefaults(httpguard.MetricsDefaults)
	if c != httpguard.MetricsDefaults {
		t.Errorf("zero config with the metrics defaults: %+v", c)
	}
	for _, c := range []httpguard.Config{c} {
		if c.ReadHeaderTimeout <= 0 || c.ReadTimeout <= 0 || c.BodyTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0 || c.MaxHeaderBytes <= 0 ||
			c.MaxConns <= 0 || c.MaxConnsPerAddr <= 0 || c.MaxConnsPerAddr > c.MaxConns {
			t.Errorf("unbounded: %+v", c)
		}
	}
}

// TestPerAddrAndIdle: the per-address cap refuses the excess at once, a
// client on another address is served, an idle connection is closed.
func TestPerAddrAndIdle(t *testing.T) {
	t.Parallel()
	addr := serve(t, httpguard.Config{MaxConnsPerAddr: 3, IdleTimeout: 200 * time.Millisecond}, nil)
	guardtest.CheckServer(t, addr, "/", 3, 200*time.Millisecond, http.StatusOK)
}

// TestTotalCap: connections that hold their slots (silent, or busy) fill
// the server; the next is refused, whatever its address. An idle
// anonymous one is closed to make room instead.
func TestTotalCap(t *testing.T) {
	t.Parallel()
	addr := serve(t, httpguard.Config{MaxConns: 4, MaxConnsPerAddr: 2}, nil)
	guardtest.Dial(t, "127.0.0.1", addr)
	guardtest.Dial(t, "127.0.0.1", addr)
	guardtest.Dial(t, "127.0.0.2", addr)
	b := guardtest.Dial(t, "127.0.0.2", addr)
	if err := guardtest.Refused(guardtest.Dial(t, "127.0.0.3", addr), "/"); err != nil {
		t.Errorf("connection beyond the total cap: %v", err)
	}
	// A slot freed: a newcomer gets it, and is idle after its request.
	b.Close()
	idle := guardtest.Served(t, "127.0.0.3", addr, "/", http.StatusOK)
	// Full again, one idle: the next newcomer gets its slot.
	c := guardtest.Served(t, "127.0.0.4", addr, "/", http.StatusOK)
	if err := guardtest.WaitClosed(idle, 5*time.Second); err != nil {
		t.Errorf("idle anonymous connection at the limit: %v, want closed for a newcomer", err)
	}
	if code, err := guardtest.Get(c, "/"); err != nil || code != http.StatusOK {
		t.Errorf("newcomer's second request: %d, %v", code, err)
	}
}

// TestTrusted: a connection that showed a credential does not count
// against its address and is not closed to make room: an anonymous flood
// from its own address does not cut it off.
func TestTrusted(t *testing.T) {
	t.Parallel()
	addr := serve(t, httpguard.Config{MaxConns: 8, MaxConnsPerAddr: 2}, nil)
	trusted := guardtest.Served(t, "127.0.0.1", addr, "/", http.StatusOK, "Authorization: Bearer good")
	// Two anonymous ones from the same address fit beside it.
	anon := []net.Conn{guardtest.Served(t, "127.0.0.1", addr, "/", http.StatusOK), guardtest.Served(t, "127.0.0.1", addr, "/", http.StatusOK)}
	// More close idle anonymous ones, never the trusted one. (Which ones
	// is the server's order of going idle, which may lag the client's
	// reading of the answer: the test does not insist on the oldest.)
	for range 4 {
		anon = append(anon, guardtest.Served(t, "127.0.0.1", addr, "/", http.StatusOK))
	}
	waitfor.Until(t, "all but --max-conns-per-addr of the anonymous connections closed", func() bool {
		closed := 0
		for _, c := range anon {
			if guardtest.WaitClosed(c, time.Millisecond) == nil {
				closed++
			}
		}
		return closed >= len(anon)-2
	})
	if code, err := guardtest.Get(trusted, "/", "Authorization: Bearer good"); err != nil || code != http.StatusOK {
		t.Fatalf("the trusted connection after the flood: %d, %v", code, err)
	}
}

// TestErrorLogRateLimited: the server's per-connection errors (here, bad
// TLS handshakes would be; a malformed request line logs nothing, so a
// write to ErrorLog is driven directly) go to slog, one line a second.
func TestErrorLogRateLimited(t *testing.T) {
	t.Parallel()
	var buf syncbuf.Buffer
	srv := httpguard.New("test", http.NotFoundHandler(), httpguard.Config{}, httpguard.MetricsDefaults, slog.New(slog.NewTextHandler(&buf, nil)))
	for i := range 100 {
		srv.ErrorLog.Printf("http: TLS handshake error from 127.0.0.1:%d: EOF", 40000+i)
	}
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 1 || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "TLS handshake error") {
		t.Errorf("100 connection errors logged as %d lines, want one slog line:\n%s", n, out)
	}
}
