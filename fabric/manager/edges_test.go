package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// Allocation and release paths the other tests leave open: each test here
// fails if one statement of the saga's bookkeeping goes missing.

// allocWriteFailer fails the next n store writes that put an allocation.
type allocWriteFailer struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (s *allocWriteFailer) Apply(ctx context.Context, ops ...store.Op) error {
	s.mu.Lock()
	for _, op := range ops {
		if strings.HasPrefix(op.Key, "alloc/") && !op.Delete && s.n > 0 {
			s.n--
			s.mu.Unlock()
			return errors.New("injected store failure")
		}
	}
	s.mu.Unlock()
	return s.Store.Apply(ctx, ops...)
}

func (s *allocWriteFailer) failNext(n int) {
	s.mu.Lock()
	s.n = n
	s.mu.Unlock()
}

// TestJournalFailureFreesTheGPUs: when the allocation cannot be journaled,
// its GPUs, host ports and pair IDs go back to the pool at once and no
// agent is touched.
func TestJournalFailureFreesTheGPUs(t *testing.T) {
	st := &allocWriteFailer{Store: store.NewMemory()}
	e := newEnv(t, st)
	seed(t, e.c, 1, 4, 1)
	beforeStore, beforePool := storeDump(t, e.st), poolDump(t, e.c)
	st.failNext(1)
	if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3}); err == nil {
		t.Fatal("allocation succeeded without its journal entry")
	}
	if storeDump(t, e.st) != beforeStore || poolDump(t, e.c) != beforePool {
		t.Fatalf("a failed journal write left traces:\n%s\n%s", beforePool, poolDump(t, e.c))
	}
	if n := e.gpu.Calls(fakeagent.OpProgram); n != 0 {
		t.Fatalf("%d GPU bridge calls for an allocation never journaled", n)
	}
	if err := e.m.Pool().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 4})
	if err != nil || len(a.GPUs) != 4 {
		t.Fatalf("after the failure: %+v, %v", a, err)
	}
	e.agree()
}

// TestFailedRollbackJournaledAsReleasing: a saga whose undo fails too
// leaves its allocation journaled as releasing (not pending), as the
// reconciler expects.
func TestFailedRollbackJournaledAsReleasing(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 8, 1)
	e.gpu.FailAlways(fakeagent.OpRemove, true) // the undo cannot finish
	e.sw.FailNth(fakeagent.OpProgram, 2)
	if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2}); err == nil {
		t.Fatal("saga should fail")
	}
	kvs, err := e.st.List(e.ctx, "alloc/")
	if err != nil || len(kvs) != 1 {
		t.Fatalf("journal %v, %v: want the one failed allocation", kvs, err)
	}
	var a pool.Allocation
	if err := json.Unmarshal(kvs[0].Value, &a); err != nil {
		t.Fatal(err)
	}
	if a.State != pool.StateReleasing {
		t.Fatalf("failed allocation journaled as %q, want %q", a.State, pool.StateReleasing)
	}
	e.gpu.FailAlways(fakeagent.OpRemove, false)
	if err := e.m.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	if kvs, _ := e.st.List(e.ctx, "alloc/"); len(kvs) != 0 {
		t.Fatalf("journal after the reconciler: %v", kvs)
	}
	e.agree()
}

// TestGPUFailureSurvivesRestart: the allocation a failed GPU left is
// journaled without it, so a restarted manager neither lends the dead GPU
// again nor programs its pair.
func TestGPUFailureSurvivesRestart(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 1)
	a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	victim := a.GPUs[1]
	if _, err := e.c.SetGPUHealth(e.ctx, victim.GPU, pool.Unhealthy); err != nil {
		t.Fatal(err)
	}
	e.srv.Close()
	e.m.Close()
	e2 := &env{t: t, st: e.st, gpu: e.gpu, sw: e.sw, host: e.host, ctx: e.ctx}
	e2.start()
	got, err := e2.c.Allocation(e.ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.GPUs, []pool.Assignment{a.GPUs[0], a.GPUs[2]}) || !reflect.DeepEqual(got.Lost, []string{victim.GPU}) {
		t.Fatalf("after restart the allocation is %+v", got)
	}
	un, err := e2.c.GPUs(e.ctx, "", "unhealthy")
	if err != nil || len(un) != 1 || un[0].ID != victim.GPU || un[0].Allocation != "" {
		t.Fatalf("unhealthy GPUs after restart: %+v, %v", un, err)
	}
	e2.agree()
}

// failDuringSaga is a GPU bridge that runs hook once, just before the
// first pair is programmed.
type failDuringSaga struct {
	*fakeagent.Agent
	once sync.Once
	hook func()
}

func (f *failDuringSaga) ProgramPair(ctx context.Context, p manager.Pair) error {
	f.once.Do(f.hook)
	return f.Agent.ProgramPair(ctx, p)
}

// TestGPUFailureDuringSagaLeavesNoPair: a GPU that fails while its
// allocation is being programmed leaves it; the saga, which goes on to
// program the dead GPU's pair, removes that pair again once the allocation
// is active.
func TestGPUFailureDuringSagaLeavesNoPair(t *testing.T) {
	e := &env{t: t, st: store.NewMemory(), gpu: fakeagent.New("gpu"), sw: fakeagent.New("switch"), host: fakeagent.New("host"), ctx: context.Background()}
	var m *manager.Manager
	var hookErr error
	gpu := &failDuringSaga{Agent: e.gpu, hook: func() {
		_, hookErr = m.SetGPUHealth(context.Background(), "box0-gpu1", pool.Unhealthy)
	}}
	m, err := manager.New(manager.Config{Store: e.st, GPUBridge: gpu, Switch: e.sw, HostBridge: e.host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	e.srv = httptest.NewServer(m.Handler())
	e.c = ctlclient.New(e.srv.URL, token)
	t.Cleanup(func() { e.srv.Close(); m.Close() })
	seed(t, e.c, 1, 4, 1)
	a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	if err != nil || hookErr != nil {
		t.Fatalf("allocate: %v; GPU failure: %v", err, hookErr)
	}
	if len(a.GPUs) != 1 || a.GPUs[0].GPU != "box0-gpu0" || !reflect.DeepEqual(a.Lost, []string{"box0-gpu1"}) {
		t.Fatalf("allocation %+v, want box0-gpu0 with box0-gpu1 lost", a)
	}
	e.agree()
}

// TestReleaseCounted: every finished release counts in
// dxpu_releases_total.
func TestReleaseCounted(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 1)
	for range 2 {
		a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Free(e.ctx, a.ID); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "\ndxpu_releases_total 2\n") {
		t.Errorf("/metrics lacks dxpu_releases_total 2")
	}
}
