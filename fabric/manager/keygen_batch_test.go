package manager_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// applyCounter counts the store writes that carry key generation
// counters.
type applyCounter struct {
	store.Store
	mu     sync.Mutex
	keygen []int // keygen puts of each such write
}

func (s *applyCounter) Apply(ctx context.Context, ops ...store.Op) error {
	n := 0
	for _, op := range ops {
		if strings.HasPrefix(op.Key, "keygen/") {
			n++
		}
	}
	if n > 0 {
		s.mu.Lock()
		s.keygen = append(s.keygen, n)
		s.mu.Unlock()
	}
	return s.Store.Apply(ctx, ops...)
}

// TestAllocationKeysOneWrite: the key generations of a new allocation's
// pairs are persisted in one store write, not one per pair (each write
// is an fsync with bbolt: 4 GPUs cost 4 before, and `dxpu bench manager
// --store bbolt` allocated at 38/s against 65/s with one).
func TestAllocationKeysOneWrite(t *testing.T) {
	st := &applyCounter{Store: store.NewMemory()}
	e := newEnv(t, st)
	seed(t, e.c, 1, 4, 1)
	if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 4}); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.keygen) != 1 || st.keygen[0] != 4 {
		t.Fatalf("key generation writes of a 4-GPU allocation: %v, want one write of 4", st.keygen)
	}
}

// TestRestartKeysFewWrites: a manager taking the lead re-keys every
// active pair; their generations go to the store in one write per 64
// pairs, not one per pair (with bbolt, 4,869 lent GPUs took 23 s to
// restart before, 1.5 s after).
func TestRestartKeysFewWrites(t *testing.T) {
	st := &applyCounter{Store: store.NewMemory()}
	e := newEnv(t, st)
	seed(t, e.c, 2, 4, 4)
	for h := range 4 {
		for range 2 {
			if _, err := e.c.Allocate(e.ctx, pool.Request{Host: fmt.Sprintf("host%d", h), Count: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.srv.Close()
	e.m.Close()
	st.mu.Lock()
	st.keygen = nil
	st.mu.Unlock()
	e2 := &env{t: t, st: st, gpu: e.gpu, sw: e.sw, host: e.host, ctx: e.ctx}
	e2.start()
	waitfor.Until(t, "the restarted manager re-keys the 8 pairs", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		n := 0
		for _, k := range st.keygen {
			n += k
		}
		return n >= 8
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.keygen) != 1 {
		t.Fatalf("key generation writes after a restart with 8 active pairs: %v, want one", st.keygen)
	}
}
