package bridgeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// fakeManager records the agent reports it gets; it answers link-down with
// downStatus (200 unless set).
type fakeManager struct {
	srv        *httptest.Server
	mu         sync.Mutex
	reports    []fakeReport
	downStatus int // guarded by mu
}

type fakeReport struct {
	path, auth, reason string
	status             int
}

func newFakeManager(t *testing.T, downStatus int) *fakeManager {
	fm := &fakeManager{downStatus: downStatus}
	fm.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		status := http.StatusOK
		fm.mu.Lock()
		if strings.HasSuffix(r.URL.Path, "/link-down") {
			status = fm.downStatus
		}
		fm.reports = append(fm.reports, fakeReport{path: r.Method + " " + r.URL.Path, auth: r.Header.Get("Authorization"), reason: body.Reason, status: status})
		fm.mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprintln(w, `{}`)
	}))
	t.Cleanup(fm.srv.Close)
	return fm
}

func (fm *fakeManager) got() []fakeReport {
	fm.mu.Lock()
	defer fm.mu.Unlock()
	return append([]fakeReport(nil), fm.reports...)
}

// linkPair is a box agent and a host agent running pair 7 between them;
// the agent of role reports to a fake manager, the other's end of the pair
// comes and goes.
type linkPair struct {
	ctx       context.Context
	box, host *Agent
	rep, peer *Agent // the reporting agent, the other
	p         manager.Pair
}

func newLinkPair(t *testing.T, fm *fakeManager, role bridge.Role) *linkPair {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	start := func(o Options) *Agent {
		o.Keepalive, o.DeadAfter, o.CompletionTimeout, o.Insecure, o.Log = 50*time.Millisecond, time.Second, 2*time.Second, true, quiet()
		o.Listen = netip.MustParseAddrPort("127.0.0.1:0")
		actx, acancel := context.WithCancel(ctx)
		a, err := Start(actx, o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { acancel(); a.Wait() })
		return a
	}
	b := pool.Box{ID: "box0", GPUs: []pool.GPU{{ID: "box0-g0", Model: "H100", MemoryMiB: 80 << 10}}}
	bo := Options{Role: bridge.RoleGPU, Box: &b}
	ho := Options{Role: bridge.RoleHost, Ports: 32, HostID: "h1"}
	if role == bridge.RoleGPU {
		bo.Manager, bo.Credential = fm.srv.URL, "box-credential"
	} else {
		ho.Manager, ho.Credential = fm.srv.URL, "host-credential"
	}
	lp := &linkPair{ctx: ctx, box: start(bo), host: start(ho)}
	lp.rep, lp.peer = lp.box, lp.host
	if role == bridge.RoleHost {
		lp.rep, lp.peer = lp.host, lp.box
	}
	lp.p = manager.Pair{ID: 7, Allocation: "a-1", Host: "h1", Box: "box0", GPU: "box0-g0", Model: "H100",
		HostBridge: pool.Endpoint{IP: "127.0.0.1", UDPPort: lp.host.DataPlane().Port()},
		GPUBridge:  pool.Endpoint{IP: "127.0.0.1", UDPPort: lp.box.DataPlane().Port()},
		Key:        manager.PairKey{Generation: 1, Key: [32]byte{7, 7, 7}}}
	for _, a := range []*Agent{lp.box, lp.host} {
		if err := a.ProgramPair(ctx, lp.p); err != nil {
			t.Fatal(err)
		}
	}
	lp.waitLink(t, "up")
	return lp
}

func (lp *linkPair) waitLink(t *testing.T, want string) {
	t.Helper()
	waitfor.Until(t, "the reporting agent's pair link "+want, func() bool {
		ps := lp.rep.Status().Pairs
		return len(ps) == 1 && ps[0].Link == want
	})
}

// reporting says whether the reporting agent has a report of pair 7 in
// hand.
func (lp *linkPair) reporting() bool {
	lp.rep.mu.Lock()
	pr := lp.rep.pairs[7]
	lp.rep.mu.Unlock()
	pr.link.mu.Lock()
	defer pr.link.mu.Unlock()
	return pr.link.sending
}

// flap takes the pair's link down (the peer's end goes away: the reporting
// agent hears nothing more) and, once it saw it down and downReported
// says so, up again (the peer's end is back).
func (lp *linkPair) flap(t *testing.T, downReported func() bool) {
	t.Helper()
	if err := lp.peer.RemovePair(lp.ctx, lp.p); err != nil {
		t.Fatal(err)
	}
	lp.waitLink(t, "down")
	waitfor.Until(t, "the link-down report", downReported)
	if err := lp.peer.ProgramPair(lp.ctx, lp.p); err != nil {
		t.Fatal(err)
	}
	lp.waitLink(t, "up")
}

// TestBoxReportsLinkState: a GPU box's agent reports its pair's link down
// when the host's end falls silent and up when it is back, in that order,
// with its own credential; the first link-up (programming) is no report.
func TestBoxReportsLinkState(t *testing.T) {
	t.Parallel()
	fm := newFakeManager(t, http.StatusOK)
	lp := newLinkPair(t, fm, bridge.RoleGPU)
	lp.flap(t, func() bool { return len(fm.got()) >= 1 })
	waitfor.Until(t, "the link-up report", func() bool { return len(fm.got()) >= 2 && !lp.reporting() })
	got := fm.got()
	if len(got) != 2 {
		t.Fatalf("reports %+v, want a link-down then a link-up", got)
	}
	for i, want := range []string{"POST /v1/agent/pairs/7/link-down", "POST /v1/agent/pairs/7/link-up"} {
		if got[i].path != want || got[i].auth != "Bearer box-credential" {
			t.Errorf("report %d: %+v, want %s with the box agent's credential", i, got[i], want)
		}
	}
	if !strings.Contains(got[0].reason, "silent") {
		t.Errorf("link-down reason %q, want the bridge's (peer silent)", got[0].reason)
	}
}

// TestLinkUpCutsDownReportShort: while the manager refuses a link-down
// report (the agent retries it), the link comes back: the agent stops
// retrying the stale link-down and reports link-up (the manager may have
// taken one of the attempts), and then nothing more.
func TestLinkUpCutsDownReportShort(t *testing.T) {
	t.Parallel()
	fm := newFakeManager(t, http.StatusServiceUnavailable)
	lp := newLinkPair(t, fm, bridge.RoleGPU)
	lp.flap(t, func() bool { return len(fm.got()) >= 2 }) // a retry: the report is pending
	waitfor.Until(t, "the link-up report", func() bool {
		got := fm.got()
		return got[len(got)-1].path == "POST /v1/agent/pairs/7/link-up" && !lp.reporting()
	})
	got := fm.got()
	for i, r := range got {
		want := "POST /v1/agent/pairs/7/link-down"
		if i == len(got)-1 {
			want = "POST /v1/agent/pairs/7/link-up"
		}
		if r.path != want {
			t.Fatalf("reports %+v: want link-down attempts, then one link-up", got)
		}
	}
}

// TestHostReportsLinkDownThenUp: a host's link-down is not cut short by
// the link coming back (the GPU has left the host: the manager must hear
// it): while the manager refuses it, the host's agent keeps retrying it
// after the link-up; once it is taken, the link-up follows, with the host
// agent's credential.
func TestHostReportsLinkDownThenUp(t *testing.T) {
	t.Parallel()
	fm := newFakeManager(t, http.StatusServiceUnavailable)
	lp := newLinkPair(t, fm, bridge.RoleHost)
	lp.flap(t, func() bool { return len(fm.got()) >= 1 })
	n := len(fm.got())
	waitfor.Until(t, "a link-down retry after the link-up", func() bool {
		got := fm.got()
		return len(got) > n && got[len(got)-1].path == "POST /v1/agent/pairs/7/link-down"
	})
	fm.mu.Lock()
	fm.downStatus = http.StatusOK
	fm.mu.Unlock()
	waitfor.Until(t, "the link-up report", func() bool {
		got := fm.got()
		return got[len(got)-1].path == "POST /v1/agent/pairs/7/link-up" && !lp.reporting()
	})
	got := fm.got()
	for i, r := range got {
		want, status := "POST /v1/agent/pairs/7/link-down", http.StatusServiceUnavailable
		switch i {
		case len(got) - 2:
			status = http.StatusOK
		case len(got) - 1:
			want, status = "POST /v1/agent/pairs/7/link-up", http.StatusOK
		}
		if r.path != want || r.status != status || r.auth != "Bearer host-credential" {
			t.Fatalf("reports %+v: want refused link-downs, the link-down taken, then the link-up", got)
		}
	}
}

// TestHostReplugsAfterLinkUp: a host's GPU whose link goes down leaves
// the host (a surprise removal, before the link-down report) and, when
// the link is up again, is hot-added back through its slot (enumerated,
// BOOT_0 read through the fabric) before the link-up report: the host
// cannot tell a dead GPU from a silent path, so the link decides.
func TestHostReplugsAfterLinkUp(t *testing.T) {
	t.Parallel()
	fm := newFakeManager(t, http.StatusOK)
	lp := newLinkPair(t, fm, bridge.RoleHost)
	if err := lp.host.HotAdd(lp.ctx, lp.p); err != nil {
		t.Fatal(err)
	}
	slot := func() Slot {
		for _, s := range lp.host.Status().Slots {
			if s.Pair == lp.p.ID {
				return s
			}
		}
		return Slot{}
	}
	first := slot()
	if !first.Present || first.Boot0 == "" {
		t.Fatalf("slot after the hot-add %+v, want the GPU present with its BOOT_0", first)
	}
	var atDown Slot
	lp.flap(t, func() bool {
		if len(fm.got()) < 1 {
			return false
		}
		atDown = slot()
		return true
	})
	if atDown.Present || atDown.Removed != RemovedSurprise {
		t.Fatalf("slot when the link-down was reported %+v, want the GPU surprise-removed", atDown)
	}
	waitfor.Until(t, "the link-up report", func() bool { return len(fm.got()) >= 2 && !lp.reporting() })
	again := slot()
	if !again.Present || again.Removed != "" || again.Boot0 != first.Boot0 || again.BDF != first.BDF {
		t.Fatalf("slot after the link-up %+v, want the GPU back as it was (%+v)", again, first)
	}
	got := fm.got()
	if len(got) != 2 || got[0].path != "POST /v1/agent/pairs/7/link-down" || got[1].path != "POST /v1/agent/pairs/7/link-up" {
		t.Fatalf("reports %+v, want a link-down then a link-up", got)
	}
	// The manager's own removal stands: a link-up after it plugs nothing.
	if err := lp.host.SurpriseRemove(lp.ctx, lp.p); err != nil {
		t.Fatal(err)
	}
	lp.flap(t, func() bool { return len(fm.got()) >= 3 })
	waitfor.Until(t, "the second link-up report", func() bool { return len(fm.got()) >= 4 && !lp.reporting() })
	if s := slot(); s.Present || s.Reason != "surprise removal by the manager" {
		t.Fatalf("slot after the manager's removal and a link flap %+v, want it still removed by the manager", s)
	}
}
