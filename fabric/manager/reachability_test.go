package manager_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// perAgent is a GPU bridge programmer that reaches one agent per box
// (manager.AgentPairLister), whose agents at the URLs in dead do not
// answer.
type perAgent struct {
	*fakeagent.Agent
	mu   sync.Mutex
	dead map[string]bool
}

func (p *perAgent) ListPairsAt(ctx context.Context, url, _ string) ([]manager.Pair, error) {
	p.mu.Lock()
	dead := p.dead[url]
	p.mu.Unlock()
	if dead {
		return nil, fmt.Errorf("dial %s: connection refused", url)
	}
	return p.ListPairs(ctx)
}

func (p *perAgent) setDead(url string, on bool) {
	p.mu.Lock()
	p.dead[url] = on
	p.mu.Unlock()
}

// TestUnreachableBoxIsReportedNotRemoved: a box whose agent stops
// answering the reconciler is, past the bound (here: the second failing
// pass), reported unreachable with the reason: the box and its GPU in the
// API, the allocation holding the GPU degraded saying so, a box_unreachable
// event, dxpu_boxes_unreachable 1. Its GPU stays healthy and lent, the
// host is asked to remove nothing, the other box is untouched. The agent
// answering again clears all of it (box_reachable, the allocation active).
func TestUnreachableBoxIsReportedNotRemoved(t *testing.T) {
	t.Parallel()
	gpu := &perAgent{Agent: fakeagent.New("gpu"), dead: map[string]bool{}}
	host := fakeagent.New("host")
	m, err := manager.New(manager.Config{Store: store.NewMemory(), GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1, UnreachableAfter: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL, token)
	ctx := context.Background()
	for i := range 2 {
		b := testBox(i, 1)
		b.AgentURL = fmt.Sprintf("https://10.1.0.%d:7701", i+1)
		if _, err := c.RegisterBox(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := c.Allocate(ctx, pool.Request{Host: "host0", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	gpu.setDead("https://10.1.0.1:7701", true)
	for range 2 { // the first failure starts the run, the next is past the 1 ns bound
		if err := m.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b0, err := c.Box(ctx, "box0")
	if err != nil {
		t.Fatal(err)
	}
	if b0.Unreachable == nil || !strings.Contains(b0.Unreachable.Reason, "connection refused") || b0.GPUs[0].Unreachable == nil {
		t.Fatalf("box0 with its agent silent: %+v", b0)
	}
	if b1, err := c.Box(ctx, "box1"); err != nil || b1.Unreachable != nil {
		t.Fatalf("box1, whose agent answers: %+v %v", b1, err)
	}
	gs, err := c.GPUs(ctx, "box0", "")
	if err != nil || len(gs) != 1 || gs[0].Health != pool.Healthy || gs[0].Allocation != a.ID || gs[0].Unreachable == nil {
		t.Fatalf("box0's GPU: %+v %v, want healthy, still lent to %s, marked unreachable", gs, err, a.ID)
	}
	got, err := c.Allocation(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != pool.StateDegraded || got.Degraded == nil || !strings.Contains(got.Degraded.Reason, "box0") || len(got.GPUs) != 2 {
		t.Fatalf("the allocation with box0 unreachable: %s %+v (%d GPUs)", got.State, got.Degraded, len(got.GPUs))
	}
	if n := host.Calls(fakeagent.OpHotRemove) + host.Calls(fakeagent.OpSurpriseRemove) + host.Calls(fakeagent.OpRemove); n != 0 {
		t.Fatalf("the host was asked to remove %d times", n)
	}
	evs, _, err := c.Events(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !hasEvent(evs, manager.EventBoxUnreachable, "box0") {
		t.Fatalf("no box_unreachable event for box0: %+v", evs)
	}
	if v := scrape(t, srv.URL, "dxpu_boxes_unreachable"); v != "1" {
		t.Fatalf("dxpu_boxes_unreachable %s, want 1", v)
	}

	gpu.setDead("https://10.1.0.1:7701", false)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if b0, err := c.Box(ctx, "box0"); err != nil || b0.Unreachable != nil {
		t.Fatalf("box0 answering again: %+v %v", b0, err)
	}
	if got, err := c.Allocation(ctx, a.ID); err != nil || got.State != pool.StateActive {
		t.Fatalf("the allocation once box0 answers: %+v %v", got, err)
	}
	evs, _, _ = c.Events(ctx, 0, "", 0)
	if !hasEvent(evs, manager.EventBoxReachable, "box0") {
		t.Fatalf("no box_reachable event for box0: %+v", evs)
	}
}

func hasEvent(evs []ctlclient.Event, typ, box string) bool {
	for _, e := range evs {
		if e.Type == typ && e.Box == box {
			return true
		}
	}
	return false
}

// scrape returns the value of an unlabelled metric on /metrics.
func scrape(t *testing.T, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	t.Fatalf("no %s on /metrics", name)
	return ""
}
