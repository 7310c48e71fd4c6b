package agentapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/manager/agentapi"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// TestManagerDrivesRemoteAgents runs a manager whose saga steps go over
// HTTP to a box agent and a host agent (fake agents behind Handler).
func TestManagerDrivesRemoteAgents(t *testing.T) {
	gpu, host := fakeagent.New("gpu"), fakeagent.New("host")
	gagent, hagent := agentapi.NewServer(gpu), agentapi.NewServer(host)
	gsrv := httptest.NewServer(gagent)
	defer gsrv.Close()
	hsrv := httptest.NewServer(hagent)
	defer hsrv.Close()
	cl := &agentapi.Client{AllowInsecure: true} // plain http here; TLS in security_test.go
	m, err := manager.New(manager.Config{GPUBridge: agentapi.GPUSide{Client: cl}, HostBridge: agentapi.HostSide{Client: cl}, Token: "t",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), AllowInsecureAgents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL, "t")
	ctx := context.Background()
	_, gcred, err := c.RegisterBoxAgent(ctx, pool.Box{ID: "b", AgentURL: gsrv.URL, Bridge: pool.Endpoint{SwitchPort: "p1", MAC: "02:00:00:00:00:01", IP: "10.0.0.1"},
		GPUs: []pool.GPU{{ID: "b-0", Model: "H100"}, {ID: "b-1", Model: "H100"}, {ID: "b-2", Model: "H100"}}})
	if err != nil {
		t.Fatal(err)
	}
	gagent.SetCredential(gcred)
	_, hcred, err := c.RegisterHostAgent(ctx, pool.Host{ID: "h", AgentURL: hsrv.URL, Bridge: pool.Endpoint{SwitchPort: "p2", MAC: "02:00:00:00:00:02", IP: "10.0.0.2"}, Ports: 32})
	if err != nil {
		t.Fatal(err)
	}
	hagent.SetCredential(hcred)
	a, err := c.Allocate(ctx, pool.Request{Host: "h", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{a.GPUs[0].Pair, a.GPUs[1].Pair}
	if !slices.Equal(gpu.Pairs(), want) || !slices.Equal(host.HotAdded(), want) {
		t.Fatalf("gpu agent %v, host agent hot-added %v, want %v", gpu.Pairs(), host.HotAdded(), want)
	}
	listed, err := cl.ListPairs(ctx, gsrv.URL, gcred)
	if err != nil || len(listed) != 2 || listed[0].GPUAgent != gsrv.URL || listed[0].BDF != "" && listed[0].Box != "b" {
		t.Fatalf("%+v %v", listed, err)
	}
	// An agent failure rolls the saga back across HTTP.
	host.FailNth(fakeagent.OpHotAdd, 1)
	_, err = c.Allocate(ctx, pool.Request{Host: "h", Count: 1})
	if !ctlclient.IsCode(err, manager.CodeAgentFailed) || !strings.Contains(err.Error(), "hot_add") {
		t.Fatalf("%v", err)
	}
	if !slices.Equal(gpu.Pairs(), want) {
		t.Fatalf("rollback left %v", gpu.Pairs())
	}
	if _, err := c.SetGPUHealth(ctx, a.GPUs[0].GPU, pool.Unhealthy); err != nil {
		t.Fatal(err)
	}
	if s := host.Surprises(); len(s) != 1 || s[0].ID != want[0] {
		t.Fatalf("surprise %+v", s)
	}
	// Reconciliation reaches the agents over HTTP too: a stray pair on the
	// box agent goes, a pair the host agent lost comes back.
	gpu.ProgramPair(ctx, manager.Pair{ID: 777, Allocation: "stray"})
	host.RemovePair(ctx, manager.Pair{ID: want[1]})
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gpu.Pairs(), want[1:]) || !slices.Equal(host.HotAdded(), want[1:]) {
		t.Fatalf("after reconcile: gpu %v host hot-added %v, want %v", gpu.Pairs(), host.HotAdded(), want[1:])
	}
	if _, err := c.Free(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if len(gpu.Pairs()) != 0 || len(host.Pairs()) != 0 {
		t.Fatalf("after free: %v %v", gpu.Pairs(), host.Pairs())
	}
}

// gpuOnly hides the fake's host-bridge methods.
type gpuOnly struct{ *fakeagent.Agent }

func (g gpuOnly) ProgramPair(ctx context.Context, p manager.Pair) error {
	return g.Agent.ProgramPair(ctx, p)
}
func (g gpuOnly) RemovePair(ctx context.Context, p manager.Pair) error {
	return g.Agent.RemovePair(ctx, p)
}

func TestHandlerRefusals(t *testing.T) {
	gpu := fakeagent.New("gpu")
	srv := httptest.NewServer(agentapi.Handler(struct{ agentapi.PairProgrammer }{gpuOnly{gpu}}, "tok"))
	defer srv.Close()
	for _, tc := range []struct {
		method, path, body, auth string
		status                   int
	}{
		{"PUT", "/agent/v1/pairs/5", `{"id":5}`, "", 401},
		{"PUT", "/agent/v1/pairs/5", `{"id":6}`, "tok", 400},
		{"PUT", "/agent/v1/pairs/5", `{"id":5,"x":1}`, "tok", 400},
		{"PUT", "/agent/v1/pairs/99999999", `{"id":99999999}`, "tok", 400},
		{"POST", "/agent/v1/pairs/5/hot-add", `{"id":5}`, "tok", 404}, // a GPU agent has no hot-plug
		{"PUT", "/agent/v1/pairs/5", `{"id":5,"allocation":"a"}`, "tok", 204},
		{"GET", "/agent/v1/pairs", ``, "tok", 404}, // and does not list
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		if tc.auth != "" {
			req.Header.Set("Authorization", "Bearer "+tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s %s: %d, want %d", tc.method, tc.path, tc.body, resp.StatusCode, tc.status)
		}
	}
	if !slices.Equal(gpu.Pairs(), []uint32{5}) {
		t.Fatalf("pairs %v", gpu.Pairs())
	}
}
