package manager_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

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
	// ctl rekey: both sides of every pair get the same new key.
	if _, err := m.Rekey(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, g := range a.GPUs {
		gk, hk := gpu.keys[g.Pair], host.keys[g.Pair]
		if len(gk) != 2 || len(hk) != 2 || gk[1] != hk[1] || gk[1] == gk[0] || gk[1].Generation == gk[0].Generation {
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
		gk := gpu.keys[g.Pair]
		if len(gk) < 3 || gk[len(gk)-1] == gk[1] || gk[len(gk)-1].Generation == gk[1].Generation {
			t.Fatalf("pair %d re-applied with the same key: %v", g.Pair, gk)
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
