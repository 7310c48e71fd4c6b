package manager_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

const readToken = "read-only-token"

// rolesEnv is a manager with an admin and a read-only token.
func rolesEnv(t *testing.T) (*manager.Manager, *httptest.Server, store.Store) {
	t.Helper()
	st := store.NewMemory()
	m, err := manager.New(manager.Config{Store: st, Token: token, ReadToken: readToken, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(func() { srv.Close(); m.Close() })
	return m, srv, st
}

func call(t *testing.T, srv *httptest.Server, method, path, tok, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReadsNeedAToken repeats the attack "every GET route (inventory with
// MACs, IPs, pair IDs, agent URLs) needs no token": without a token each is
// 401 and shows nothing; the read-only and the admin token may read.
func TestReadsNeedAToken(t *testing.T) {
	t.Parallel()
	_, srv, _ := rolesEnv(t)
	c := ctlclient.New(srv.URL, token)
	seed(t, c, 1, 2, 1)
	if _, err := c.Allocate(context.Background(), pool.Request{Host: "host0", Count: 1}); err != nil {
		t.Fatal(err)
	}
	reads := []string{"/v1/stats", "/v1/boxes", "/v1/boxes/box0", "/v1/hosts", "/v1/hosts/host0", "/v1/gpus",
		"/v1/gpus/box0-gpu0", "/v1/rtt", "/v1/allocations", "/v1/table", "/v1/events",
		"/v1/table?watch=1&version=1&timeout=1h", "/v1/events?watch=1&timeout=1h"}
	for _, path := range reads {
		for _, tok := range []string{"", "wrong-token"} {
			status, body := call(t, srv, "GET", path, tok, "")
			if status != http.StatusUnauthorized || !strings.Contains(body, manager.CodeUnauthorized) {
				t.Errorf("GET %s with token %q: %d %s, want 401", path, tok, status, body)
			}
			for _, secret := range []string{mac(0x100), "10.1.0.1", "veth-b0", "box0-gpu0"} {
				if strings.Contains(body, secret) {
					t.Errorf("GET %s with token %q leaks %s: %s", path, tok, secret, body)
				}
			}
		}
		for _, tok := range []string{readToken, token} {
			if !strings.Contains(path, "watch") {
				if status, body := call(t, srv, "GET", path, tok, ""); status != http.StatusOK {
					t.Errorf("GET %s with a valid token: %d %s", path, status, body)
				}
			}
		}
	}
	// /healthz and /metrics stay open for probes and Prometheus; they name
	// no bridge.
	for _, path := range []string{"/healthz", "/metrics"} {
		status, body := call(t, srv, "GET", path, "", "")
		if status != http.StatusOK || strings.Contains(body, mac(0x100)) || strings.Contains(body, "10.1.0.1") {
			t.Errorf("GET %s without a token: %d, or it names a bridge", path, status)
		}
	}
}

// TestReadTokenCannotWrite: the read-only token gets 403 forbidden on every
// mutating route and the store is untouched.
func TestReadTokenCannotWrite(t *testing.T) {
	t.Parallel()
	_, srv, st := rolesEnv(t)
	c := ctlclient.New(srv.URL, token)
	seed(t, c, 1, 2, 1)
	a, err := c.Allocate(context.Background(), pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	before := storeDump(t, st)
	writes := []struct{ method, path, body string }{
		{"POST", "/v1/boxes", `{"id":"evil","bridge":{"switch_port":"p","mac":"02:00:00:00:00:99"},"gpus":[]}`},
		{"DELETE", "/v1/boxes/box0", ``},
		{"POST", "/v1/boxes/box0/drain", ``},
		{"POST", "/v1/hosts", `{"id":"evil","bridge":{"switch_port":"p","mac":"02:00:00:00:00:98"},"ports":32}`},
		{"DELETE", "/v1/hosts/host0", ``},
		{"POST", "/v1/gpus/box0-gpu1/health", `{"health":"unhealthy"}`},
		{"PUT", "/v1/rtt", `{"host":"host0","box":"box0","rtt":"1us"}`},
		{"POST", "/v1/allocations", `{"host":"host0","count":1}`},
		{"DELETE", "/v1/allocations/" + a.ID, ``},
	}
	for _, w := range writes {
		status, body := call(t, srv, w.method, w.path, readToken, w.body)
		if status != http.StatusForbidden || !strings.Contains(body, manager.CodeForbidden) || !strings.Contains(body, "admin token") {
			t.Errorf("%s %s with the read-only token: %d %s, want 403 forbidden", w.method, w.path, status, body)
		}
	}
	if storeDump(t, st) != before {
		t.Fatal("the read-only token changed the store")
	}
}

func TestConfigRefusesConfusedTokens(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]manager.Config{
		"read token without admin": {ReadToken: "r"},
		"read token equals admin":  {Token: "same", ReadToken: "same"},
	} {
		if m, err := manager.New(cfg); err == nil {
			m.Close()
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDamagedCredentialRecordsAreSkipped: a damaged or misnamed stored
// credential costs only itself, and is counted.
func TestDamagedCredentialRecordsAreSkipped(t *testing.T) {
	t.Parallel()
	st := store.NewMemory()
	ctx := context.Background()
	st.Apply(ctx,
		store.Put("cred/box/good", []byte(`{"agent_url":"https://b:7701","credential":"c1"}`)),
		store.Put("cred/box/broken", []byte(`{not json`)),
		store.Put("cred/box/empty", []byte(`{"agent_url":"https://b:7701"}`)),
		store.Put("cred/switch/odd", []byte(`{"agent_url":"https://b:7701","credential":"c2"}`)))
	m, err := manager.New(manager.Config{Store: st, Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if c, ok := m.AgentCredential(manager.BridgeBox, "good"); !ok || c != "c1" {
		t.Fatalf("good record: %q %v", c, ok)
	}
	for _, id := range []string{"broken", "empty"} {
		if _, ok := m.AgentCredential(manager.BridgeBox, id); ok {
			t.Errorf("damaged record %s loaded", id)
		}
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if _, body := call(t, srv, "GET", "/metrics", "", ""); !strings.Contains(body, "dxpu_store_load_errors_total 3") {
		t.Fatal("damaged credential records not counted as load errors")
	}
}
