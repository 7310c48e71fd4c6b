package manager_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestAgentReportsLinkDown: a host bridge's agent reports, with its own
// credential, that a pair's link went down; the pair is down, not its GPU
// failed (the host cannot tell a dead GPU from a silent path or its own
// pause): the GPU stays healthy and lent, the manager removes nothing and
// the pair stays programmed. The admin token is not an agent credential,
// another host's or another box's agent may not report on the pair, and a
// pair no allocation holds is 404. The box's agent may report the same
// link down too.
func TestAgentReportsLinkDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	box := testBox(0, 2)
	box.AgentURL = "https://10.1.0.1:7701"
	_, boxCred, err := e.c.RegisterBoxAgent(e.ctx, box)
	if err != nil {
		t.Fatal(err)
	}
	var hostCred [2]string
	for i := range hostCred {
		h := testHost(i)
		h.AgentURL = fmt.Sprintf("https://10.2.0.%d:7701", i+1)
		if _, hostCred[i], err = e.c.RegisterHostAgent(e.ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	down, kept := a.GPUs[0], a.GPUs[1]
	// Another box's agent, registered after the allocation so that none of
	// its GPUs is in it: an agent of a box, but not of this pair's box.
	other := testBox(1, 1)
	other.AgentURL = "https://10.1.0.2:7701"
	_, otherBoxCred, err := e.c.RegisterBoxAgent(e.ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	gpu := func(id string) pool.GPU {
		gs, err := e.c.GPUs(e.ctx, "", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.ID == id {
				return g
			}
		}
		t.Fatalf("gpu %s not listed", id)
		return pool.GPU{}
	}
	report := func(cred string, pair uint32) (int, string) {
		return call(t, e.srv, http.MethodPost, fmt.Sprintf("/v1/agent/pairs/%d/link-down", pair), cred, `{"reason":"peer silent"}`)
	}
	for _, tc := range []struct {
		name, cred string
		pair       uint32
		status     int
		says       string
	}{
		{"no credential", "", down.Pair, http.StatusUnauthorized, "credential"},
		{"the admin token", token, down.Pair, http.StatusUnauthorized, "credential"},
		{"another host's agent", hostCred[1], down.Pair, http.StatusForbidden, "host host1"},
		{"another box's agent", otherBoxCred, down.Pair, http.StatusForbidden, "box box1"},
		{"a pair no allocation holds", hostCred[0], 4242, http.StatusNotFound, "pair 4242"},
		{"a bad pair id", hostCred[0], 1 << 24, http.StatusBadRequest, "16777216"},
	} {
		if st, body := report(tc.cred, tc.pair); st != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, st, body, tc.status, tc.says)
		}
	}
	if g := gpu(down.GPU); g.Health == pool.Unhealthy {
		t.Fatal("a refused report marked the GPU unhealthy")
	}

	if st, body := report(hostCred[0], down.Pair); st != http.StatusOK || !strings.Contains(body, down.GPU) || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("the host's own report: %d %s, want 200 and the allocation active (within the bound)", st, body)
	}
	if st, body := report(boxCred, down.Pair); st != http.StatusOK || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("the box agent's report on the same pair: %d %s, want 200 and the allocation still active", st, body)
	}
	for _, g := range []pool.Assignment{down, kept} {
		if got := gpu(g.GPU); got.Health != pool.Healthy || got.Allocation != a.ID {
			t.Fatalf("after the reports %s is %+v, want healthy and lent to %s", g.GPU, got, a.ID)
		}
	}
	if s := e.host.Surprises(); len(s) != 0 {
		t.Fatalf("host bridge surprise removals %+v, want none: a link down is no GPU failure", s)
	}
	if ps := e.gpu.Pairs(); !slices.Contains(ps, down.Pair) || !slices.Contains(ps, kept.Pair) {
		t.Fatalf("GPU bridge pairs %v: want %d and %d kept", ps, down.Pair, kept.Pair)
	}
	if got, err := e.c.Allocation(e.ctx, a.ID); err != nil || got.State != pool.StateActive || len(got.GPUs) != 2 || len(got.Lost) != 0 {
		t.Fatalf("allocation after the reports: %+v %v, want active with both GPUs and none lost", got, err)
	}
}

// TestHostLinkDownPastTheBoundDegrades: a pair its host's agent reports
// down stays down past the bound: the allocation is degraded, naming the
// host as the reporter, its GPU healthy and lent; the host's link-up
// (sent once its GPU is back on the host) makes it active again.
func TestHostLinkDownPastTheBoundDegrades(t *testing.T) {
	t.Parallel()
	e := newLinkEnv(t, time.Millisecond)
	down := e.a.GPUs[0]
	e.report(t, e.hostCred, "down", down.Pair)
	waitfor.Until(t, "the allocation degraded", func() bool { return e.alloc(t).State == pool.StateDegraded })
	a := e.alloc(t)
	if a.Degraded == nil || !strings.Contains(a.Degraded.Reason, "reported by host host0") || len(a.GPUs) != 2 || len(a.Lost) != 0 {
		t.Fatalf("degraded allocation %+v (%+v), want the host named as reporter and both GPUs kept", a, a.Degraded)
	}
	if g, err := e.c.GPUs(t.Context(), "box0", "unhealthy"); err != nil || len(g) != 0 {
		t.Fatalf("unhealthy GPUs after a host's report: %+v %v, want none", g, err)
	}
	if body := e.report(t, e.hostCred, "up", down.Pair); !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("link-up answered %s, want the allocation active", body)
	}
	if a := e.alloc(t); a.State != pool.StateActive || a.Degraded != nil || len(a.GPUs) != 2 {
		t.Fatalf("after link-up: %+v, want active with both GPUs", a)
	}
}

// TestLinkDownSurvivesManagerRestart (process level): a host agent
// reports a pair down, the allocation is degraded past the bound; the
// manager is SIGKILLed and started again on the same store, and with no
// new report the allocation is degraded with the same reason (agents
// report transitions only: a manager that kept reports in memory alone
// came back with every link up). The link reported up and the manager
// restarted again, the allocation is active: the report is gone from the
// store too. No GPU is failed or taken back on the way.
func TestLinkDownSurvivesManagerRestart(t *testing.T) {
	privtest.Short(t, "starts subprocesses")
	dir := t.TempDir()
	env := []string{"DXPU_TEST_BOLT=" + filepath.Join(dir, "pool.db"), "DXPU_TEST_TOKEN=" + token,
		"DXPU_TEST_DEGRADED_AFTER=50ms"}
	ctx := context.Background()
	d := startDaemon(t, env...)
	c := d.client(token)
	if _, err := c.RegisterBox(ctx, testBox(0, 1)); err != nil {
		t.Fatal(err)
	}
	h := testHost(0)
	h.AgentURL = "https://10.2.0.1:7701"
	_, hostCred, err := c.RegisterHostAgent(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	a, err := c.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	pair := a.GPUs[0].Pair
	report := func(d *daemon, what, body string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/agent/pairs/%d/%s", d.url, pair, what), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+hostCred)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s report: HTTP %d", what, resp.StatusCode)
		}
	}
	state := func(c *ctlclient.Client) pool.Allocation {
		t.Helper()
		got, err := c.Allocation(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.GPUs) != 1 || got.GPUs[0].GPU != a.GPUs[0].GPU {
			t.Fatalf("allocation %s lost its GPU: %+v", a.ID, got.GPUs)
		}
		return got
	}
	report(d, "link-down", `{"reason":"peer silent for 1s"}`)
	waitfor.Until(t, "the allocation degraded", func() bool { return state(c).State == pool.StateDegraded })
	reason := state(c).Degraded.Reason

	d.kill()
	d = startDaemon(t, env...)
	c = d.client(token)
	if got := state(c); got.State != pool.StateDegraded || got.Degraded == nil || got.Degraded.Reason != reason {
		t.Fatalf("after a manager restart with no new report: %s %+v, want degraded: %q", got.State, got.Degraded, reason)
	}
	if gs, err := c.GPUs(ctx, "", ""); err != nil || len(gs) != 1 || gs[0].Health != pool.Healthy {
		t.Fatalf("GPUs after the restart: %+v %v, want the one GPU healthy", gs, err)
	}

	report(d, "link-up", `{}`)
	if got := state(c); got.State != pool.StateActive {
		t.Fatalf("after link-up: %s", got.State)
	}
	d.kill()
	d = startDaemon(t, env...)
	if got := state(d.client(token)); got.State != pool.StateActive {
		t.Fatalf("after link-up and a restart: %s %+v, want active", got.State, got.Degraded)
	}
}
