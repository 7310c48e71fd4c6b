package agentapi_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

const adminToken = "admin-token-never-sent-to-agents"

// seen records what reached an agent: every Authorization header and body.
type seen struct {
	mu    sync.Mutex
	auths []string
	texts []string
}

func (s *seen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.texts = append(s.texts, r.Header.Get("Authorization")+"\n"+r.URL.String()+"\n"+string(body))
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		h.ServeHTTP(w, r)
	})
}

func (s *seen) snapshot() ([]string, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...), append([]string(nil), s.texts...)
}

// tlsAgent is a fake bridge agent behind an https server.
type tlsAgent struct {
	fake *fakeagent.Agent
	api  *agentapi.Server
	srv  *httptest.Server
	seen *seen
}

func newTLSAgent(t *testing.T, name string) *tlsAgent {
	t.Helper()
	a := &tlsAgent{fake: fakeagent.New(name), seen: &seen{}}
	a.api = agentapi.NewServer(a.fake)
	a.srv = httptest.NewTLSServer(a.seen.wrap(a.api))
	t.Cleanup(a.srv.Close)
	return a
}

func writeCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agents-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestManagerCallsEachAgentWithItsOwnCredential repeats the attack "the
// manager sends its own admin token to every bridge agent": over https, each
// agent receives its own credential on every call, never the admin token
// and never another agent's credential, in a header or a body.
func TestManagerCallsEachAgentWithItsOwnCredential(t *testing.T) {
	t.Parallel()
	gpu, host := newTLSAgent(t, "gpu"), newTLSAgent(t, "host")
	cl, err := agentapi.NewClient(agentapi.ClientConfig{CAFile: writeCA(t, gpu.srv)}) // httptest shares one certificate
	if err != nil {
		t.Fatal(err)
	}
	m, err := manager.New(manager.Config{GPUBridge: agentapi.GPUSide{Client: cl}, HostBridge: agentapi.HostSide{Client: cl},
		Token: adminToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL, adminToken)
	ctx := context.Background()
	_, gcred, err := c.RegisterBoxAgent(ctx, pool.Box{ID: "b", AgentURL: gpu.srv.URL, Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01", IP: "10.0.0.1"},
		GPUs: []pool.GPU{{ID: "b-0", Model: "H100"}, {ID: "b-1", Model: "H100"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, hcred, err := c.RegisterHostAgent(ctx, pool.Host{ID: "h", AgentURL: host.srv.URL, Bridge: pool.Endpoint{SwitchPort: "p2", MAC: "02:00:00:00:00:02", IP: "10.0.0.2"}, Ports: 32})
	if err != nil {
		t.Fatal(err)
	}
	if len(gcred) != 64 || len(hcred) != 64 || gcred == hcred {
		t.Fatalf("credentials %q and %q: want two different 256-bit (64 hex digit) credentials", gcred, hcred)
	}
	gpu.api.SetCredential(gcred)
	host.api.SetCredential(hcred)

	a, err := c.Allocate(ctx, pool.Request{Host: "h", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetGPUHealth(ctx, a.GPUs[0].GPU, pool.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Free(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if len(gpu.fake.Pairs()) != 0 || len(host.fake.Surprises()) != 1 {
		t.Fatalf("the saga did not reach the agents: gpu pairs %v, surprises %v", gpu.fake.Pairs(), host.fake.Surprises())
	}
	for _, ag := range []struct {
		name        string
		a           *tlsAgent
		own, others string
	}{{"gpu", gpu, gcred, hcred}, {"host", host, hcred, gcred}} {
		auths, texts := ag.a.seen.snapshot()
		if len(auths) < 3 {
			t.Fatalf("%s agent saw %d calls", ag.name, len(auths))
		}
		for i, h := range auths {
			if h != "Bearer "+ag.own {
				t.Errorf("%s agent call %d carried %q, want its own credential", ag.name, i, h)
			}
		}
		for _, text := range texts {
			if strings.Contains(text, adminToken) || strings.Contains(text, ag.others) {
				t.Errorf("%s agent received the admin token or the other agent's credential:\n%s", ag.name, text)
			}
		}
	}
	// The agents accept only their own credential.
	for _, tok := range []string{hcred, adminToken, ""} {
		req, _ := http.NewRequest("PUT", gpu.srv.URL+"/agent/v1/pairs/9", strings.NewReader(`{"id":9}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := gpu.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("gpu agent with token %.8q...: %d, want 401", tok, resp.StatusCode)
		}
	}
	if len(gpu.fake.Pairs()) != 0 {
		t.Fatal("a refused call programmed a pair")
	}
	// Reads of the inventory never show a credential.
	for _, get := range []func() (any, error){
		func() (any, error) { return c.Boxes(ctx) },
		func() (any, error) { return c.Hosts(ctx) },
	} {
		v, err := get()
		if err != nil {
			t.Fatal(err)
		}
		if s := fmtAny(v); strings.Contains(s, gcred) || strings.Contains(s, hcred) {
			t.Fatalf("inventory shows a credential: %s", s)
		}
	}
}

// TestAgentWithoutCredentialRefusesAll: an agent whose bridge is not yet
// registered runs closed, not open.
func TestAgentWithoutCredentialRefusesAll(t *testing.T) {
	t.Parallel()
	fake := fakeagent.New("gpu")
	srv := httptest.NewServer(agentapi.NewServer(fake))
	defer srv.Close()
	for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
		req, _ := http.NewRequest("PUT", srv.URL+"/agent/v1/pairs/5", strings.NewReader(`{"id":5}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "no credential") {
			t.Errorf("auth %q: %d %s, want 401 saying the agent has no credential", auth, resp.StatusCode, b)
		}
	}
	if len(fake.Pairs()) != 0 {
		t.Fatal("an agent without a credential programmed a pair")
	}
}

// TestClientRefusesToExposeACredential: plain http (without the lab
// option), an untrusted certificate, a redirect and a missing credential
// all fail before the credential reaches anyone.
func TestClientRefusesToExposeACredential(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := func(url string) manager.Pair {
		return manager.Pair{ID: 3, GPUAgent: url, GPUAgentCredential: "cred-3"}
	}
	plainSeen, trapSeen := &seen{}, &seen{}
	plain := httptest.NewServer(plainSeen.wrap(agentapi.Handler(fakeagent.New("p"), "cred-3")))
	defer plain.Close()
	strict, err := agentapi.NewClient(agentapi.ClientConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := (agentapi.GPUSide{Client: strict}).ProgramPair(ctx, pair(plain.URL)); !errors.Is(err, agentapi.ErrInsecureAgent) {
		t.Fatalf("plain http agent: %v, want ErrInsecureAgent", err)
	}
	// A certificate nobody configured is not trusted.
	untrusted := httptest.NewTLSServer(plainSeen.wrap(http.NotFoundHandler()))
	defer untrusted.Close()
	if err := (agentapi.GPUSide{Client: strict}).ProgramPair(ctx, pair(untrusted.URL)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted agent certificate: %v", err)
	}
	if auths, _ := plainSeen.snapshot(); len(auths) != 0 {
		t.Fatalf("a refused call reached an agent: %q", auths)
	}
	// A redirect is not followed (it could lead the credential elsewhere).
	trap := httptest.NewTLSServer(trapSeen.wrap(http.NotFoundHandler()))
	defer trap.Close()
	redirector := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, trap.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	roots := x509.NewCertPool()
	roots.AddCert(redirector.Certificate())
	trusting, err := agentapi.NewClient(agentapi.ClientConfig{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	err = (agentapi.GPUSide{Client: trusting}).ProgramPair(ctx, pair(redirector.URL))
	if !agentapi.IsAgentError(err) || !strings.Contains(err.Error(), "307") {
		t.Fatalf("redirecting agent: %v, want the 307 as an agent error", err)
	}
	if auths, _ := trapSeen.snapshot(); len(auths) != 0 {
		t.Fatalf("the redirect was followed: %q", auths)
	}
	// No credential: no call.
	p := pair(plain.URL)
	p.GPUAgentCredential = ""
	lab := &agentapi.Client{AllowInsecure: true}
	if err := (agentapi.GPUSide{Client: lab}).ProgramPair(ctx, p); !errors.Is(err, agentapi.ErrNoCredential) {
		t.Fatalf("no credential: %v, want ErrNoCredential", err)
	}
	if auths, _ := plainSeen.snapshot(); len(auths) != 0 {
		t.Fatalf("a call without a credential was sent: %q", auths)
	}
	// The lab option reaches a plain http agent, with the credential.
	if err := (agentapi.GPUSide{Client: lab}).ProgramPair(ctx, pair(plain.URL)); err != nil {
		t.Fatal(err)
	}
	if _, err := agentapi.NewClient(agentapi.ClientConfig{CAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Fatalf("missing CA file: %v", err)
	}
}

// TestHTTPAgentURLRefusedWithoutLabOption: the manager will not register an
// agent it would reach over plain http.
func TestHTTPAgentURLRefusedWithoutLabOption(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: adminToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL, adminToken)
	ctx := context.Background()
	_, _, err = c.RegisterBoxAgent(ctx, pool.Box{ID: "b", AgentURL: "http://10.0.0.7:7701", Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01"}})
	if !ctlclient.IsCode(err, manager.CodeInvalid) || !strings.Contains(err.Error(), "agent_url") || !strings.Contains(err.Error(), "https") {
		t.Fatalf("http agent_url: %v, want 400 invalid_argument naming agent_url and https", err)
	}
	_, _, err = c.RegisterHostAgent(ctx, pool.Host{ID: "h", AgentURL: "http://10.0.0.8:7701", Bridge: pool.Endpoint{SwitchPort: "p2", MAC: "02:00:00:00:00:02"}, Ports: 32})
	if !ctlclient.IsCode(err, manager.CodeInvalid) {
		t.Fatalf("http agent_url for a host: %v", err)
	}
	if s, _ := c.Stats(ctx); s.Boxes != 0 || s.Hosts != 0 {
		t.Fatalf("refused registrations were kept: %+v", s)
	}
}

// TestCredentialLifecycle: kept across re-registration with the same URL
// and across a restart, replaced for a new URL, dropped with the agent URL
// or the bridge.
func TestCredentialLifecycle(t *testing.T) {
	t.Parallel()
	st := store.NewMemory()
	start := func() (*manager.Manager, *ctlclient.Client) {
		m, err := manager.New(manager.Config{Store: st, Token: adminToken, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ReconcileInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(m.Handler())
		t.Cleanup(func() { srv.Close(); m.Close() })
		return m, ctlclient.New(srv.URL, adminToken)
	}
	m, c := start()
	ctx := context.Background()
	b := pool.Box{ID: "b", AgentURL: "https://10.0.0.7:7701", Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01", IP: "10.0.0.7"}}
	_, first, err := c.RegisterBoxAgent(ctx, b)
	if err != nil || first == "" {
		t.Fatalf("%q %v", first, err)
	}
	if got, ok := m.AgentCredential(manager.BridgeBox, "b"); !ok || got != first {
		t.Fatalf("AgentCredential: %q %v", got, ok)
	}
	if _, again, _ := c.RegisterBoxAgent(ctx, b); again != first {
		t.Fatal("re-registering with the same agent_url changed the credential")
	}
	m.Close()
	m2, c2 := start()
	if _, again, _ := c2.RegisterBoxAgent(ctx, b); again != first {
		t.Fatal("a restarted manager forgot the credential")
	}
	b.AgentURL = "https://10.0.0.9:7701"
	_, moved, err := c2.RegisterBoxAgent(ctx, b)
	if err != nil || moved == "" || moved == first {
		t.Fatalf("a new agent_url kept the old credential (%v)", err)
	}
	b.AgentURL = ""
	if _, none, _ := c2.RegisterBoxAgent(ctx, b); none != "" {
		t.Fatal("a bridge without agent_url got a credential")
	}
	if _, ok := m2.AgentCredential(manager.BridgeBox, "b"); ok {
		t.Fatal("the credential outlived the agent_url")
	}
	b.AgentURL = "https://10.0.0.9:7701"
	c2.RegisterBoxAgent(ctx, b)
	if _, err := c2.RemoveBox(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, ok := m2.AgentCredential(manager.BridgeBox, "b"); ok {
		t.Fatal("the credential outlived its box")
	}
	if kvs, _ := st.List(ctx, "cred/"); len(kvs) != 0 {
		t.Fatalf("store keeps credentials of removed bridges: %+v", kvs)
	}
}

func fmtAny(v any) string { b, _ := json.Marshal(v); return string(b) }
