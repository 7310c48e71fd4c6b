package managerbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/etcdtest"
	"github.com/dxpu/dxpu/internal/privtest"
)

// checkRun checks what every run must show, never its speed: allocations
// made and released, no GPU lent twice, the clients', the pool's and the
// agents' counts equal, and the restarted manager lending what the first
// one did before it answered.
func checkRun(t *testing.T, r Result, o Options) {
	t.Helper()
	t.Logf("%+v", r)
	if !r.InvariantsHold || r.OverAllocated != 0 || r.AgentConflicts != 0 || !r.CountsAddUp || r.Errors != 0 {
		t.Fatalf("invariants: %+v", r)
	}
	if r.Allocations == 0 || r.Releases == 0 || r.AllocsPerSecond <= 0 || r.AllocLatency.Count != r.Allocations ||
		r.AllocLatency.P50Us <= 0 || r.AllocLatency.P99Us < r.AllocLatency.P50Us {
		t.Errorf("no load measured: %+v", r)
	}
	if r.GPUsUsed == 0 || r.GPUsUsed != r.GPUsHeld || r.GPUsUsed != r.GPUsPaired || r.RestartGPUsUsed != r.GPUsUsed-r.RestartFreedGPUs || r.PeakGPUsHeld > o.GPUs {
		t.Errorf("counts: %+v", r)
	}
	if r.RestartMs <= 0 || r.GPUs != o.GPUs || r.Boxes != o.GPUs/GPUsPerBox || r.Clients != o.Clients {
		t.Errorf("result %+v", r)
	}
}

// TestSmallBolt runs the bench small on bbolt (96 GPUs, 5 clients, 2 s).
func TestSmallBolt(t *testing.T) {
	o := Options{GPUs: 96, Hosts: 20, Clients: 5, Duration: 2 * time.Second, Dir: t.TempDir(), MinOps: 12}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, o)
}

// TestSmallMemory runs it on the in-memory store, the baseline.
func TestSmallMemory(t *testing.T) {
	o := Options{Store: "memory", GPUs: 96, Hosts: 20, Clients: 5, Duration: 500 * time.Millisecond, MinOps: 12}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, o)
}

// TestSmallEtcd runs it on a three-member etcd cluster (skipped without
// etcd).
func TestSmallEtcd(t *testing.T) {
	c := etcdtest.Start(t, 3)
	o := Options{Store: "etcd", EtcdEndpoints: c.Endpoints, GPUs: 96, Hosts: 20, Clients: 5, Duration: 2 * time.Second, MinOps: 12}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, o)
}

// TestReport: the text names the figures, the JSON has the keys, and bad
// options are usage errors that print nothing.
func TestReport(t *testing.T) {
	o := Options{GPUs: 48, Hosts: 10, Clients: 3, Duration: 300 * time.Millisecond, MinOps: 12}
	var out bytes.Buffer
	if err := WriteReport(context.Background(), o, false, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"store bbolt: 48 GPUs in 6 boxes, 10 hosts, 3 clients", "over-allocated 0, agent conflicts 0", "(add up: true)", "restart (store reopened"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := WriteReport(context.Background(), o, true, &out); err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(out.Bytes(), &keys); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"allocs_per_s", "alloc_latency", "over_allocated", "agent_conflicts", "counts_add_up", "restart_ms", "invariants_hold"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if p50, ok := keys["alloc_latency"].(map[string]any)["p50_us"].(float64); !ok || p50 <= 0 {
		t.Errorf("alloc_latency.p50_us %v", keys["alloc_latency"])
	}
	for name, bad := range map[string]Options{
		"gpus not a multiple of 8": {GPUs: 100}, "store": {Store: "redis"},
		"clients": {Clients: -1}, "hosts": {Hosts: -3},
	} {
		out.Reset()
		if err := WriteReport(context.Background(), bad, false, &out); !errors.Is(err, apperr.ErrUsage) || out.Len() > 0 {
			t.Errorf("%s: %v, printed %q; want a usage error and nothing printed", name, err, out.String())
		}
	}
}

// TestValidateAsGiven: Validate, what the command calls on its flags'
// values, refuses an explicit 0 (Run reads 0 as the default) and etcd
// endpoints that are no http(s) URL with a host and port, naming the flag.
func TestValidateAsGiven(t *testing.T) {
	t.Parallel()
	flags := Options{Store: "bbolt", GPUs: 10000, Hosts: 1000, Clients: 50, Duration: 10 * time.Second, Seed: 1}
	if err := Validate(flags); err != nil {
		t.Fatalf("the flags' defaults: %v", err)
	}
	for want, mod := range map[string]func(*Options){
		"--gpus 0:":     func(o *Options) { o.GPUs = 0 },
		"--hosts 0:":    func(o *Options) { o.Hosts = 0 },
		"--clients 0:":  func(o *Options) { o.Clients = 0 },
		"--duration 0s": func(o *Options) { o.Duration = 0 },
		"--seed 0:":     func(o *Options) { o.Seed = 0 },
		`--etcd-endpoints "notaurl"`: func(o *Options) {
			o.Store, o.EtcdEndpoints = "etcd", []string{"notaurl"}
		},
		`--etcd-endpoints "127.0.0.1:2379"`: func(o *Options) {
			o.Store, o.EtcdEndpoints = "etcd", []string{"http://127.0.0.1:2379", "127.0.0.1:2379"}
		},
		`--etcd-endpoints "unix://x:1"`: func(o *Options) { o.Store, o.EtcdEndpoints = "etcd", []string{"unix://x:1"} },
	} {
		o := flags
		mod(&o)
		if err := Validate(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	o := flags
	o.Store, o.EtcdEndpoints = "etcd", []string{"http://10.0.0.1:2379", "https://etcd.example:2379"}
	if err := Validate(o); err != nil {
		t.Errorf("http and https endpoints: %v", err)
	}
}

// TestChecksCatch: the checks the run relies on do catch what they look
// for: a GPU returned by a second live allocation, a GPU paired twice at
// the agents, and a pool whose allocations differ from the clients'.
func TestChecksCatch(t *testing.T) {
	h := &held{by: map[string]string{}}
	a := pool.Allocation{ID: "a", GPUs: []pool.Assignment{{GPU: "g1"}, {GPU: "g2"}}}
	b := pool.Allocation{ID: "b", GPUs: []pool.Assignment{{GPU: "g2"}}}
	h.add(a)
	h.add(b)
	if h.over != 1 || h.gpus != 2 {
		t.Errorf("g2 in a and b: over %d, gpus %d; want 1, 2", h.over, h.gpus)
	}
	h.drop(a)
	h.add(b)
	if h.over != 1 || h.gpus != 1 {
		t.Errorf("after a's release b may take g2: over %d, gpus %d; want 1, 1", h.over, h.gpus)
	}

	ag := newAgents()
	g := ag.gpu()
	ctx := context.Background()
	_ = g.ProgramPair(ctx, manager.Pair{ID: 1, GPU: "g1"})
	_ = g.ProgramPair(ctx, manager.Pair{ID: 1, GPU: "g1"}) // idempotent
	if _, c := ag.counts(); c != 0 {
		t.Errorf("the same pair twice: %d conflicts", c)
	}
	_ = g.ProgramPair(ctx, manager.Pair{ID: 2, GPU: "g1"})
	if n, c := ag.counts(); c != 1 || n != 1 {
		t.Errorf("g1 in pairs 1 and 2: %d paired, %d conflicts; want 1, 1", n, c)
	}

	p := pool.New()
	if _, err := p.AddBox(newBox(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddHost(newHost(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Reserve("x", pool.Request{Host: hostID(0), Count: 1}); err != nil {
		t.Fatal(err)
	}
	x, _ := p.Activate("x")
	if !poolMatches(p, [][]pool.Allocation{{x}}) {
		t.Error("the pool's one allocation, held: no match")
	}
	if poolMatches(p, nil) {
		t.Error("an allocation no client holds: a match")
	}
	// Every box and host of a large pool is valid and distinct: the
	// manager loads them all.
	big := pool.New()
	for i := range 1300 {
		if _, err := big.AddBox(newBox(i)); err != nil {
			t.Fatalf("box %d: %v", i, err)
		}
		if _, err := big.AddHost(newHost(i)); err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
	}
	y := x
	y.GPUs = []pool.Assignment{{GPU: "box00000-g7"}}
	if poolMatches(p, [][]pool.Allocation{{y}}) {
		t.Error("the clients hold other GPUs than the pool lent: a match")
	}
}

// TestLocalEtcd: without endpoints, --store etcd starts a three-member
// cluster on loopback for the run, and stops it after (skipped without
// etcd).
func TestLocalEtcd(t *testing.T) {
	privtest.Tool(t, "etcd")
	o := Options{Store: "etcd", GPUs: 48, Hosts: 10, Clients: 3, Duration: 500 * time.Millisecond, MinOps: 12}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	checkRun(t, r, o)
	if !r.EtcdLocal || len(r.EtcdEndpoints) != 3 {
		t.Fatalf("local cluster: %v, endpoints %v", r.EtcdLocal, r.EtcdEndpoints)
	}
	if s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: r.EtcdEndpoints, DialTimeout: 500 * time.Millisecond}); err == nil {
		s.Close()
		t.Errorf("the run's cluster %v still answers after it", r.EtcdEndpoints)
	}
}

// TestFreeNext: clients free from their first allocation held on, not
// only once they hold their share (at 10,000 GPUs on a loaded machine a
// client made 12 allocations in 10 s and, so, freed nothing), and settle
// around hold: half the draws free there, all from 2*hold on.
func TestFreeNext(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	frac := func(held, hold int) float64 {
		n := 0
		for range 10000 {
			if freeNext(r, held, hold) {
				n++
			}
		}
		return float64(n) / 10000
	}
	if f := frac(0, 26); f != 0 {
		t.Errorf("holding nothing: frees %v of the time", f)
	}
	if f := frac(2, 26); f < 0.02 || f > 0.06 {
		t.Errorf("holding 2 of 26: frees %v of the time, want about 2/52", f)
	}
	if f := frac(26, 26); f < 0.45 || f > 0.55 {
		t.Errorf("holding its share: frees %v of the time, want about half", f)
	}
	if f := frac(52, 26); f != 1 {
		t.Errorf("holding twice its share: frees %v of the time, want always", f)
	}
}

// makeRoom frees one allocation before the restart when the restarted
// manager's first allocation (host 0, one GPU) might not fit: host 0's own,
// or any when the pool is full; none while there is room. A loaded run
// ended with the pool full and the restart's allocation failed (a whole
// stress's race pass).
func TestMakeRoomForTheRestart(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	if err := seed(ctx, st, 1, 3); err != nil { // one box of GPUsPerBox GPUs
		t.Fatal(err)
	}
	m, err := startManager(ctx, st, newAgents(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if freed, err := makeRoom(ctx, m, hostID(0)); err != nil || freed != 0 {
		t.Fatalf("an empty pool: freed %d, %v; want nothing", freed, err)
	}
	// Hosts 1 and 2 take every GPU: the pool is full, host 0 holds none.
	for i := 0; m.Pool().Stats().Free > 0; i++ {
		if _, err := m.Allocate(ctx, pool.Request{Host: hostID(1 + i%2), Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if freed, err := makeRoom(ctx, m, hostID(0)); err != nil || freed != 1 || m.Pool().Stats().Free != 1 {
		t.Fatalf("a full pool: freed %d (%v), %d free; want one GPU freed", freed, err, m.Pool().Stats().Free)
	}
	a, err := m.Allocate(ctx, pool.Request{Host: hostID(0), Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Host 0 holds one: its own allocation goes, though the pool is full.
	if freed, err := makeRoom(ctx, m, hostID(0)); err != nil || freed != 1 {
		t.Fatalf("host 0 holding: freed %d, %v", freed, err)
	}
	if _, err := m.Pool().Allocation(a.ID); err == nil {
		t.Fatal("host 0's allocation kept")
	}
}
