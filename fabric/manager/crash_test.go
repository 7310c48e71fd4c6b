package manager_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/fakeagent"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// TestSIGKILLMidAllocation runs the manager as a separate process on a bbolt
// file, with file-backed agents that survive it (as real bridges would) and
// slow enough that sagas are in flight, kills it with SIGKILL while clients
// allocate and free, restarts it, and checks that every allocation is
// complete (active, programmed on every agent, hot-added) or rolled back
// (nowhere), and that everything acknowledged before the kill survived.
func TestSIGKILLMidAllocation(t *testing.T) {
	privtest.Short(t, "starts subprocesses")
	dir := t.TempDir()
	env := []string{"DXPU_TEST_BOLT=" + filepath.Join(dir, "pool.db"), "DXPU_TEST_AGENTS=" + dir,
		"DXPU_TEST_DELAY=3ms", "DXPU_TEST_TOKEN=" + token}
	for round := 0; round < 3; round++ {
		d := startDaemon(t, env...)
		c := d.client(token)
		ctx := context.Background()
		if round == 0 {
			seed(t, c, 4, 8, 6)
		}
		var (
			mu      sync.Mutex
			acked   = map[string]pool.Allocation{} // allocations acknowledged and not freed
			freed   = map[string]bool{}
			freeing = map[string]bool{} // free requested, answer not seen
			nAcks   atomic.Int64
			stop    = make(chan struct{})
			wg      sync.WaitGroup
			killed  atomic.Bool
		)
		before, err := c.Allocations(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range before {
			acked[a.ID] = a
		}
		for w := 0; w < 12; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if i%3 == 2 {
						mu.Lock()
						var victim string
						for id := range acked {
							victim = id
							break
						}
						a := acked[victim]
						delete(acked, victim)
						freeing[victim] = true
						mu.Unlock()
						if victim == "" {
							continue
						}
						_, err := c.Free(ctx, victim)
						mu.Lock()
						switch {
						case err == nil:
							delete(freeing, victim)
							freed[victim] = true
							nAcks.Add(1)
						case !killed.Load():
							t.Errorf("free %s: %v", victim, err)
							delete(freeing, victim)
							acked[victim] = a
						}
						mu.Unlock()
						continue
					}
					a, err := c.Allocate(ctx, pool.Request{Host: fmt.Sprintf("host%d", (w+i)%6), Count: 1 + (w+i)%3})
					if err != nil {
						if !killed.Load() && !ctlclient.IsCode(err, manager.CodeInsufficient) && !ctlclient.IsCode(err, manager.CodeBusy) && !ctlclient.IsCode(err, manager.CodeNotFound) {
							t.Errorf("allocate: %v", err)
						}
						continue
					}
					mu.Lock()
					acked[a.ID] = a
					mu.Unlock()
					nAcks.Add(1)
				}
			}(w)
		}
		waitfor.Progress(t, fmt.Sprintf("round %d: acknowledged calls", round), func() (bool, uint64) {
			n := nAcks.Load()
			return n >= 25, uint64(n)
		})
		killed.Store(true)
		d.kill() // SIGKILL, mid-saga for several requests
		close(stop)
		wg.Wait()

		d2 := startDaemon(t, env...)
		c2 := d2.client(token)
		after, err := c2.Allocations(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]pool.Allocation{}
		for _, a := range after {
			got[a.ID] = a
		}
		for id, a := range acked {
			if g, ok := got[id]; !ok || !slices.Equal(g.GPUIDs(), a.GPUIDs()) {
				t.Errorf("round %d: acknowledged allocation %s lost or changed: %+v", round, id, g)
			}
		}
		for id := range freed {
			if _, ok := got[id]; ok {
				t.Errorf("round %d: acknowledged free of %s undone", round, id)
			}
		}
		unsure := 0
		for id := range got {
			if _, ok := acked[id]; !ok {
				unsure++
			}
		}
		t.Logf("round %d: %d acknowledged calls before SIGKILL, %d frees in flight; after restart %d allocations, %d of them from calls the kill interrupted",
			round, nAcks.Load(), len(freeing), len(got), unsure)
		// The agents' files are what the bridges hold now.
		var agents [3]*fakeagent.Agent
		for i, name := range []string{"gpu", "switch", "host"} {
			if agents[i], err = fakeagent.Open(name, filepath.Join(dir, name+".log")); err != nil {
				t.Fatal(err)
			}
			agents[i].Close()
		}
		agreeWith(t, c2, agents[0], agents[1], agents[2])
		s, _ := c2.Stats(ctx)
		used := 0
		for _, a := range after {
			used += len(a.GPUs)
		}
		if s.Used != used || s.Used+s.Free != 32 {
			t.Fatalf("round %d: stats %+v, allocations hold %d", round, s, used)
		}
		d2.kill()
		if t.Failed() {
			return
		}
	}
}
