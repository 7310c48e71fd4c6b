package managerd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/httpguard/guardtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// bodySlack is what a loaded machine adds to the body bound.
const bodySlack = 3 * time.Second

// TestManagerBodyTimeout: `dxpu manager` (default flags) given a request's
// headers with a body declared (Content-Length: 1000, or chunked) and no
// body answers it within manager.DefaultBodyTimeout, not the 30s of
// ReadTimeout: a request that reads the body (an admin's POST /v1/hosts)
// is 400 at the body bound and its connection closed; one refused before
// its body (no token, a bad agent credential, even /healthz and /metrics,
// which read none) is answered at once and its connection closed.
func TestManagerBodyTimeout(t *testing.T) {
	t.Parallel()
	p, admin := startManagerBinary(t)
	const bound = manager.DefaultBodyTimeout
	for _, tc := range []struct {
		name, method, path string
		hdr                []string
		status             int
		reads              bool // the handler reads the body: answered at the bound
	}{
		{"admin", "POST", "/v1/hosts", []string{"Authorization: Bearer " + admin}, http.StatusBadRequest, true},
		{"admin chunked", "POST", "/v1/hosts", []string{"Authorization: Bearer " + admin, "Transfer-Encoding: chunked"}, http.StatusBadRequest, true},
		{"no token", "POST", "/v1/hosts", nil, http.StatusUnauthorized, false},
		{"bad agent credential", "POST", "/v1/agent/pairs/1/link-down", []string{"Authorization: Bearer nobody"}, http.StatusUnauthorized, false},
		{"healthz", "GET", "/healthz", nil, http.StatusOK, false},
		// Written as it is made, so sent while the handler runs.
		{"metrics", "GET", "/metrics", nil, http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := net.DialTimeout("tcp", p.addr, waitfor.Stall)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := guardtest.StallBody(c, tc.method, tc.path, bound+bodySlack, tc.hdr...)
			what := fmt.Sprintf("%s %s (%s) with no body after its headers", tc.method, tc.path, tc.name)
			if err != nil {
				t.Fatalf("%s, body bound %v: %v", what, bound, err)
			}
			if s.Status != tc.status {
				t.Fatalf("%s: %v; want %d", what, s, tc.status)
			}
			if tc.reads && (s.Answered < bound || !strings.Contains(s.Body, "reading the request body")) {
				t.Errorf("%s: %v; want 400 about the body at the body bound %v", what, s, bound)
			}
			if !tc.reads && (s.Answered >= bound/2 || s.Closed >= bound/2) {
				t.Errorf("%s: %v; want the answer and the close at once, not at the body bound %v", what, s, bound)
			}
		})
	}
}

// TestManagerBodyInParts: a body sent in two parts 100ms apart is served
// (200), and the connection stays open for the next request.
func TestManagerBodyInParts(t *testing.T) {
	t.Parallel()
	p, admin := startManagerBinary(t)
	body, err := json.Marshal(pool.Host{ID: "h0", Ports: pool.MinHostPorts,
		Bridge: pool.Endpoint{SwitchPort: "veth-h0", MAC: "02:00:00:00:02:00", IP: "10.2.0.1", UDPPort: 4791}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", p.addr, waitfor.Stall)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/hosts HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		admin, len(body), body[:len(body)/2])
	time.Sleep(100 * time.Millisecond) // the client's pause between the parts, the case tested
	c.Write(body[len(body)/2:])
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(waitfor.Stall))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("POST /v1/hosts, body in two parts 100ms apart: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("POST /v1/hosts, body in two parts 100ms apart: %d (close %v) %s; want 200, kept alive", resp.StatusCode, resp.Close, b)
	}
	fmt.Fprintf(c, "GET /v1/hosts HTTP/1.1\r\nHost: m\r\nAuthorization: Bearer %s\r\n\r\n", admin)
	if resp, err = http.ReadResponse(br, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("next request on the connection: %v %v; want 200", resp, err)
	}
	b, _ = io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"h0"`) {
		t.Errorf("GET /v1/hosts after registering h0: %s", b)
	}
}

// TestManagerWatchOutlivesBodyTimeout: a table watch (no body) runs its
// whole timeout, past the body bound, and answers the unchanged table.
func TestManagerWatchOutlivesBodyTimeout(t *testing.T) {
	t.Parallel()
	p, admin := startManagerBinary(t)
	cl := ctlclient.New("http://"+p.addr, admin)
	ctx := context.Background()
	tb, err := cl.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	timeout := manager.DefaultBodyTimeout + 2*time.Second
	start := time.Now()
	got, err := cl.WatchTable(ctx, tb.Version, timeout)
	took := time.Since(start)
	if err != nil || got.Version != tb.Version {
		t.Fatalf("table watch: version %d, %v; want the unchanged table %d", got.Version, err, tb.Version)
	}
	if took < timeout {
		t.Errorf("table watch of timeout %v answered after %v: cut before its timeout (body bound %v)", timeout, took.Round(time.Millisecond), manager.DefaultBodyTimeout)
	}
}
