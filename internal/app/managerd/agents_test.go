package managerd

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestUnreachableAfterFromOptions: --unreachable-after reaches the
// manager: a box whose agent refuses every connection is reported
// unreachable after 100ms, not after the 30s default. A Run that left the
// option out of the manager's configuration reports it no sooner than
// manager.DefaultUnreachableAfter after the registration: the wait fails
// first (it gives up after waitfor.Stall, less than the default), and the
// time taken is checked against the default all the same.
func TestUnreachableAfterFromOptions(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String()
	ln.Close()
	d := startDaemon(t, Options{ReconcileInterval: 20 * time.Millisecond, UnreachableAfter: 100 * time.Millisecond})
	c := ctlclient.New(d.base, d.admin)
	registered := time.Now()
	if _, _, err := c.RegisterBoxAgent(t.Context(), pool.Box{ID: "box0", AgentURL: dead,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00", IP: "10.1.0.1"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	u := waitUnreachable(t, c, "box0")
	if took := time.Since(registered); took >= manager.DefaultUnreachableAfter {
		t.Fatalf("box reported unreachable %v after registration, not before the %v default: --unreachable-after 100ms not applied", took, manager.DefaultUnreachableAfter)
	}
	t.Logf("unreachable: %s", u.Reason)
}

// waitUnreachable waits until the manager reports box unreachable and
// returns the report.
func waitUnreachable(t *testing.T, c *ctlclient.Client, box string) *pool.Unreachable {
	t.Helper()
	var u *pool.Unreachable
	waitfor.Until(t, "box "+box+" reported unreachable", func() bool {
		u = unreachable(t, c, box)
		return u != nil
	})
	return u
}

// unreachable returns the manager's report of box unreachable, or nil.
func unreachable(t *testing.T, c *ctlclient.Client, box string) *pool.Unreachable {
	t.Helper()
	boxes, err := c.Boxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range boxes {
		if b.ID == box {
			return b.Unreachable
		}
	}
	return nil
}

// TestInsecureAgentNotCalledWithoutFlag: a box registered over plain http
// while --allow-insecure-agents was on is not called once the manager runs
// without it (the agent's credential would cross the network in clear).
// The manager reports the box unreachable instead: the test waits for
// that, or for a call, whichever comes first (a manager that calls the
// agent hears its answers and never reports the box unreachable).
func TestInsecureAgentNotCalledWithoutFlag(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer agent.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "admin.tok")
	if _, err := manager.CreateTokenFile(tok); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "m.db")

	d := startDaemon(t, Options{TokenFile: tok, Store: db, AllowInsecureAgents: true, ReconcileInterval: time.Hour})
	c := ctlclient.New(d.base, d.admin)
	if _, _, err := c.RegisterBoxAgent(t.Context(), pool.Box{ID: "box0", AgentURL: agent.URL,
		Bridge: pool.Endpoint{SwitchPort: "veth-b0", MAC: "02:00:00:00:01:00", IP: "10.1.0.1"}, GPUs: []pool.GPU{{ID: "g0", Model: "H100", MemoryMiB: 81920}}}); err != nil {
		t.Fatal(err)
	}
	if err := d.stop(); err != nil {
		t.Fatal(err)
	}

	calls.Store(0)
	d = startDaemon(t, Options{TokenFile: tok, Store: db, ReconcileInterval: 20 * time.Millisecond, UnreachableAfter: 100 * time.Millisecond})
	c = ctlclient.New(d.base, d.admin)
	var u *pool.Unreachable
	waitfor.Until(t, "box0 reported unreachable, or its http agent called", func() bool {
		u = unreachable(t, c, "box0")
		return u != nil || calls.Load() > 0
	})
	if n := calls.Load(); n != 0 {
		t.Fatalf("the http agent was called %d times by a manager without --allow-insecure-agents (unreachable: %v)", n, u)
	}
	t.Logf("unreachable: %s", u.Reason)
}
