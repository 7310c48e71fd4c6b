package ctl

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// do runs one ctl call with o and returns what it printed.
func do(t *testing.T, o Options, f func(context.Context, Options) error) (string, error) {
	t.Helper()
	var out strings.Builder
	o.Stdout, o.Stdin = &out, strings.NewReader("")
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	err := f(context.Background(), o)
	t.Logf("%s(err %v)", out.String(), err)
	return out.String(), err
}

func TestCtl(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte("tok\n"), 0o600)
	boxFile := filepath.Join(dir, "box.json")
	os.WriteFile(boxFile, []byte(`{"id":"box0","bridge":{"switch_port":"veth-b0","mac":"02:00:00:00:01:00"},"location":{"pod":"p","rack":"r"},
	  "gpus":[{"id":"g0","model":"H100","memory_mib":81920},{"id":"g1","model":"H100","memory_mib":81920},{"id":"g2","model":"A100","memory_mib":40960}]}`), 0o600)
	hostFile := filepath.Join(dir, "host.json")
	os.WriteFile(hostFile, []byte(`{"id":"h1","bridge":{"switch_port":"veth-h1","mac":"02:00:00:00:02:01"},"ports":32}`), 0o600)
	o := Options{Manager: srv.URL, TokenFile: tokFile}
	js := o
	js.JSON = true

	// Without the token: refused, a failed run (exit status 1).
	_, err = do(t, Options{Manager: srv.URL}, func(ctx context.Context, o Options) error { return AddBox(ctx, o, boxFile) })
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("no token: %v", err)
	}
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return AddBox(ctx, o, boxFile) }); err != nil {
		t.Fatal(err)
	}
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return AddHost(ctx, o, hostFile) }); err != nil {
		t.Fatal(err)
	}
	out, err := do(t, js, func(ctx context.Context, o Options) error {
		return Allocate(ctx, o, pool.Request{Host: "h1", Count: 2, Model: "H100"})
	})
	if err != nil {
		t.Fatal(err)
	}
	var a pool.Allocation
	if err := json.Unmarshal([]byte(out), &a); err != nil || a.ID == "" || len(a.GPUs) != 2 || a.GPUs[0].GPU != "g0" {
		t.Fatalf("alloc --json printed %q (%v)", out, err)
	}
	out, _ = do(t, o, func(ctx context.Context, o Options) error { return Box(ctx, o, "") })
	if !strings.Contains(out, "box0") || !strings.Contains(out, "FREE") {
		t.Fatalf("box table: %q", out)
	}
	out, _ = do(t, o, func(ctx context.Context, o Options) error { return GPUs(ctx, o, "", "free") })
	if !strings.Contains(out, "g2") || strings.Contains(out, "g0 ") {
		t.Fatalf("free GPUs: %q", out)
	}
	out, _ = do(t, o, func(ctx context.Context, o Options) error { return Allocations(ctx, o, "") })
	if !strings.Contains(out, a.ID) || !strings.Contains(out, "g0,g1") {
		t.Fatalf("alloc list: %q", out)
	}
	out, _ = do(t, o, func(ctx context.Context, o Options) error { return Drain(ctx, o, "box0", true) })
	if !strings.Contains(out, "draining") || !strings.Contains(out, a.ID) {
		t.Fatalf("drain: %q", out)
	}
	_, err = do(t, o, func(ctx context.Context, o Options) error {
		return Allocate(ctx, o, pool.Request{Host: "h1", Count: 1})
	})
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "insufficient_gpus") {
		t.Fatalf("alloc on a drained pool: %v", err)
	}
	// An empty ID is refused before it becomes another route of the API
	// (DELETE /v1/allocations/).
	for _, f := range []func(context.Context, Options) error{
		func(ctx context.Context, o Options) error { return Free(ctx, o, []string{""}) },
		func(ctx context.Context, o Options) error { return Rekey(ctx, o, []string{".."}) },
		func(ctx context.Context, o Options) error { return Drain(ctx, o, "", true) },
		func(ctx context.Context, o Options) error { return SetHealth(ctx, o, ".", pool.Unhealthy) },
	} {
		if _, err := do(t, o, f); !errors.Is(err, apperr.ErrUsage) || !errors.Is(err, ctlclient.ErrBadID) {
			t.Errorf("an empty or dot ID: %v, want a usage error", err)
		}
	}
	// Several IDs, one refused: the error names the ones done before it
	// (a failed command prints no result; they were freed unseen).
	_, err = do(t, o, func(ctx context.Context, o Options) error { return Free(ctx, o, []string{a.ID, "nosuch"}) })
	if !errors.Is(err, apperr.ErrFailed) || !strings.Contains(err.Error(), "free nosuch: ") || !strings.HasSuffix(err.Error(), "(done before it: free "+a.ID+")") {
		t.Fatalf("free of a freed-then-unknown list: %v", err)
	}
	out, _ = do(t, js, Stats)
	var s pool.Stats
	if json.Unmarshal([]byte(out), &s) != nil || s.Used != 0 || s.Draining != 3 {
		t.Fatalf("stats %q", out)
	}
	out, _ = do(t, o, func(ctx context.Context, o Options) error { return Events(ctx, o, "h1", false) })
	if !strings.Contains(out, "allocated") || !strings.Contains(out, "released") || !strings.Contains(out, a.ID) {
		t.Fatalf("events: %q", out)
	}
	if _, err := do(t, o, func(ctx context.Context, o Options) error { return Allocate(ctx, o, pool.Request{Host: "h1"}) }); !errors.Is(err, apperr.ErrUsage) {
		t.Fatalf("alloc without --count: %v", err)
	}
	if _, err := do(t, Options{Manager: "not a url"}, func(ctx context.Context, o Options) error { return Box(ctx, o, "") }); !errors.Is(err, apperr.ErrUsage) {
		t.Fatalf("bad --manager: %v", err)
	}
}

func TestCtlHTTPS(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewTLSServer(m.Handler())
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
	if _, err := do(t, Options{Manager: srv.URL}, Stats); !errors.Is(err, apperr.ErrUsage) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	tok := filepath.Join(t.TempDir(), "token") // reads need a token too
	os.WriteFile(tok, []byte("tok\n"), 0o600)
	out, err := do(t, Options{Manager: srv.URL, CAFile: ca, TokenFile: tok, JSON: true}, Stats)
	if err != nil || !strings.Contains(out, `"gpus": 0`) {
		t.Fatalf("%q %v", out, err)
	}
}

// TestCtlShowsDegraded: an allocation whose pair its box's agent reports
// down past the bound is listed degraded, with the reason.
func TestCtlShowsDegraded(t *testing.T) {
	t.Parallel()
	m, err := manager.New(manager.Config{Token: "tok", DegradedAfter: time.Millisecond, ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL, "tok")
	ctx := context.Background()
	_, cred, err := c.RegisterBoxAgent(ctx, pool.Box{ID: "box0", AgentURL: "https://10.1.0.1:7701",
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00", IP: "10.1.0.1"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RegisterHost(ctx, pool.Host{ID: "h1", Bridge: pool.Endpoint{SwitchPort: "veth-h1", MAC: "02:00:00:00:02:01"}, Ports: 32}); err != nil {
		t.Fatal(err)
	}
	a, err := c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/link-down", srv.URL, a.GPUs[0].Pair), strings.NewReader(`{"reason":"peer silent for 1s"}`))
	req.Header.Set("Authorization", "Bearer "+cred)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("box agent's report: %v %v", resp, err)
	}
	resp.Body.Close()
	waitfor.Until(t, "the allocation degraded", func() bool {
		got, err := c.Allocation(ctx, a.ID)
		return err == nil && got.State == pool.StateDegraded
	})
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "token")
	os.WriteFile(tokFile, []byte("tok\n"), 0o600)
	out, err := do(t, Options{Manager: srv.URL, TokenFile: tokFile}, func(ctx context.Context, o Options) error { return Allocations(ctx, o, "") })
	if err != nil || !strings.Contains(out, "REASON") || !strings.Contains(out, "degraded") || !strings.Contains(out, "reported by box box0: peer silent for 1s") {
		t.Fatalf("ctl alloc list: %q %v, want the allocation degraded with its reason", out, err)
	}
}

// TestEventsSayHealth: a gpu_health event says which way the GPU's
// health went, "healthy": false then true in the API's JSON and
// healthy=false, healthy=true in ctl events' text (it said only that the
// health changed: new-user trial).
func TestEventsSayHealth(t *testing.T) {
	t.Parallel()
	o, _ := testManager(t, manager.Config{ReconcileInterval: -1})
	c := ctlclient.New(o.Manager, "tok")
	ctx := context.Background()
	if _, err := c.RegisterBox(ctx, pool.Box{ID: "box0", Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00"},
		GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []pool.Health{pool.Unhealthy, pool.Healthy} {
		if _, err := c.SetGPUHealth(ctx, "g0", h); err != nil {
			t.Fatal(err)
		}
	}
	events := func(ctx context.Context, o Options) error { return Events(ctx, o, "", false) }
	out, err := do(t, o, events)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "gpu_health") {
			lines = append(lines, l)
		}
	}
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "gpus=g0 healthy=false") || !strings.Contains(lines[1], "gpus=g0 healthy=true") {
		t.Fatalf("ctl events: %q %v, want two gpu_health lines, healthy=false then healthy=true", out, err)
	}
	o.JSON = true
	out, err = do(t, o, events)
	if err != nil || !strings.Contains(out, `"gpus":["g0"],"healthy":false`) || !strings.Contains(out, `"gpus":["g0"],"healthy":true`) {
		t.Fatalf("ctl events --json: %q %v, want healthy false then true", out, err)
	}
}
