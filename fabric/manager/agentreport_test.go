package manager_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
)

// TestAgentReportsLinkDown: a host bridge's agent reports, with its own
// credential, that a pair's link went down; the pair's GPU is marked
// unhealthy, the host bridge gets its surprise removal and the pair is
// torn down. The admin token is not an agent credential, another host's
// or another box's agent may not report on the pair, and a pair already
// torn down is 404. The box's agent reporting its link down fails no GPU.
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
	lost, kept := a.GPUs[0], a.GPUs[1]
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
		{"no credential", "", lost.Pair, http.StatusUnauthorized, "credential"},
		{"the admin token", token, lost.Pair, http.StatusUnauthorized, "credential"},
		{"another host's agent", hostCred[1], lost.Pair, http.StatusForbidden, "host host1"},
		{"another box's agent", otherBoxCred, lost.Pair, http.StatusForbidden, "box box1"},
		{"a pair no allocation holds", hostCred[0], 4242, http.StatusNotFound, "pair 4242"},
		{"a bad pair id", hostCred[0], 1 << 24, http.StatusBadRequest, "16777216"},
	} {
		if st, body := report(tc.cred, tc.pair); st != tc.status || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s, want %d naming %q", tc.name, st, body, tc.status, tc.says)
		}
	}
	if g := gpu(lost.GPU); g.Health == pool.Unhealthy {
		t.Fatal("a refused report marked the GPU unhealthy")
	}

	if st, body := report(hostCred[0], lost.Pair); st != http.StatusOK || !strings.Contains(body, lost.GPU) {
		t.Fatalf("the host's own report: %d %s", st, body)
	}
	if g := gpu(lost.GPU); g.Health != pool.Unhealthy || g.Allocation != "" {
		t.Fatalf("after the report the GPU is %+v, want unhealthy and out of its allocation", g)
	}
	if s := e.host.Surprises(); len(s) != 1 || s[0].ID != lost.Pair {
		t.Fatalf("host bridge surprise removals %+v, want pair %d", s, lost.Pair)
	}
	if ps := e.gpu.Pairs(); slices.Contains(ps, lost.Pair) || !slices.Contains(ps, kept.Pair) {
		t.Fatalf("GPU bridge pairs %v: want %d torn down and %d kept", ps, lost.Pair, kept.Pair)
	}
	// The box's agent may report too; the torn-down pair is done (404).
	if st, body := report(boxCred, lost.Pair); st != http.StatusNotFound {
		t.Fatalf("a report on a torn-down pair: %d %s, want 404", st, body)
	}
	// The box's agent reporting its link down says the host side fell
	// silent: the GPU is fine, and the pair stays (linkstate_test.go).
	if st, body := report(boxCred, kept.Pair); st != http.StatusOK || !strings.Contains(body, `"state":"active"`) {
		t.Fatalf("the box agent's report: %d %s, want 200 and the allocation still active", st, body)
	}
	if g := gpu(kept.GPU); g.Health != pool.Healthy || g.Allocation != a.ID {
		t.Fatalf("after the box's report %s is %+v, want healthy and lent", kept.GPU, g)
	}
}
