package manager_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// dialFrom opens a connection to addr from local address ip.
func dialFrom(t *testing.T, addr, ip string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// anonGet sends one keep-alive GET without a credential and reads the answer.
func anonGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: m\r\n\r\n", path)
	c.SetReadDeadline(time.Now().Add(stall))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestIdleAnonymousConnectionsMakeRoom: with room for 2 anonymous
// connections (3, one reserved), idle anonymous connections are cut,
// oldest first, for newcomers, and a connection that showed the admin
// token is never cut.
func TestIdleAnonymousConnectionsMakeRoom(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	_, addr, idle := hardenedServe(t, manager.ServerConfig{}, manager.ConnLimits{MaxConns: 3, Reserved: 1})
	var anon []net.Conn
	for i := range 2 {
		c := dialFrom(t, addr, fmt.Sprintf("127.0.0.%d", 2+i))
		if resp := anonGet(t, c, bufio.NewReader(c), "/healthz"); resp.StatusCode != 200 {
			t.Fatalf("anonymous connection %d: %d", i, resp.StatusCode)
		}
		idle.wait(t, c) // in this order in the listener's idle list
		anon = append(anon, c)
	}
	admin := dialFrom(t, addr, "127.0.0.1")
	abr := bufio.NewReader(admin)
	if resp := roundTrip(t, admin, abr, "/v1/stats"); resp.StatusCode != 200 {
		t.Fatalf("admin with two idle anonymous connections held: %d", resp.StatusCode)
	}
	if got := closedByServer(t, anon[0], "the oldest idle anonymous connection"); got != "" {
		t.Fatalf("the cut connection got %q, want a plain close", got)
	}
	// The newest anonymous connection is untouched; the next newcomer
	// (anonymous, the listener full) cuts it, never the admin's.
	if resp := anonGet(t, anon[1], bufio.NewReader(anon[1]), "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("the other anonymous connection: %d", resp.StatusCode)
	}
	idle.wait(t, anon[1])
	late := dialFrom(t, addr, "127.0.0.4")
	lbr := bufio.NewReader(late)
	if resp := anonGet(t, late, lbr, "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("newcomer filling the listener: %d", resp.StatusCode)
	}
	idle.wait(t, late)
	later := dialFrom(t, addr, "127.0.0.5")
	if resp := anonGet(t, later, bufio.NewReader(later), "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("newcomer over the cap: %d", resp.StatusCode)
	}
	closedByServer(t, anon[1], "the oldest idle anonymous connection, again")
	if resp := anonGet(t, late, lbr, "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("the newer anonymous connection: %d", resp.StatusCode)
	}
	if resp := roundTrip(t, admin, abr, "/v1/stats"); resp.StatusCode != 200 {
		t.Fatalf("admin connection after the newcomers: %d", resp.StatusCode)
	}
}

// busyAnon opens an anonymous connection from ip whose request is in
// progress at the server: GET /healthz declaring a body it never sends
// (the server waits for the body, up to ReadTimeout, before it answers), so
// the connection is neither pending nor idle.
func busyAnon(t *testing.T, addr, ip string, st *serverIdle) net.Conn {
	t.Helper()
	c := dialFrom(t, addr, ip)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: m\r\nContent-Length: 1000\r\n\r\n")
	st.waitState(t, c, http.StateActive)
	return c
}

// TestReserveIsForCredentials: anonymous connections busy (a request in
// progress: nothing to cut) fill the anonymous share; a newcomer gets a
// reserved slot, which serves the admin token and refuses a tokenless
// request (503, closed). With every slot held, one more is refused at once.
func TestReserveIsForCredentials(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	_, addr, st := hardenedServe(t, manager.ServerConfig{}, manager.ConnLimits{MaxConns: 3, Reserved: 1})
	for i := range 2 {
		busyAnon(t, addr, fmt.Sprintf("127.0.0.%d", 2+i), st)
	}
	anon := dialFrom(t, addr, "127.0.0.4")
	io.WriteString(anon, "GET /healthz HTTP/1.1\r\nHost: m\r\n\r\n")
	got := closedByServer(t, anon, "anonymous request on a reserved slot")
	if !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, manager.CodeUnavailable) || !strings.Contains(got, "credential") {
		t.Fatalf("anonymous request on a reserved slot got %q, want 503 naming the credential", got)
	}
	admin := dialFrom(t, addr, "127.0.0.1")
	abr := bufio.NewReader(admin)
	for range 2 {
		if resp := roundTrip(t, admin, abr, "/v1/stats"); resp.StatusCode != 200 {
			t.Fatalf("admin on a reserved slot: %d", resp.StatusCode)
		}
	}
	extra := dialFrom(t, addr, "127.0.0.5")
	io.WriteString(extra, "GET /healthz HTTP/1.1\r\nHost: m\r\n\r\n")
	if got := closedByServer(t, extra, "connection over the cap"); !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, "limit") {
		t.Fatalf("connection over the cap got %q, want 503 naming the limit", got)
	}
}

// TestAnonymousConnectionsPerAddressAreCapped: an address's third
// anonymous connection (cap 2) cuts its own oldest idle one, not another
// address's.
func TestAnonymousConnectionsPerAddressAreCapped(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	_, addr, idle := hardenedServe(t, manager.ServerConfig{}, manager.ConnLimits{MaxAnonConnsPerClient: 2})
	other := dialFrom(t, addr, "127.0.0.3")
	obr := bufio.NewReader(other)
	anonGet(t, other, obr, "/healthz")
	idle.wait(t, other)
	var mine []net.Conn
	for range 3 {
		c := dialFrom(t, addr, "127.0.0.2")
		if resp := anonGet(t, c, bufio.NewReader(c), "/healthz"); resp.StatusCode != 200 {
			t.Fatalf("connection %d from the capped address: %d", len(mine), resp.StatusCode)
		}
		idle.wait(t, c)
		mine = append(mine, c)
	}
	closedByServer(t, mine[0], "the capped address's oldest connection")
	if resp := anonGet(t, other, obr, "/healthz"); resp.StatusCode != 200 {
		t.Fatalf("the other address's connection: %d", resp.StatusCode)
	}
}

// TestAnonymousRequestsAreRateLimited: past its burst an address's
// tokenless requests are 429 rate_limited, while a call with the token
// from the same address is served.
func TestAnonymousRequestsAreRateLimited(t *testing.T) {
	t.Parallel()
	_, addr := hardened(t, manager.ServerConfig{Requests: manager.RequestLimits{AnonPerSecond: 0.01}}, 0)
	hc := &http.Client{Timeout: stall}
	get := func() *http.Response {
		resp, err := hc.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.StatusCode != 200 {
		t.Fatalf("first anonymous request: %d", resp.StatusCode)
	}
	resp, err := hc.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(b), manager.CodeRateLimited) || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second anonymous request: %d %s, want 429 rate_limited with Retry-After", resp.StatusCode, b)
	}
	if _, err := ctlclient.New("http://"+addr, token).Stats(context.Background()); err != nil {
		t.Fatalf("admin call from the limited address: %v", err)
	}
	if got := metric(t, addr, `dxpu_api_requests_limited_total{reason="rate"}`); got != "1" {
		t.Fatalf("requests limited by rate: %q, want 1", got)
	}
}

// metric reads one sample of /metrics with the admin token (an anonymous
// scrape would count against the rate it reads).
func metric(t *testing.T, addr, name string) string {
	t.Helper()
	return metricFrom(t, addr, "127.0.0.1", name)
}

// metricFrom is metric from local address ip.
func metricFrom(t *testing.T, addr, ip, name string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := clientFrom("http://"+addr, ip).HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestRequestsInProgressPerClientAreCapped: a client with the token and
// two watches in progress (cap 2) gets 429 for a third request; another
// address is served.
func TestRequestsInProgressPerClientAreCapped(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	_, addr := hardened(t, manager.ServerConfig{Requests: manager.RequestLimits{MaxInFlight: 2}}, 0)
	base := "http://" + addr
	one, other := clientFrom(base, "127.0.0.1"), clientFrom(base, "127.0.0.2")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tb, err := one.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		go one.WatchTable(ctx, tb.Version, time.Hour)
	}
	deadline := time.Now().Add(stall)
	for metricFrom(t, addr, "127.0.0.3", "dxpu_api_watches") != "2" { // the client's own reads would be refused
		if time.Now().After(deadline) {
			t.Fatalf("the two watches did not start within %v", stall)
		}
	}
	_, err = one.Stats(ctx)
	var ae *ctlclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.Code != manager.CodeRateLimited || !strings.Contains(ae.Message, "in progress") {
		t.Fatalf("third request of the client: %v, want 429 rate_limited naming requests in progress", err)
	}
	if _, err := other.Stats(ctx); err != nil {
		t.Fatalf("another address: %v", err)
	}
}

// TestAdmissionOverTLS: the listener sees through TLS: an idle anonymous
// TLS connection is cut for an admin's, and the admin's, once it showed the
// token, counts as credentialed.
func TestAdmissionOverTLS(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = manager.NewServer(m, manager.ServerConfig{})
	idle := watchIdle(ts.Config)
	ts.Listener = manager.LimitListenerWith(ts.Listener, manager.ConnLimits{MaxConns: 2, Reserved: 1})
	ts.StartTLS()
	t.Cleanup(ts.Close)
	anon := &http.Client{Transport: ts.Client().Transport.(*http.Transport).Clone()} // its own connections
	resp, err := anon.Get(ts.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The server marks the connection idle after the client has the
	// answer: one still active is not cut, and the admin's would take a
	// reserved slot instead.
	idle.waitN(t, 1)
	admin := ctlclient.New(ts.URL, token)
	// One connection: a second one, dialed while the first is on its way
	// back to the pool, would be another anonymous one.
	tr := ts.Client().Transport.(*http.Transport).Clone()
	tr.MaxConnsPerHost = 1
	admin.HTTP = &http.Client{Transport: tr}
	if _, err := admin.Stats(context.Background()); err != nil {
		t.Fatalf("admin over TLS with the anonymous share full: %v", err)
	}
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = admin.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`dxpu_api_connections{class="anonymous"} 0`, `dxpu_api_connections{class="credentialed"} 1`, "dxpu_api_connections_evicted_total 1"} {
		if !strings.Contains(string(b), want+"\n") {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

// serverIdle follows which connections a server's ConnState hook
// (NewServer's, which it wraps and runs first) holds idle, by the client's
// address. The server marks a connection idle only after the client has
// the answer, and the listener cuts only idle ones: a newcomer meant to
// cut one waits until the listener knows it is idle.
type serverIdle struct {
	mu    sync.Mutex
	idle  map[string]bool
	state map[string]http.ConnState
	n     int // connections gone idle, in all
}

func watchIdle(srv *http.Server) *serverIdle {
	w := &serverIdle{idle: map[string]bool{}, state: map[string]http.ConnState{}}
	hook := srv.ConnState
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		hook(c, s)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.idle[c.RemoteAddr().String()] = s == http.StateIdle
		w.state[c.RemoteAddr().String()] = s
		if s == http.StateIdle {
			w.n++
		}
	}
	return w
}

// wait waits until the server holds the client connection c idle.
func (w *serverIdle) wait(t *testing.T, c net.Conn) {
	t.Helper()
	waitfor.Until(t, fmt.Sprintf("connection from %v idle at the server", c.LocalAddr()), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.idle[c.LocalAddr().String()]
	})
}

// waitState waits until the server holds the client connection c in
// state s.
func (w *serverIdle) waitState(t *testing.T, c net.Conn, s http.ConnState) {
	t.Helper()
	waitfor.Until(t, fmt.Sprintf("connection from %v %v at the server", c.LocalAddr(), s), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		st, ok := w.state[c.LocalAddr().String()]
		return ok && st == s
	})
}

// waitN waits until n connections went idle at the server, in all.
func (w *serverIdle) waitN(t *testing.T, n int) {
	t.Helper()
	waitfor.Until(t, fmt.Sprintf("%d connections idle at the server", n), func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.n >= n
	})
}

// slowFlood is finding F1's attacker: from each of addrs, n connections
// that send half a request's headers and hold the connection; one the
// manager cuts or refuses is opened again after pause.
type slowFlood struct {
	closed atomic.Uint64 // connections the manager cut or refused
	dialed atomic.Uint64 // connections opened
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startSlowFlood(addr string, addrs []string, n int, pause time.Duration) *slowFlood {
	ctx, cancel := context.WithCancel(context.Background())
	f := &slowFlood{cancel: cancel}
	for _, ip := range addrs {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		for range n {
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				for ctx.Err() == nil {
					if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
						f.dialed.Add(1)
						stop := context.AfterFunc(ctx, func() { c.Close() })
						io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: m\r\nX-Drip: ")
						io.Copy(io.Discard, c) // until the manager cuts or refuses it
						if ctx.Err() == nil {
							f.closed.Add(1)
						}
						stop()
						c.Close()
					}
					select {
					case <-ctx.Done():
					case <-time.After(pause):
					}
				}
			}()
		}
	}
	return f
}

func (f *slowFlood) stop() { f.cancel(); f.wg.Wait() }

// TestSlowlorisFromManyAddressesLocksNoAdminOut repeats finding F1 at a
// small scale: 16 addresses, 4 connections each, each holding half a
// request's headers (and opened again when cut), fill every slot an
// anonymous connection can get, the reserve's probation included. The
// admin, from another address, on a new connection for every call, is
// served every time: the newcomer cuts the connection pending longest.
func TestSlowlorisFromManyAddressesLocksNoAdminOut(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	_, addr := hardenedWith(t, manager.ServerConfig{ReadHeaderTimeout: time.Hour}, manager.ConnLimits{MaxConns: 32})
	var addrs []string
	for i := range 16 {
		addrs = append(addrs, fmt.Sprintf("127.0.100.%d", i+1))
	}
	f := startSlowFlood(addr, addrs, 4, 250*time.Millisecond)
	defer f.stop()
	// 64 connections for 32 slots: the listener is full once the manager
	// cuts or refuses one. The admin comes once every flooder connected:
	// in the flood's first burst, more newcomers than the anonymous share
	// arrive between a client's connect and its request, and nothing tells
	// that client from a slowloris yet (see admission.go).
	waitfor.Progress(t, "the flood fills the listener", func() (bool, uint64) {
		n, d := f.closed.Load(), f.dialed.Load()
		return n > 0 && d >= uint64(len(addrs)*4), n + d
	})
	for i := range 10 {
		c := dialFrom(t, addr, "127.0.0.1")
		resp := roundTrip(t, c, bufio.NewReader(c), "/v1/stats")
		c.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("admin call %d under the slow flood: %d, want 200", i, resp.StatusCode)
		}
	}
	t.Logf("flood connections cut or refused: %d", f.closed.Load())
}

// getWith sends one keep-alive GET with tok ("" for none) on c and
// returns its status and body.
func getWith(t *testing.T, c net.Conn, br *bufio.Reader, path, tok string) (int, string) {
	t.Helper()
	auth := ""
	if tok != "" {
		auth = "Authorization: Bearer " + tok + "\r\n"
	}
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: m\r\n%s\r\n", path, auth)
	c.SetReadDeadline(time.Now().Add(stall))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// TestReadTokenCannotHoldTheManager repeats finding F2: connections that
// each make one GET with the read-only token and then stay open hold at
// most MaxConnsPerCredential of them (the others are answered 503 naming
// the limit, and closed), so the admin and /healthz are still served; and
// with a per-credential cap as large as the listener, credentials other
// than the admin's still leave AdminReserved slots.
func TestReadTokenCannotHoldTheManager(t *testing.T) {
	t.Parallel()
	privtest.Loopback(t)
	for _, tc := range []struct {
		name string
		lim  manager.ConnLimits
		held int    // read-only connections served
		want string // in the refusals
	}{
		{"per credential", manager.ConnLimits{MaxConns: 32}, 4, "the read-only token holds 4 connections"},
		{"admin reserve", manager.ConnLimits{MaxConns: 16, MaxConnsPerCredential: 16, AdminReserved: 4}, 12, "other than the admin token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, addr := hardenedWith(t, manager.ServerConfig{}, tc.lim)
			held := 0
			for i := range 2 * tc.lim.MaxConns {
				c := dialFrom(t, addr, fmt.Sprintf("127.0.1.%d", 1+i%4))
				status, body := getWith(t, c, bufio.NewReader(c), "/v1/stats", readToken)
				switch {
				case status == http.StatusOK:
					held++
				case status != http.StatusServiceUnavailable || !strings.Contains(body, tc.want):
					t.Fatalf("read-only connection %d: %d %s, want 200 or 503 naming %q", i, status, body, tc.want)
				default:
					closedByServer(t, c, "a refused read-only connection")
				}
			}
			if held != tc.held {
				t.Errorf("read-only connections served: %d, want %d", held, tc.held)
			}
			admin := dialFrom(t, addr, "127.0.0.1")
			abr := bufio.NewReader(admin)
			if status, body := getWith(t, admin, abr, "/v1/stats", token); status != http.StatusOK {
				t.Fatalf("admin with the read-only token's connections held: %d %s", status, body)
			}
			anon := dialFrom(t, addr, "127.0.0.2")
			if status, body := getWith(t, anon, bufio.NewReader(anon), "/healthz", ""); status != http.StatusOK {
				t.Fatalf("/healthz with the read-only token's connections held: %d %s", status, body)
			}
		})
	}
}
