package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

// keyRecorder is an agent that keeps the keys it was programmed with.
type keyRecorder struct {
	*fakeagent.Agent
	mu   sync.Mutex
	keys map[uint32][]manager.PairKey
}

func (k *keyRecorder) ProgramPair(ctx context.Context, p manager.Pair) error {
	k.mu.Lock()
	k.keys[p.ID] = append(k.keys[p.ID], p.Key)
	k.mu.Unlock()
	return k.Agent.ProgramPair(ctx, p)
}

// TestPairKeys: every pair's two bridges get the same fresh key, pairs get
// different keys, programming a pair again brings a new generation, and
// no key appears in the manager's answers or its store.
func TestPairKeys(t *testing.T) {
	t.Parallel()
	st := store.NewMemory()
	gpu := &keyRecorder{Agent: fakeagent.New("gpu"), keys: map[uint32][]manager.PairKey{}}
	host := &keyRecorder{Agent: fakeagent.New("host"), keys: map[uint32][]manager.PairKey{}}
	m, err := manager.New(manager.Config{Store: st, GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[manager.PairKeySize]byte]bool{}
	for _, g := range a.GPUs {
		gk, hk := gpu.keys[g.Pair], host.keys[g.Pair]
		if len(gk) != 1 || len(hk) != 1 || gk[0] != hk[0] || gk[0].IsZero() || gk[0].Generation == 0 {
			t.Fatalf("pair %d: GPU side got %v, host side %v", g.Pair, gk, hk)
		}
		if seen[gk[0].Key] {
			t.Fatalf("pair %d shares a key with another pair", g.Pair)
		}
		seen[gk[0].Key] = true
	}
	// ctl rekey: both sides of every pair get the same new key, in two
	// phases (KEY-10): both install it, then both switch to it.
	if _, err := m.Rekey(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, g := range a.GPUs {
		gk, hk := gpu.keys[g.Pair], host.keys[g.Pair]
		if len(gk) != 3 || len(hk) != 3 || !gk[1].Pending || !hk[1].Pending || gk[2].Pending || hk[2].Pending ||
			!gk[1].Same(gk[2]) || !gk[2].Same(hk[2]) || !gk[1].Same(hk[1]) || gk[2].Same(gk[0]) || gk[2].Generation != gk[0].Generation+1 {
			t.Fatalf("pair %d after rekey: GPU side %v, host side %v", g.Pair, gk, hk)
		}
	}
	if _, err := m.Rekey(ctx, "a-nonesuch"); err == nil {
		t.Fatal("rekey of an unknown allocation succeeded")
	}
	// A restarted manager re-applies the active pairs with new keys (it
	// kept none).
	m.Close()
	m2, err := manager.New(manager.Config{Store: st, GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	gpu.mu.Lock()
	defer gpu.mu.Unlock()
	for _, g := range a.GPUs {
		// Same two phases, one generation on from the last one issued
		// (the counter is in the store: KEY-9), a key never seen.
		gk := gpu.keys[g.Pair]
		last := gk[len(gk)-1]
		if len(gk) != 5 || !gk[3].Pending || !gk[3].Same(last) || last.Generation != gk[2].Generation+1 || last.Same(gk[2]) {
			t.Fatalf("pair %d re-applied after a restart: %v", g.Pair, gk)
		}
	}
	// Nothing the manager says or stores holds a key.
	b, _ := json.Marshal(a)
	dump := string(b)
	kvs, _ := st.List(ctx, "")
	for _, kv := range kvs {
		dump += string(kv.Value)
	}
	for _, ks := range gpu.keys {
		for _, k := range ks {
			for _, enc := range []string{string(k.Key[:]), strings.ToLower(hexOf(k.Key[:]))} {
				if strings.Contains(dump, enc) {
					t.Fatal("a pair key leaked into an answer or the store")
				}
			}
		}
	}
	if got := (manager.PairKey{Generation: 3}).String(); strings.Contains(got, "0000") || !strings.Contains(got, "3") {
		t.Errorf("PairKey prints %q", got)
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

// TestRekeyIsTwoPhase (KEY-10): a rekey whose host end fails leaves the
// GPU end with the new key installed only, never switched to; the
// reconciler retries the same key (no new generation) until the host
// takes it, then both switch.
func TestRekeyIsTwoPhase(t *testing.T) {
	t.Parallel()
	gpu := &keyRecorder{Agent: fakeagent.New("gpu"), keys: map[uint32][]manager.PairKey{}}
	host := &keyRecorder{Agent: fakeagent.New("host"), keys: map[uint32][]manager.PairKey{}}
	m, err := manager.New(manager.Config{Store: store.NewMemory(), GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := a.GPUs[0].Pair
	host.FailAlways(fakeagent.OpProgram, true)
	if _, err := m.Rekey(ctx, a.ID); err == nil {
		t.Fatal("rekey with the host end failing succeeded")
	}
	for range 2 {
		if err := m.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	gk := gpu.keys[id]
	if len(gk) != 4 || gk[0].Pending || gk[0].Generation != 1 {
		t.Fatalf("GPU end: %v", gk)
	}
	for _, k := range gk[1:] {
		if !k.Pending || !k.Same(gk[1]) || k.Generation != 2 {
			t.Fatalf("GPU end while the host end fails: %v (want generation 2 installed only, the same key each try)", gk)
		}
	}
	host.FailAlways(fakeagent.OpProgram, false)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	gk, hk := gpu.keys[id], host.keys[id]
	last := func(ks []manager.PairKey) manager.PairKey { return ks[len(ks)-1] }
	if l := last(gk); l.Pending || !l.Same(gk[1]) || !l.Same(last(hk)) || last(hk).Pending {
		t.Fatalf("after the host end came back: GPU end %v, host end %v", gk, hk)
	}
	n := len(gk)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if len(gpu.keys[id]) != n {
		t.Fatalf("a completed key change was repeated: %v", gpu.keys[id])
	}
}

// TestRekeyHotAddsLostHostEnd (issue 20; dxpu chaos seed 2 found it): a
// rekey that reaches a host agent which lost the pair (it restarted, and
// the rekey came before the reconciler) creates the end there and puts the
// GPU back on the host. Before, the end ran without its GPU for good: the
// reconciler restores missing ends only, and the allocation read active.
// A hot-add that fails leaves the change due, and the reconciler finishes
// it, hot-add included.
func TestRekeyHotAddsLostHostEnd(t *testing.T) {
	t.Parallel()
	gpu, host := fakeagent.New("gpu"), fakeagent.New("host")
	m, err := manager.New(manager.Config{Store: store.NewMemory(), GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := a.GPUs[0].Pair
	lose := func() { // the host agent restarts: no pair, no GPU
		if err := host.RemovePair(ctx, manager.Pair{ID: id}); err != nil || len(host.HotAdded()) != 0 {
			t.Fatalf("losing the host end: %v, hot-added %v", err, host.HotAdded())
		}
	}
	lose()
	if _, err := m.Rekey(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if p, h := host.Pairs(), host.HotAdded(); len(p) != 1 || p[0] != id || len(h) != 1 || h[0] != id {
		t.Fatalf("after the rekey the host runs pairs %v, hot-added %v; want pair %d on the host", p, h, id)
	}
	lose()
	host.FailAlways(fakeagent.OpHotAdd, true)
	if _, err := m.Rekey(ctx, a.ID); err == nil || !strings.Contains(err.Error(), "hot_add") {
		t.Fatalf("rekey with the hot-add failing: %v", err)
	}
	host.FailAlways(fakeagent.OpHotAdd, false)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if h := host.HotAdded(); len(h) != 1 || h[0] != id {
		t.Fatalf("after the reconciler the host has hot-added %v; want pair %d", h, id)
	}
}

// strictAgent refuses a key generation below the newest it holds, as a
// bridge does, and lists that generation.
type strictAgent struct {
	*keyRecorder
	held map[uint32]uint32
}

func newStrict(name string) *strictAgent {
	return &strictAgent{keyRecorder: &keyRecorder{Agent: fakeagent.New(name), keys: map[uint32][]manager.PairKey{}}, held: map[uint32]uint32{}}
}

func (s *strictAgent) ProgramPair(ctx context.Context, p manager.Pair) error {
	s.mu.Lock()
	h := s.held[p.ID]
	s.mu.Unlock()
	if p.Key.Generation < h {
		return fmt.Errorf("generation %d is not newer than %d", p.Key.Generation, h)
	}
	if err := s.keyRecorder.ProgramPair(ctx, p); err != nil {
		return err
	}
	s.mu.Lock()
	s.held[p.ID] = p.Key.Generation
	s.mu.Unlock()
	return nil
}

func (s *strictAgent) ListPairs(ctx context.Context) ([]manager.Pair, error) {
	ps, err := s.Agent.ListPairs(ctx)
	s.mu.Lock()
	for i := range ps {
		ps[i].HeldGeneration = s.held[ps[i].ID]
	}
	s.mu.Unlock()
	return ps, err
}

// TestKeyGenerationAboveHeld (KEY-9): agents that hold generations the
// manager's counter does not know (numbered by an older manager from the
// clock, or a store that lost the counter) list them, and the manager's
// next key for the pair is issued above them instead of being refused
// for ever.
func TestKeyGenerationAboveHeld(t *testing.T) {
	t.Parallel()
	st := store.NewMemory()
	gpu, host := newStrict("gpu"), newStrict("host")
	cfg := manager.Config{Store: st, GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1}
	m, err := manager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	id := a.GPUs[0].Pair
	const old = 1_780_000_000 // a clock-numbered generation
	for _, s := range []*strictAgent{gpu, host} {
		s.held[id] = old
	}
	m2, err := manager.New(cfg) // its re-keying at start is refused: generation 2
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if err := m2.Reconcile(ctx); err != nil { // lists the held generations, retries above them
		t.Fatal(err)
	}
	gk, hk := gpu.keys[id], host.keys[id]
	if g, h := gk[len(gk)-1], hk[len(hk)-1]; g.Generation != old+1 || g.Pending || !g.Same(h) || h.Pending {
		t.Fatalf("after the restart: GPU end %v, host end %v; want both on generation %d", gk, hk, old+1)
	}
}

// TestRekeyPendingRefused: an allocation still pending (reserved, its saga
// not finished, or left by a crash for the reconciler) has no programmed
// pairs to rekey: POST /v1/allocations/{id}/rekey is 409 and no agent is
// programmed. The pending allocation is reserved in the pool directly, so
// that no saga holds it and only the state check can refuse the rekey.
func TestRekeyPendingRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	seed(t, e.c, 1, 2, 1)
	a, err := e.m.Pool().Reserve("a-pending", pool.Request{Host: "host0", Count: 2})
	if err != nil || a.State != pool.StatePending {
		t.Fatalf("reserve: %+v %v", a, err)
	}
	st, body := call(t, e.srv, http.MethodPost, "/v1/allocations/a-pending/rekey", token, "")
	if st != http.StatusConflict || !strings.Contains(body, "pending") {
		t.Errorf("rekey of a pending allocation: %d %s, want 409 naming its state", st, body)
	}
	for _, ag := range []*fakeagent.Agent{e.gpu, e.sw, e.host} {
		if n := ag.Calls(fakeagent.OpProgram); n != 0 {
			t.Errorf("%s agent programmed %d times by a refused rekey", ag.Name, n)
		}
	}
}

// gatedAgent holds ProgramPair calls while armed: entered gets one value
// per held call, and each waits for a value on release.
type gatedAgent struct {
	*fakeagent.Agent
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedAgent) ProgramPair(ctx context.Context, p manager.Pair) error {
	if g.armed.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Agent.ProgramPair(ctx, p)
}

// TestConcurrentRekeyIsRefusedNamingIt: while a rekey of an allocation
// runs (held inside its key install), a second rekey and a release of it
// through the API answer 409 busy with a message that says a rekey is in
// progress; the first completes, and a rekey after it succeeds.
func TestConcurrentRekeyIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	gpu := &gatedAgent{Agent: fakeagent.New("gpu"), entered: make(chan struct{}, 4), release: make(chan struct{})}
	m, err := manager.New(manager.Config{Store: store.NewMemory(), GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: fakeagent.New("host"),
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	c := ctlclient.New(srv.URL, token)
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	gpu.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := c.Rekey(ctx, a.ID)
		first <- err
	}()
	<-gpu.entered // the first rekey is installing its key at the GPU end
	for what, call := range map[string]func() error{
		"rekey":   func() error { _, err := c.Rekey(ctx, a.ID); return err },
		"release": func() error { _, err := c.Free(ctx, a.ID); return err },
	} {
		err := call()
		var ae *ctlclient.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != manager.CodeBusy || !strings.Contains(ae.Message, "being rekeyed") {
			t.Errorf("a %s during a rekey: %v, want 409 busy saying the allocation is being rekeyed", what, err)
		}
	}
	gpu.armed.Store(false)
	close(gpu.release)
	if err := <-first; err != nil {
		t.Fatalf("the first rekey: %v", err)
	}
	if _, err := c.Rekey(ctx, a.ID); err != nil {
		t.Fatalf("a rekey after the first completed: %v", err)
	}
}

// TestReapplyHotAddRetried (dxpu chaos seed 81 with a VM host): a manager
// that takes the lead re-applies every active allocation, creating under a
// new key an end the host agent lost; a hot-add that fails then (the VM
// host's guest still booting) leaves the change due, and the next pass
// hot-adds the GPU. Before, the change read done: the end was listed, so
// nothing restored it, and the host ran the pair without its GPU for good
// while the allocation read active.
func TestReapplyHotAddRetried(t *testing.T) {
	t.Parallel()
	gpu, sw, host := fakeagent.New("gpu"), fakeagent.New("switch"), fakeagent.New("host")
	st := store.NewMemory()
	cfg := manager.Config{Store: st, GPUBridge: gpu, Switch: sw, HostBridge: host, Token: token, Logger: quiet(), ReconcileInterval: -1}
	m, err := manager.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	id := a.GPUs[0].Pair
	if err := host.RemovePair(ctx, manager.Pair{ID: id}); err != nil { // the host agent restarted
		t.Fatal(err)
	}
	host.FailAlways(fakeagent.OpHotAdd, true)
	m2, err := manager.New(cfg) // leads: re-applies the allocation
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if p, h := host.Pairs(), host.HotAdded(); len(p) != 1 || p[0] != id || len(h) != 0 {
		t.Fatalf("after the re-apply with the hot-add failing the host runs pairs %v, hot-added %v; want pair %d without its GPU", p, h, id)
	}
	host.FailAlways(fakeagent.OpHotAdd, false)
	if err := m2.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if h := host.HotAdded(); len(h) != 1 || h[0] != id {
		t.Fatalf("after the next pass the host has hot-added %v; want pair %d", h, id)
	}
}

// TestFinishKeyChangeHotAddRetried: a key change the reconciler finishes
// (it failed at the host end) creates the end the host agent lost; when
// the hot-add after it fails, the change stays due and a later pass
// hot-adds the GPU.
func TestFinishKeyChangeHotAddRetried(t *testing.T) {
	t.Parallel()
	gpu, host := fakeagent.New("gpu"), fakeagent.New("host")
	m, err := manager.New(manager.Config{Store: store.NewMemory(), GPUBridge: gpu, Switch: fakeagent.New("switch"), HostBridge: host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	if _, err := m.RegisterBox(ctx, testBox(0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RegisterHost(ctx, testHost(0)); err != nil {
		t.Fatal(err)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: "host0", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := a.GPUs[0].Pair
	host.FailAlways(fakeagent.OpProgram, true)
	if _, err := m.Rekey(ctx, a.ID); err == nil {
		t.Fatal("rekey with the host end failing succeeded")
	}
	if err := host.RemovePair(ctx, manager.Pair{ID: id}); err != nil { // the host agent restarted
		t.Fatal(err)
	}
	host.FailAlways(fakeagent.OpProgram, false)
	host.FailAlways(fakeagent.OpHotAdd, true)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if p, h := host.Pairs(), host.HotAdded(); len(p) != 1 || p[0] != id || len(h) != 0 {
		t.Fatalf("after the pass with the hot-add failing the host runs pairs %v, hot-added %v; want pair %d without its GPU", p, h, id)
	}
	host.FailAlways(fakeagent.OpHotAdd, false)
	if err := m.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if h := host.HotAdded(); len(h) != 1 || h[0] != id {
		t.Fatalf("after the next pass the host has hot-added %v; want pair %d", h, id)
	}
}
