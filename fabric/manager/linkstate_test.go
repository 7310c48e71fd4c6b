package manager_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/fakeagent"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// linkEnv is a manager with fake agents, bound degradedAfter, one box of
// two GPUs and one host, both with agents, and an allocation of both GPUs.
type linkEnv struct {
	srv               *httptest.Server
	c                 *ctlclient.Client
	boxCred, hostCred string
	a                 pool.Allocation
}

func newLinkEnv(t *testing.T, degradedAfter time.Duration) *linkEnv {
	t.Helper()
	m, err := manager.New(manager.Config{GPUBridge: fakeagent.New("gpu"), HostBridge: fakeagent.New("host"),
		Token: token, Logger: quiet(), ReconcileInterval: -1, DegradedAfter: degradedAfter})
	if err != nil {
		t.Fatal(err)
	}
	e := &linkEnv{srv: httptest.NewServer(m.Handler())}
	t.Cleanup(func() { e.srv.Close(); m.Close() })
	e.c = ctlclient.New(e.srv.URL, token)
	ctx := t.Context()
	box := testBox(0, 2)
	box.AgentURL = "https://10.1.0.1:7701"
	if _, e.boxCred, err = e.c.RegisterBoxAgent(ctx, box); err != nil {
		t.Fatal(err)
	}
	h := testHost(0)
	h.AgentURL = "https://10.2.0.1:7701"
	if _, e.hostCred, err = e.c.RegisterHostAgent(ctx, h); err != nil {
		t.Fatal(err)
	}
	if e.a, err = e.c.Allocate(ctx, pool.Request{Host: "host0", Count: 2}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *linkEnv) report(t *testing.T, cred, what string, pair uint32) string {
	t.Helper()
	st, body := call(t, e.srv, http.MethodPost, fmt.Sprintf("/v1/agent/pairs/%d/link-%s", pair, what), cred, `{"reason":"peer silent for 1s"}`)
	if st != http.StatusOK {
		t.Fatalf("link-%s report on pair %d: %d %s", what, pair, st, body)
	}
	return body
}

func (e *linkEnv) alloc(t *testing.T) pool.Allocation {
	t.Helper()
	a, err := e.c.Allocation(t.Context(), e.a.ID)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *linkEnv) metric(t *testing.T, name string) string {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/metrics")
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

// TestLinkDownWithinTheBoundIsNotDegraded: a box agent's link-down report
// alone does not degrade the allocation before the bound passes, and fails
// no GPU.
func TestLinkDownWithinTheBoundIsNotDegraded(t *testing.T) {
	t.Parallel()
	e := newLinkEnv(t, time.Hour)
	if body := e.report(t, e.boxCred, "down", e.a.GPUs[0].Pair); !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("report answered %s, want the allocation active", body)
	}
	if a := e.alloc(t); a.State != pool.StateActive || a.Degraded != nil || len(a.GPUs) != 2 {
		t.Fatalf("allocation within the bound: %+v, want active with both GPUs", a)
	}
}

// TestLinkDownPastTheBoundDegrades: a pair its box's agent reports down
// stays down past the bound: the allocation is degraded with the reason
// (API, event, metric), and active again once an agent reports the link
// up. Its GPUs stay lent and healthy throughout.
func TestLinkDownPastTheBoundDegrades(t *testing.T) {
	t.Parallel()
	e := newLinkEnv(t, time.Millisecond)
	ctx := t.Context()
	_, since, err := e.c.Events(ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	down := e.a.GPUs[1]
	e.report(t, e.boxCred, "down", down.Pair)
	waitfor.Until(t, "the allocation degraded", func() bool { return e.alloc(t).State == pool.StateDegraded })
	a := e.alloc(t)
	if a.Degraded == nil || len(a.Degraded.Pairs) != 1 || a.Degraded.Pairs[0] != down.Pair || a.Degraded.Since.IsZero() {
		t.Fatalf("degraded allocation: %+v, want pair %d named", a.Degraded, down.Pair)
	}
	for _, want := range []string{fmt.Sprintf("pair %d", down.Pair), down.GPU, "box box0", "peer silent for 1s"} {
		if !strings.Contains(a.Degraded.Reason, want) {
			t.Errorf("reason %q does not name %q", a.Degraded.Reason, want)
		}
	}
	if len(a.GPUs) != 2 || len(a.Lost) != 0 {
		t.Fatalf("degraded allocation lost GPUs: %+v", a)
	}
	list, err := e.c.Allocations(ctx, "host0")
	if err != nil || len(list) != 1 || list[0].State != pool.StateDegraded {
		t.Fatalf("allocation list: %+v %v, want it degraded", list, err)
	}
	if g, err := e.c.GPUs(ctx, "box0", "unhealthy"); err != nil || len(g) != 0 {
		t.Fatalf("unhealthy GPUs after a box's report: %+v %v, want none", g, err)
	}
	evs, next, err := e.c.Events(ctx, since, "host0", 0)
	if err != nil || len(evs) != 1 || evs[0].Type != manager.EventAllocationDegraded || evs[0].Pair != down.Pair || evs[0].Reason != a.Degraded.Reason {
		t.Fatalf("events: %+v %v, want one allocation_degraded with the reason", evs, err)
	}
	if got := e.metric(t, "dxpu_allocations_degraded"); got != "1" {
		t.Fatalf("dxpu_allocations_degraded %q, want 1", got)
	}
	// A second report on the same pair changes nothing.
	e.report(t, e.boxCred, "down", down.Pair)
	if got := e.metric(t, "dxpu_allocation_degradations_total"); got != "1" {
		t.Fatalf("dxpu_allocation_degradations_total %q, want 1", got)
	}

	// The link is up again (either end may say so).
	if body := e.report(t, e.hostCred, "up", down.Pair); !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("link-up answered %s, want the allocation active", body)
	}
	if a := e.alloc(t); a.State != pool.StateActive || a.Degraded != nil {
		t.Fatalf("after link-up: %+v, want active", a)
	}
	evs, _, err = e.c.Events(ctx, next, "host0", 0)
	if err != nil || len(evs) != 1 || evs[0].Type != manager.EventAllocationRecovered || evs[0].Pair != down.Pair {
		t.Fatalf("events after link-up: %+v %v, want allocation_recovered", evs, err)
	}
	if got := e.metric(t, "dxpu_allocations_degraded"); got != "0" {
		t.Fatalf("dxpu_allocations_degraded after link-up %q, want 0", got)
	}

	// Down again, then released: nothing stays degraded.
	e.report(t, e.boxCred, "down", down.Pair)
	waitfor.Until(t, "the allocation degraded again", func() bool { return e.alloc(t).State == pool.StateDegraded })
	if _, err := e.c.Free(ctx, e.a.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.metric(t, "dxpu_allocations_degraded"); got != "0" {
		t.Fatalf("dxpu_allocations_degraded after release %q, want 0", got)
	}
}

// probeLog is a slog.Handler that calls fn when the manager logs msg: the
// moment the manager says a state changed, from which a client may see it.
type probeLog struct {
	msg string
	fn  func()
}

func (p probeLog) Enabled(context.Context, slog.Level) bool { return true }
func (p probeLog) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p probeLog) WithGroup(string) slog.Handler            { return p }
func (p probeLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == p.msg {
		p.fn()
	}
	return nil
}

// TestDegradedEventBeforeState: by the time anything shows an allocation
// degraded or recovered (the API's state, the log), its event is in the
// log. The event used to go in last, and a client that saw the state
// found no event (TestDegradedAllocation under `make stress`).
func TestDegradedEventBeforeState(t *testing.T) {
	t.Parallel()
	var c *ctlclient.Client
	var since uint64
	found := map[string]chan int{"allocation degraded: a pair's link stays down": make(chan int, 1), "pair link up again": make(chan int, 1)}
	var handlers []slog.Handler
	for msg, ch := range found {
		handlers = append(handlers, probeLog{msg, func() {
			evs, _, err := c.Events(context.Background(), since, "host0", 0)
			if err != nil {
				t.Errorf("events at %q: %v", msg, err)
			}
			ch <- len(evs)
		}})
	}
	m, err := manager.New(manager.Config{GPUBridge: fakeagent.New("gpu"), HostBridge: fakeagent.New("host"),
		Token: token, Logger: slog.New(slog.NewMultiHandler(handlers...)), ReconcileInterval: -1, DegradedAfter: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(func() { srv.Close(); m.Close() })
	c = ctlclient.New(srv.URL, token)
	e := &linkEnv{srv: srv, c: c}
	ctx := t.Context()
	box := testBox(0, 2)
	box.AgentURL = "https://10.1.0.1:7701"
	if _, e.boxCred, err = c.RegisterBoxAgent(ctx, box); err != nil {
		t.Fatal(err)
	}
	h := testHost(0)
	h.AgentURL = "https://10.2.0.1:7701"
	if _, e.hostCred, err = c.RegisterHostAgent(ctx, h); err != nil {
		t.Fatal(err)
	}
	if e.a, err = c.Allocate(ctx, pool.Request{Host: "host0", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, since, err = c.Events(ctx, 0, "", 0); err != nil {
		t.Fatal(err)
	}
	e.report(t, e.boxCred, "down", e.a.GPUs[0].Pair)
	if n := <-found["allocation degraded: a pair's link stays down"]; n != 1 {
		t.Fatalf("the manager logged the allocation degraded with %d events since, want its allocation_degraded", n)
	}
	e.report(t, e.boxCred, "up", e.a.GPUs[0].Pair)
	if n := <-found["pair link up again"]; n != 2 {
		t.Fatalf("the manager logged the pair up again with %d events since, want allocation_degraded and allocation_recovered", n)
	}
}
