package managerd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// openConns opens n connections to base from 127.0.0.1 that send nothing,
// and returns them once all are made.
func openConns(t *testing.T, base string, n int) []net.Conn {
	t.Helper()
	addr := strings.TrimPrefix(base, "http://")
	var cs []net.Conn
	for range n {
		c, err := net.DialTimeout("tcp", addr, waitfor.Stall)
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
// mentioning want. The listener writes it when it accepts c; the read's
// bound (waitfor.Stall) only ends a test whose connection was held
// instead of refused.
func refusedWith(t *testing.T, c net.Conn, want string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(waitfor.Stall))
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
	c.SetReadDeadline(time.Now().Add(waitfor.Stall))
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
