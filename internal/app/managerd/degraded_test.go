package managerd

import (
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/fakeagent"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// fakeAgents are a GPU box's agent and a host's, fakes served over https,
// and the CA file that makes the manager trust them (httptest's servers
// share one certificate).
type fakeAgents struct {
	gpuAPI, hostAPI *agentapi.Server
	gpuURL, hostURL string
	ca              string
}

func newFakeAgents(t *testing.T) *fakeAgents {
	t.Helper()
	f := &fakeAgents{gpuAPI: agentapi.NewServer(fakeagent.New("gpu")), hostAPI: agentapi.NewServer(fakeagent.New("host"))}
	gpuSrv, hostSrv := httptest.NewTLSServer(f.gpuAPI), httptest.NewTLSServer(f.hostAPI)
	t.Cleanup(gpuSrv.Close)
	t.Cleanup(hostSrv.Close)
	f.gpuURL, f.hostURL = gpuSrv.URL, hostSrv.URL
	f.ca = filepath.Join(t.TempDir(), "agents-ca.pem")
	if err := os.WriteFile(f.ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: gpuSrv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// lend registers box0 (one GPU) and h1 with the manager c speaks to, hands
// each agent its credential and allocates the GPU to h1. It returns the
// allocation and the box agent's credential.
func (f *fakeAgents) lend(t *testing.T, c *ctlclient.Client) (pool.Allocation, string) {
	t.Helper()
	ctx := t.Context()
	_, boxCred, err := c.RegisterBoxAgent(ctx, pool.Box{ID: "box0", AgentURL: f.gpuURL,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00", IP: "10.1.0.1"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}})
	if err != nil {
		t.Fatal(err)
	}
	f.gpuAPI.SetCredential(boxCred)
	_, hostCred, err := c.RegisterHostAgent(ctx, pool.Host{ID: "h1", AgentURL: f.hostURL,
		Bridge: pool.Endpoint{SwitchPort: "veth-h1", MAC: "02:00:00:00:02:01", IP: "10.2.0.1"}, Ports: pool.MinHostPorts})
	if err != nil {
		t.Fatal(err)
	}
	f.hostAPI.SetCredential(hostCred)
	a, err := c.Allocate(ctx, pool.Request{Host: "h1", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	return a, boxCred
}

// TestDegradedAllocation runs the daemon (--agent-ca-file, --degraded-after
// 50ms, the rest default) with fake agents over https: a pair its box's
// agent reports down past the bound is degraded, with the reason, in the
// API, the events and the metrics, and active again once the agent
// reports the link up.
func TestDegradedAllocation(t *testing.T) {
	agents := newFakeAgents(t)
	base, admin, _ := startManager(t, helperAgentCAEnv+"="+agents.ca, helperDegradedAfterEnv+"=50ms")
	c := ctlclient.New(base, admin)
	ctx := t.Context()
	a, boxCred := agents.lend(t, c)
	_, since, err := c.Events(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	pair := a.GPUs[0].Pair
	report := func(what string) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/link-%s", base, pair, what), strings.NewReader(`{"reason":"peer silent for 1s"}`))
		req.Header.Set("Authorization", "Bearer "+boxCred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("link-%s report: %d %s", what, resp.StatusCode, b)
		}
		return string(b)
	}
	degraded := func() string {
		t.Helper()
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "dxpu_allocations_degraded "); ok {
				return v
			}
		}
		return ""
	}

	report("down")
	waitfor.Until(t, "the allocation degraded", func() bool {
		got, err := c.Allocation(ctx, a.ID)
		return err == nil && got.State == pool.StateDegraded
	})
	got, err := c.Allocation(ctx, a.ID)
	if err != nil || got.Degraded == nil || !strings.Contains(got.Degraded.Reason, "reported by box box0: peer silent for 1s") {
		t.Fatalf("degraded allocation: %+v %v, want the reason", got.Degraded, err)
	}
	evs, next, err := c.Events(ctx, since, "h1", 0)
	if err != nil || len(evs) != 1 || evs[0].Type != manager.EventAllocationDegraded || evs[0].Reason != got.Degraded.Reason {
		t.Fatalf("events: %+v %v, want allocation_degraded with the reason", evs, err)
	}
	if v := degraded(); v != "1" {
		t.Fatalf("dxpu_allocations_degraded %q, want 1", v)
	}

	if body := report("up"); !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("link-up answered %s, want active", body)
	}
	if got, err := c.Allocation(ctx, a.ID); err != nil || got.State != pool.StateActive || got.Degraded != nil {
		t.Fatalf("after link-up: %+v %v, want active", got, err)
	}
	if evs, _, err := c.Events(ctx, next, "h1", 0); err != nil || len(evs) != 1 || evs[0].Type != manager.EventAllocationRecovered {
		t.Fatalf("events after link-up: %+v %v, want allocation_recovered", evs, err)
	}
	if v := degraded(); v != "0" {
		t.Fatalf("dxpu_allocations_degraded after link-up %q, want 0", v)
	}
}

// TestDegradedAfterFromOptions: --degraded-after reaches the manager: a
// pair its agent reports down degrades its allocation after 50ms, not
// after the 10s default. A Run that left the option out of the manager's
// configuration degrades it no sooner than manager.DefaultDegradedAfter
// after the report (the manager's timer starts when it takes the report,
// after the test noted the time): the test waits for the degradation,
// however long, and fails on the time it took.
func TestDegradedAfterFromOptions(t *testing.T) {
	agents := newFakeAgents(t)
	d := startDaemon(t, Options{AgentCAFile: agents.ca, DegradedAfter: 50 * time.Millisecond})
	c := ctlclient.New(d.base, d.admin)
	ctx := t.Context()
	a, boxCred := agents.lend(t, c)
	reported := time.Now()
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
	waitfor.Until(t, "the allocation degraded", func() bool {
		got, err := c.Allocation(ctx, a.ID)
		return err == nil && got.State == pool.StateDegraded
	})
	if took := time.Since(reported); took >= manager.DefaultDegradedAfter {
		t.Fatalf("allocation degraded %v after the report, not before the %v default: --degraded-after 50ms not applied", took, manager.DefaultDegradedAfter)
	}
}
