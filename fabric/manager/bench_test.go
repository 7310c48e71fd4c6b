package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
)

// seedStore writes the benchmark pool straight into a store: 10,000
// GPUs in 1,250 boxes of 8 over 10 pods of 25 racks, and 2,000 hosts.
func seedStore(tb testing.TB, st store.Store) {
	var ops []store.Op
	for i := 0; i < 1250; i++ {
		b := pool.Box{ID: fmt.Sprintf("box%04d", i), Location: pool.Location{Pod: fmt.Sprintf("pod%d", i%10), Rack: fmt.Sprintf("rack%d", i%250)},
			Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("b%d", i), MAC: mac(0x10000 + i), IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), UDPPort: 4791}}
		for g := 0; g < 8; g++ {
			b.GPUs = append(b.GPUs, pool.GPU{ID: fmt.Sprintf("box%04d-g%d", i, g), Model: "H100", MemoryMiB: 80 << 10,
				BDF: fmt.Sprintf("0000:%02x:00.0", 0x18+g), Switch: g / 4, Port: g % 4, Health: pool.Healthy})
		}
		v, _ := json.Marshal(b)
		ops = append(ops, store.Put("box/"+b.ID, v))
	}
	for i := 0; i < 2000; i++ {
		h := pool.Host{ID: fmt.Sprintf("host%04d", i), Location: pool.Location{Pod: fmt.Sprintf("pod%d", i%10), Rack: fmt.Sprintf("rack%d", i%250)}, Ports: 32,
			Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("h%d", i), MAC: mac(0x20000 + i), IP: fmt.Sprintf("10.2.%d.%d", i/250, i%250+1), UDPPort: 4791}}
		v, _ := json.Marshal(h)
		ops = append(ops, store.Put("host/"+h.ID, v))
	}
	if err := st.Apply(context.Background(), ops...); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkManagerAllocate measures Manager.Allocate (reserve, journal, four
// saga steps with no-op agents, activate) on the 10,000-GPU pool, with 8
// concurrent callers that each free their oldest allocation once they hold
// 40 (so the pool stays about 60% used). Reports p50/p99 latency and
// allocations per second.
func BenchmarkManagerAllocate(b *testing.B) {
	for _, kind := range []string{"memory", "bbolt", "http+bbolt"} {
		b.Run(kind, func(b *testing.B) {
			var st store.Store = store.NewMemory()
			if kind != "memory" {
				bs, err := store.OpenBolt(filepath.Join(b.TempDir(), "bench.db"), time.Second)
				if err != nil {
					b.Fatal(err)
				}
				defer bs.Close()
				st = bs
			}
			seedStore(b, st)
			m, err := manager.New(manager.Config{Store: st, Logger: quiet(), ReconcileInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			allocate := func(ctx context.Context, req pool.Request) (pool.Allocation, error) { return m.Allocate(ctx, req) }
			free := func(ctx context.Context, id string) error { _, err := m.Release(ctx, id); return err }
			if kind == "http+bbolt" {
				srv := httptest.NewServer(m.Handler())
				defer srv.Close()
				c := ctlclient.New(srv.URL, "")
				allocate = c.Allocate
				free = func(ctx context.Context, id string) error { _, err := c.Free(ctx, id); return err }
			}
			const workers = 8
			var (
				mu    sync.Mutex
				lat   = make([]time.Duration, 0, b.N)
				next  atomic.Int64
				fails atomic.Int64
				wg    sync.WaitGroup
			)
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					ctx := context.Background()
					r := rand.New(rand.NewPCG(uint64(w), 9))
					var mine []string
					for next.Add(1) <= int64(b.N) {
						req := pool.Request{Host: fmt.Sprintf("host%04d", r.IntN(2000)), Count: 1 + r.IntN(8)}
						t0 := time.Now()
						a, err := allocate(ctx, req)
						d := time.Since(t0)
						if err != nil {
							fails.Add(1)
							continue
						}
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
						mine = append(mine, a.ID)
						if len(mine) > 40 {
							if err := free(ctx, mine[0]); err != nil {
								b.Error(err)
							}
							mine = mine[1:]
						}
					}
				}(w)
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if len(lat) == 0 {
				b.Fatal("no allocation succeeded")
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "allocs/s")
			b.ReportMetric(float64(fails.Load()), "refused")
		})
	}
}

// BenchmarkStartup measures what a restart or a failover costs on the
// 10,000-GPU pool with about 5,000 GPUs lent in 1,000 allocations: load
// every record from bbolt, rebuild the pool, re-apply every active
// allocation (no-op agents) and rebuild the forwarding table.
func BenchmarkStartup(b *testing.B) {
	path := filepath.Join(b.TempDir(), "startup.db")
	st, err := store.OpenBolt(path, time.Second)
	if err != nil {
		b.Fatal(err)
	}
	seedStore(b, st)
	// Journal 1,000 active allocations in one batch: a pool built from the
	// same records chooses them, as the manager would have.
	ctx := context.Background()
	p := pool.New()
	kvs, _ := st.List(ctx, "")
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "box/") {
			var bx pool.Box
			json.Unmarshal(kv.Value, &bx)
			p.AddBox(bx)
		} else {
			var h pool.Host
			json.Unmarshal(kv.Value, &h)
			p.AddHost(h)
		}
	}
	var ops []store.Op
	lent := 0
	for i := 0; lent < 5000; i++ {
		id := fmt.Sprintf("a-%06d", i)
		if _, err := p.Reserve(id, pool.Request{Host: fmt.Sprintf("host%04d", i%2000), Count: 1 + i%8}); err != nil {
			b.Fatal(err)
		}
		a, _ := p.Activate(id)
		v, _ := json.Marshal(a)
		ops = append(ops, store.Put("alloc/"+id, v))
		lent += len(a.GPUs)
	}
	if err := st.Apply(ctx, ops...); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m, err := manager.New(manager.Config{Store: st, Logger: quiet(), ReconcileInterval: -1})
		if err != nil {
			b.Fatal(err)
		}
		if s := m.Pool().Stats(); s.Used != lent {
			b.Fatalf("after load %d used, want %d", s.Used, lent)
		}
		m.Close()
	}
	b.StopTimer()
	st.Close()
}
