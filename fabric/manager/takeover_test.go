package manager_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// electedMemory is a shared store whose election this manager wins at once.
type electedMemory struct{ *store.Memory }

func (electedMemory) Campaign(ctx context.Context, _ string) (<-chan struct{}, error) {
	return ctx.Done(), nil
}
func (electedMemory) Resign(context.Context) error           { return nil }
func (electedMemory) Leader(context.Context) (string, error) { return "", store.ErrNotFound }

// gatedSwitch holds every ProgramPair until the gate opens.
type gatedSwitch struct {
	*fakeagent.Agent
	gate chan struct{}
}

func (g gatedSwitch) ProgramPair(ctx context.Context, p manager.Pair) error {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Agent.ProgramPair(ctx, p)
}

// A manager taking the lead serves the whole forwarding table from its
// first answer as leader, before its reconcile pass has reached the switch:
// a switch daemon following the new leader and served an empty table would
// empty its map and cut every pair. (TestEtcdFailover saw the empty table
// under load.)
func TestTakeoverServesWholeTable(t *testing.T) {
	mem := store.NewMemory()
	e := newEnv(t, mem)
	seed(t, e.c, 2, 4, 2)
	var want []uint32
	for i := range 3 {
		a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host" + string(rune('0'+i%2)), Count: 1 + i})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, pairIDs(a)...)
	}
	slices.Sort(want)
	e.srv.Close()
	e.m.Close()

	sw := gatedSwitch{Agent: fakeagent.New("switch"), gate: make(chan struct{})}
	m, err := manager.New(manager.Config{Store: electedMemory{mem}, GPUBridge: fakeagent.New("gpu"), Switch: sw,
		HostBridge: fakeagent.New("host"), Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(m.Handler())
	defer func() { close(sw.gate); srv.Close(); m.Close() }()
	c := ctlclient.New(srv.URL, token)
	waitfor.Until(t, "the manager takes the lead", m.Leading)
	if sw.Calls(fakeagent.OpProgram) != 0 {
		t.Fatal("the gated switch was programmed")
	}
	tab, err := c.Table(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint32
	for _, p := range tab.Pairs {
		got = append(got, p.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the new leader's first table holds pairs %v; the active allocations hold %v", got, want)
	}
}
