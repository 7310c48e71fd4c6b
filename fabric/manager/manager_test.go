package manager_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/fakeagent"
)

const token = "s3cret-token"

type env struct {
	t             testing.TB
	st            store.Store
	m             *manager.Manager
	srv           *httptest.Server
	c, anon       *ctlclient.Client
	gpu, sw, host *fakeagent.Agent
	ctx           context.Context
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newEnv(t testing.TB, st store.Store) *env {
	t.Helper()
	if st == nil {
		st = store.NewMemory()
	}
	e := &env{t: t, st: st, gpu: fakeagent.New("gpu"), sw: fakeagent.New("switch"), host: fakeagent.New("host"), ctx: context.Background()}
	e.start()
	return e
}

func (e *env) start() {
	m, err := manager.New(manager.Config{Store: e.st, GPUBridge: e.gpu, Switch: e.sw, HostBridge: e.host,
		Token: token, Logger: quiet(), ReconcileInterval: -1})
	if err != nil {
		e.t.Fatal(err)
	}
	e.m = m
	e.srv = httptest.NewServer(m.Handler())
	e.c = ctlclient.New(e.srv.URL, token)
	e.anon = ctlclient.New(e.srv.URL, "")
	e.t.Cleanup(func() { e.srv.Close(); m.Close() })
}

func mac(n int) string { return fmt.Sprintf("02:00:00:%02x:%02x:%02x", n>>16&0xff, n>>8&0xff, n&0xff) }

func testBox(i, gpus int) pool.Box {
	b := pool.Box{ID: fmt.Sprintf("box%d", i), Location: pool.Location{Pod: "p1", Rack: fmt.Sprintf("r%d", i%2)},
		Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("veth-b%d", i), MAC: mac(0x100 + i), IP: fmt.Sprintf("10.1.0.%d", i+1), UDPPort: 4791}}
	for g := 0; g < gpus; g++ {
		b.GPUs = append(b.GPUs, pool.GPU{ID: fmt.Sprintf("box%d-gpu%d", i, g), Model: "H100", MemoryMiB: 80 << 10,
			BDF: fmt.Sprintf("0000:%02x:00.0", 0x18+g), Switch: g / 4, Port: g % 4})
	}
	return b
}

func testHost(i int) pool.Host {
	return pool.Host{ID: fmt.Sprintf("host%d", i), Location: pool.Location{Pod: "p1", Rack: fmt.Sprintf("r%d", i%2)}, Ports: 32,
		Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("veth-h%d", i), MAC: mac(0x200 + i), IP: fmt.Sprintf("10.2.0.%d", i+1), UDPPort: 4791}}
}

func seed(t testing.TB, c *ctlclient.Client, boxes, gpus, hosts int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < boxes; i++ {
		if _, err := c.RegisterBox(ctx, testBox(i, gpus)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < hosts; i++ {
		if _, err := c.RegisterHost(ctx, testHost(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func pairIDs(allocs ...pool.Allocation) []uint32 {
	out := []uint32{}
	for _, a := range allocs {
		for _, g := range a.GPUs {
			out = append(out, g.Pair)
		}
	}
	slices.Sort(out)
	return out
}

// agree checks that every agent and the published table hold exactly the
// pairs of the active allocations, all hot-added, and that the pool is
// consistent.
func (e *env) agree() {
	e.t.Helper()
	agreeWith(e.t, e.c, e.gpu, e.sw, e.host)
	if err := e.m.Pool().CheckInvariants(); err != nil {
		e.t.Fatal(err)
	}
}

func agreeWith(t testing.TB, c *ctlclient.Client, gpu, sw, host *fakeagent.Agent) {
	t.Helper()
	ctx := context.Background()
	allocs, err := c.Allocations(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		if a.State != pool.StateActive {
			t.Errorf("allocation %s is %s", a.ID, a.State)
		}
	}
	want := pairIDs(allocs...)
	tab, err := c.Table(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var inTable []uint32
	for _, p := range tab.Pairs {
		inTable = append(inTable, p.ID)
	}
	slices.Sort(inTable)
	for name, got := range map[string][]uint32{"gpu bridge": gpu.Pairs(), "switch": sw.Pairs(), "host bridge": host.Pairs(), "hot-added": host.HotAdded(), "table": inTable} {
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s holds pairs %v, allocations hold %v", name, got, want)
		}
	}
}

func TestAllocateAndFree(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 2, 8, 2)
	a, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if a.State != pool.StateActive || len(a.GPUs) != 3 || !strings.HasPrefix(a.ID, "a-") {
		t.Fatalf("allocation %+v", a)
	}
	// host0 sits in rack r0 with box0.
	for _, g := range a.GPUs {
		if g.Box != "box0" {
			t.Fatalf("GPU from %s, want the rack-local box0", g.Box)
		}
	}
	e.agree()
	tab, _ := e.c.Table(e.ctx)
	p := tab.Pairs[0]
	if p.Host.Port != "veth-h0" || p.GPU.Port != "veth-b0" || p.GPU.MAC.String() != mac(0x100) || p.Host.IP.String() != "10.2.0.1" || p.Host.UDPPort != 4791 {
		t.Fatalf("table entry %+v", p)
	}
	if err := tab.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.Allocation(e.ctx, a.ID)
	if err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("GET allocation: %+v %v", got, err)
	}
	if _, err := e.c.Free(e.ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Free(e.ctx, a.ID); !ctlclient.IsCode(err, manager.CodeNotFound) {
		t.Fatalf("double free: %v", err)
	}
	e.agree()
	if len(e.gpu.Pairs()) != 0 || len(e.host.HotAdded()) != 0 || e.host.Calls(fakeagent.OpHotRemove) != 3 {
		t.Fatalf("after free: gpu %v host %v hot-removes %d", e.gpu.Pairs(), e.host.HotAdded(), e.host.Calls(fakeagent.OpHotRemove))
	}
	if s, _ := e.c.Stats(e.ctx); s.Free != 16 || s.Used != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func storeDump(t testing.TB, st store.Store) string {
	kvs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, kv := range kvs {
		if strings.HasPrefix(kv.Key, "keygen/") {
			continue // key generation counters only grow, also over a rollback (KEY-9)
		}
		fmt.Fprintf(&b, "%s=%s\n", kv.Key, kv.Value)
	}
	return b.String()
}

func poolDump(t testing.TB, c *ctlclient.Client) string {
	ctx := context.Background()
	gpus, err := c.GPUs(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	allocs, _ := c.Allocations(ctx, "")
	hosts, _ := c.Hosts(ctx)
	b, _ := json.Marshal([]any{gpus, allocs, hosts})
	return string(b)
}

func TestTooLargeFailsAndChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 2, 4, 1)
	if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 5}); err != nil {
		t.Fatal(err)
	}
	beforeStore, beforePool := storeDump(t, e.st), poolDump(t, e.c)
	beforeCalls := e.gpu.Calls(fakeagent.OpProgram)
	_, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 4})
	var ae *ctlclient.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != manager.CodeInsufficient {
		t.Fatalf("err %v, want 409 insufficient_gpus", err)
	}
	if !strings.Contains(ae.Message, "asked for 4") || !strings.Contains(ae.Message, "3 free") {
		t.Fatalf("message %q does not say what was asked and what is free", ae.Message)
	}
	if storeDump(t, e.st) != beforeStore || poolDump(t, e.c) != beforePool || e.gpu.Calls(fakeagent.OpProgram) != beforeCalls {
		t.Fatal("failed allocation changed the store, the pool or the agents")
	}
	e.agree()
}

func TestSagaStepFailureRollsBack(t *testing.T) {
	cases := []struct {
		step  manager.Step
		agent func(e *env) *fakeagent.Agent
		op    fakeagent.Op
	}{
		{manager.StepGPUBridge, func(e *env) *fakeagent.Agent { return e.gpu }, fakeagent.OpProgram},
		{manager.StepSwitch, func(e *env) *fakeagent.Agent { return e.sw }, fakeagent.OpProgram},
		{manager.StepHostBridge, func(e *env) *fakeagent.Agent { return e.host }, fakeagent.OpProgram},
		{manager.StepHotAdd, func(e *env) *fakeagent.Agent { return e.host }, fakeagent.OpHotAdd},
	}
	for _, tc := range cases {
		t.Run(string(tc.step), func(t *testing.T) {
			e := newEnv(t, nil)
			seed(t, e.c, 1, 8, 1)
			keep, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
			if err != nil {
				t.Fatal(err)
			}
			beforeStore, beforePool := storeDump(t, e.st), poolDump(t, e.c)
			tc.agent(e).FailNth(tc.op, 3) // the third pair of this step fails
			_, err = e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 4})
			var ae *ctlclient.APIError
			if !errors.As(err, &ae) || ae.Code != manager.CodeAgentFailed || !strings.Contains(ae.Message, string(tc.step)) {
				t.Fatalf("err %v, want agent_failed naming step %s", err, tc.step)
			}
			if storeDump(t, e.st) != beforeStore || poolDump(t, e.c) != beforePool {
				t.Fatalf("rolled-back allocation left traces:\n%s\n%s", beforePool, poolDump(t, e.c))
			}
			e.agree()
			if got := e.gpu.Pairs(); !reflect.DeepEqual(got, pairIDs(keep)) {
				t.Fatalf("gpu bridge holds %v", got)
			}
			// The pool still works after the failure.
			if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 6}); err != nil {
				t.Fatal(err)
			}
			e.agree()
		})
	}
}

func TestUnauthorizedChangesNothing(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 1)
	a, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 1})
	before := storeDump(t, e.st)
	wrong := ctlclient.New(e.srv.URL, "not-the-token")
	calls := map[string]func(c *ctlclient.Client) error{
		"allocate": func(c *ctlclient.Client) error {
			_, err := c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 1})
			return err
		},
		"free":    func(c *ctlclient.Client) error { _, err := c.Free(e.ctx, a.ID); return err },
		"box":     func(c *ctlclient.Client) error { _, err := c.RegisterBox(e.ctx, testBox(7, 2)); return err },
		"rm box":  func(c *ctlclient.Client) error { _, err := c.RemoveBox(e.ctx, "box0"); return err },
		"host":    func(c *ctlclient.Client) error { _, err := c.RegisterHost(e.ctx, testHost(7)); return err },
		"rm host": func(c *ctlclient.Client) error { _, err := c.RemoveHost(e.ctx, "host0"); return err },
		"drain":   func(c *ctlclient.Client) error { _, err := c.Drain(e.ctx, "box0", true); return err },
		"gpu health": func(c *ctlclient.Client) error {
			_, err := c.SetGPUHealth(e.ctx, "box0-gpu1", pool.Unhealthy)
			return err
		},
		"rtt": func(c *ctlclient.Client) error {
			return c.SetRTT(e.ctx, pool.RTT{Host: "host0", Box: "box0", RTT: 1000})
		},
	}
	for name, call := range calls {
		for _, c := range []*ctlclient.Client{e.anon, wrong} {
			err := call(c)
			var ae *ctlclient.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || ae.Code != manager.CodeUnauthorized {
				t.Errorf("%s with token %q: %v, want 401 unauthorized", name, c.Token, err)
			}
		}
	}
	if storeDump(t, e.st) != before {
		t.Fatal("unauthorized calls changed the store")
	}
	// Reads need a token too (the inventory names MACs, IPs and agents).
	if _, err := e.anon.Boxes(e.ctx); !ctlclient.IsCode(err, manager.CodeUnauthorized) {
		t.Fatalf("anonymous read: %v, want 401 unauthorized", err)
	}
	if _, err := e.c.Boxes(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.agree()
}

func TestConcurrentAllocateFreeOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	e.gpu.SetDelay(200 * time.Microsecond) // let sagas overlap
	seed(t, e.c, 6, 8, 8)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		owner  = map[string]string{} // GPU -> allocation, from responses
		kept   []string
		failed int
	)
	// 200 calls: 120 allocations, 80 of which are freed again.
	for w := 0; w < 120; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			a, err := e.c.Allocate(e.ctx, pool.Request{Host: fmt.Sprintf("host%d", w%8), Count: 1 + w%3})
			if err != nil {
				if !ctlclient.IsCode(err, manager.CodeInsufficient) {
					t.Errorf("allocate: %v", err)
				}
				mu.Lock()
				failed++
				mu.Unlock()
				return
			}
			mu.Lock()
			for _, g := range a.GPUs {
				if prev, ok := owner[g.GPU]; ok {
					t.Errorf("GPU %s handed to %s and %s", g.GPU, prev, a.ID)
				}
				owner[g.GPU] = a.ID
			}
			mu.Unlock()
			if w < 80 {
				mu.Lock()
				for _, g := range a.GPUs {
					delete(owner, g.GPU)
				}
				mu.Unlock()
				if _, err := e.c.Free(e.ctx, a.ID); err != nil {
					t.Errorf("free %s: %v", a.ID, err)
				}
				return
			}
			mu.Lock()
			kept = append(kept, a.ID)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	allocs, _ := e.c.Allocations(e.ctx, "")
	var ids []string
	used := 0
	for _, a := range allocs {
		ids = append(ids, a.ID)
		used += len(a.GPUs)
	}
	slices.Sort(ids)
	slices.Sort(kept)
	if !slices.Equal(ids, kept) {
		t.Fatalf("pool holds %v, callers kept %v", ids, kept)
	}
	s, _ := e.c.Stats(e.ctx)
	if s.Used != used || s.Used+s.Free != 48 || s.Used != len(owner) {
		t.Fatalf("stats %+v, allocations use %d, callers own %d", s, used, len(owner))
	}
	t.Logf("%d allocations kept, %d refused for lack of GPUs, %d GPUs used", len(kept), failed, s.Used)
	e.agree()
	// The store says the same as the pool: a fresh manager on it agrees.
	before := poolDump(t, e.c)
	e2 := &env{t: t, st: e.st, gpu: e.gpu, sw: e.sw, host: e.host, ctx: e.ctx}
	e.srv.Close()
	e.m.Close()
	e2.start()
	if after := poolDump(t, e2.c); after != before {
		t.Fatalf("reloaded pool differs:\n%s\n%s", before, after)
	}
	e2.agree()
}

func TestBadRequestsNameTheField(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 2, 1)
	cases := []struct {
		method, path, body string
		status             int
		code, mention      string
	}{
		{"POST", "/v1/allocations", `{"host":"host0","count":1,"colour":"red"}`, 400, "bad_request", `"colour"`},
		{"POST", "/v1/allocations", `{"host":"host0","count":"two"}`, 400, "bad_request", "count"},
		{"POST", "/v1/allocations", `{"count":1}`, 400, "bad_request", "host"},
		{"POST", "/v1/allocations", `{"host":"host0"}`, 400, "bad_request", "count"},
		{"POST", "/v1/allocations", `{"host":"host0","count":1,`, 400, "bad_request", "malformed"},
		{"POST", "/v1/allocations", `{"host":"host0","count":1}{}`, 400, "bad_request", "trailing"},
		{"POST", "/v1/allocations", ``, 400, "bad_request", "empty"},
		{"POST", "/v1/allocations", `{"host":"host0","count":1,"max_rtt":"soon"}`, 400, "bad_request", "max_rtt"},
		{"POST", "/v1/allocations", `{"host":"nohost","count":1}`, 404, "not_found", "nohost"},
		{"POST", "/v1/allocations", `{"host":"host0","count":-2}`, 400, "invalid_argument", "count"},
		{"POST", "/v1/boxes", `{"id":"b","bridge":{"switch_port":"p","mac":"nope"}}`, 400, "invalid_argument", "bridge.mac"},
		{"POST", "/v1/hosts", `{"id":"h","bridge":{"switch_port":"p","mac":"02:00:00:00:00:09"},"ports":8}`, 400, "invalid_argument", "ports"},
		{"POST", "/v1/gpus/box0-gpu0/health", `{"health":"sick"}`, 400, "invalid_argument", "sick"},
		{"GET", "/v1/table?watch=1", ``, 400, "bad_request", "version"},
		{"GET", "/v1/gpus?state=odd", ``, 400, "bad_request", "state"},
		{"GET", "/v1/nothing", ``, 404, "not_found", "/v1/nothing"},
		{"DELETE", "/v1/hosts/host0", ``, 200, "", ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, e.srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s %s: status %d (%s), want %d", c.method, c.path, c.body, resp.StatusCode, body, c.status)
			continue
		}
		if c.code == "" {
			continue
		}
		var env struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(body, &env); err != nil || env.Error.Code != c.code || !strings.Contains(env.Error.Message, c.mention) {
			t.Errorf("%s %s %s: body %s, want code %s mentioning %s", c.method, c.path, c.body, body, c.code, c.mention)
		}
	}
}

func TestGPUFailureSurpriseRemovesOnlyThatGPU(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 8, 2)
	a0, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3})
	a1, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host1", Count: 3})
	victim := a0.GPUs[1]
	ch, err := e.c.SetGPUHealth(e.ctx, victim.GPU, pool.Unhealthy)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Lost == nil || ch.Lost.Pair != victim.Pair || ch.GPU.Health != pool.Unhealthy {
		t.Fatalf("change %+v", ch)
	}
	s := e.host.Surprises()
	if len(s) != 1 || s[0].ID != victim.Pair || s[0].Host != "host0" || s[0].HostPort != victim.HostPort {
		t.Fatalf("surprise removals %+v", s)
	}
	got0, _ := e.c.Allocation(e.ctx, a0.ID)
	got1, _ := e.c.Allocation(e.ctx, a1.ID)
	if !reflect.DeepEqual(got0.GPUs, []pool.Assignment{a0.GPUs[0], a0.GPUs[2]}) || !reflect.DeepEqual(got0.Lost, []string{victim.GPU}) {
		t.Fatalf("a0 now %+v", got0)
	}
	if !reflect.DeepEqual(got1, a1) {
		t.Fatalf("a1 disturbed: %+v", got1)
	}
	if e.host.Calls(fakeagent.OpHotRemove) != 0 {
		t.Fatal("an orderly hot-remove was sent besides the surprise removal")
	}
	e.agree() // the dead GPU's pair is gone everywhere, the other five stay
	un, _ := e.c.GPUs(e.ctx, "", "unhealthy")
	if len(un) != 1 || un[0].ID != victim.GPU {
		t.Fatalf("unhealthy list %+v", un)
	}
}

func TestDrain(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 2, 4, 1)
	a, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	res, err := e.c.Drain(e.ctx, "box0", true)
	if err != nil || !res.Box.Draining || !reflect.DeepEqual(res.Allocations, []string{a.ID}) {
		t.Fatalf("drain: %+v %v", res, err)
	}
	if res.Box.GPUs[0].Allocation != a.ID || res.Box.GPUs[1].Allocation != a.ID {
		t.Fatalf("drained box does not show its lent GPUs: %+v", res.Box.GPUs)
	}
	b, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range b.GPUs {
		if g.Box == "box0" {
			t.Fatal("allocation on a draining box")
		}
	}
	if _, err := e.c.RemoveBox(e.ctx, "box0"); !ctlclient.IsCode(err, manager.CodeInUse) {
		t.Fatalf("removing a box with lent GPUs: %v", err)
	}
	e.c.Free(e.ctx, a.ID)
	if _, err := e.c.RemoveBox(e.ctx, "box0"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Drain(e.ctx, "box0", false); !ctlclient.IsCode(err, manager.CodeNotFound) {
		t.Fatalf("%v", err)
	}
}

func TestTableWatch(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 1)
	t0, _ := e.c.Table(e.ctx)
	got := make(chan error, 1)
	go func() {
		t1, err := e.c.WatchTable(e.ctx, t0.Version, 30*time.Second)
		if err == nil && (t1.Version == t0.Version || len(t1.Pairs) == 0) {
			err = fmt.Errorf("watch returned version %d with %d pairs", t1.Version, len(t1.Pairs))
		}
		got <- err
	}()
	if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2}); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// An old version returns at once; a short timeout returns unchanged.
	t2, err := e.c.WatchTable(e.ctx, t0.Version, time.Minute)
	if err != nil || len(t2.Pairs) != 2 {
		t.Fatalf("%+v %v", t2, err)
	}
	t3, err := e.c.WatchTable(e.ctx, t2.Version, 10*time.Millisecond)
	if err != nil || t3.Version != t2.Version {
		t.Fatalf("%+v %v", t3, err)
	}
}

func TestMetricsAndHealthz(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 1)
	e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3})
	e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 3})
	e.c.SetGPUHealth(e.ctx, "box0-gpu3", pool.Unhealthy)
	resp, err := http.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`dxpu_pool_gpus{state="total"} 4`, `dxpu_pool_gpus{state="used"} 3`, `dxpu_pool_gpus{state="free"} 0`,
		`dxpu_pool_gpus{state="unhealthy"} 1`, `dxpu_allocations_total{result="ok"} 1`,
		`dxpu_allocations_total{result="insufficient_gpus"} 1`, `dxpu_allocation_duration_seconds_count 1`,
		`dxpu_manager_leader 1`, `dxpu_gpu_failures_total 1`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	h, err := e.anon.Healthz(e.ctx)
	if err != nil || h.Status != "ok" || h.Role != "leader" {
		t.Fatalf("%+v %v", h, err)
	}
}

// TestRestartReconciles: a manager that finds a pending allocation in its
// journal rolls it back, re-applies active ones an agent lost, and removes
// pairs no allocation holds.
func TestRestartReconciles(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenBolt(filepath.Join(dir, "pool.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := newEnv(t, st)
	seed(t, e.c, 1, 8, 1)
	keep, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	// Forge the journal of a crashed saga: pending, half programmed.
	e.gpu.FailAlways(fakeagent.OpRemove, true) // so the failed saga cannot clean up
	e.sw.FailNth(fakeagent.OpProgram, 2)
	if _, err := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2}); err == nil {
		t.Fatal("saga should fail")
	}
	allocs, _ := e.c.Allocations(e.ctx, "")
	if len(allocs) != 2 {
		t.Fatalf("the undone saga should stay journaled (releasing): %+v", allocs)
	}
	e.gpu.FailAlways(fakeagent.OpRemove, false)
	// An agent loses a pair, and holds a stray one.
	e.host.RemovePair(e.ctx, manager.Pair{ID: keep.GPUs[0].Pair})
	e.sw.ProgramPair(e.ctx, manager.Pair{ID: 999, Allocation: "a-gone"})
	e.srv.Close()
	e.m.Close()
	e2 := &env{t: t, st: st, gpu: e.gpu, sw: e.sw, host: e.host, ctx: e.ctx}
	e2.start()
	allocs, _ = e2.c.Allocations(e.ctx, "")
	if len(allocs) != 1 || allocs[0].ID != keep.ID {
		t.Fatalf("after restart: %+v", allocs)
	}
	e2.agree()
}

// TestPeriodicReconcile: the sweep removes a pair an agent holds that no
// allocation knows, re-programs (and re-hot-adds) a pair an agent lost, and
// finishes a release whose undo failed.
func TestPeriodicReconcile(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 8, 1)
	a, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	b, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	e.gpu.ProgramPair(e.ctx, manager.Pair{ID: 4242, Allocation: "stray"})
	e.host.RemovePair(e.ctx, manager.Pair{ID: a.GPUs[1].Pair}) // the host bridge rebooted, say
	e.gpu.FailAlways(fakeagent.OpRemove, true)
	if _, err := e.c.Free(e.ctx, b.ID); !ctlclient.IsCode(err, manager.CodeAgentFailed) {
		t.Fatalf("free with a failing GPU bridge: %v", err)
	}
	if got, _ := e.c.Allocation(e.ctx, b.ID); got.State != pool.StateReleasing {
		t.Fatalf("failed release left state %q", got.State)
	}
	e.gpu.FailAlways(fakeagent.OpRemove, false)
	if err := e.m.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Allocation(e.ctx, b.ID); !ctlclient.IsCode(err, manager.CodeNotFound) {
		t.Fatalf("release not finished: %v", err)
	}
	e.agree()
	if slices.Contains(e.gpu.Pairs(), 4242) {
		t.Fatal("stray pair kept")
	}
}

// TestReRegistrationReportsFailure: a box bridge that re-registers with a
// lent GPU marked unhealthy triggers the same surprise removal.
func TestReRegistrationReportsFailure(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 1)
	a, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 2})
	b := testBox(0, 4)
	b.GPUs[0].Health = pool.Unhealthy // lent to a
	b.GPUs[3].Health = pool.Unhealthy // free
	got, err := e.c.RegisterBox(e.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.GPUs[0].Health != pool.Unhealthy || got.GPUs[0].Allocation != "" || got.GPUs[3].Health != pool.Unhealthy {
		t.Fatalf("box after re-registration: %+v", got.GPUs)
	}
	if s := e.host.Surprises(); len(s) != 1 || s[0].GPU != "box0-gpu0" {
		t.Fatalf("surprise removals %+v", s)
	}
	now, _ := e.c.Allocation(e.ctx, a.ID)
	if len(now.GPUs) != 1 || now.GPUs[0] != a.GPUs[1] {
		t.Fatalf("allocation now %+v", now)
	}
	e.agree()
}

// TestLoadSkipsCorruptRecords: a damaged record costs only itself.
func TestLoadSkipsCorruptRecords(t *testing.T) {
	st := store.NewMemory()
	e := newEnv(t, st)
	seed(t, e.c, 2, 2, 1)
	a, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 1})
	e.srv.Close()
	e.m.Close()
	st.Apply(e.ctx, store.Put("box/box1", []byte("{not json")), store.Put("alloc/a-bogus", []byte(`{"id":"a-bogus","host":"host0","state":"active","gpus":[{"gpu":"nope","box":"box0","pair":9,"host_port":5}]}`)))
	e2 := &env{t: t, st: st, gpu: e.gpu, sw: e.sw, host: e.host, ctx: e.ctx}
	e2.start()
	boxes, _ := e2.c.Boxes(e.ctx)
	allocs, _ := e2.c.Allocations(e.ctx, "")
	if len(boxes) != 1 || boxes[0].ID != "box0" || len(allocs) != 1 || allocs[0].ID != a.ID {
		t.Fatalf("boxes %+v allocations %+v", boxes, allocs)
	}
	resp, err := http.Get(e2.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "dxpu_store_load_errors_total 2") {
		t.Fatal("load errors not counted")
	}
	e2.agree()
}

// TestAgentTimeout: an agent that hangs fails its step after StepTimeout
// and the saga rolls back (agent_failed, not a hang).
func TestAgentTimeout(t *testing.T) {
	e := &env{t: t, st: store.NewMemory(), gpu: fakeagent.New("gpu"), sw: fakeagent.New("switch"), host: fakeagent.New("host"), ctx: context.Background()}
	m, err := manager.New(manager.Config{Store: e.st, GPUBridge: e.gpu, Switch: e.sw, HostBridge: e.host,
		Token: token, Logger: quiet(), ReconcileInterval: -1, StepTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	e.srv = httptest.NewServer(m.Handler())
	e.c = ctlclient.New(e.srv.URL, token)
	t.Cleanup(func() { e.srv.Close(); m.Close() })
	seed(t, e.c, 1, 2, 1)
	e.host.SetDelay(time.Hour)
	_, err = e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 1})
	if !ctlclient.IsCode(err, manager.CodeAgentFailed) || !strings.Contains(err.Error(), "deadline") || !strings.Contains(err.Error(), "rollback pending") {
		t.Fatalf("%v", err)
	}
	// The host agent also hangs on the undo, so the allocation waits,
	// journaled as releasing, for the reconciler.
	allocs, _ := e.c.Allocations(e.ctx, "")
	if len(allocs) != 1 || allocs[0].State != pool.StateReleasing {
		t.Fatalf("%+v", allocs)
	}
	e.host.SetDelay(0)
	if err := e.m.Reconcile(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.agree()
	if s, _ := e.c.Stats(e.ctx); s.Free != 2 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRequestIDMakesAllocateIdempotent: a client that retries (after a
// timeout, or a manager crash) with the same request_id gets the same
// allocation, not more GPUs.
func TestRequestIDMakesAllocateIdempotent(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 8, 2)
	req := pool.Request{Host: "host0", Count: 3, RequestID: "job-17/attempt"}
	a, err := e.c.Allocate(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"host":"host0","count":3,"request_id":"job-17/attempt"}`
	r, _ := http.NewRequest("POST", e.srv.URL+"/v1/allocations", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	var again pool.Allocation
	json.NewDecoder(resp.Body).Decode(&again)
	resp.Body.Close()
	if resp.StatusCode != 200 || again.ID != a.ID || !reflect.DeepEqual(again.GPUs, a.GPUs) {
		t.Fatalf("retry: %d %+v, want 200 and %s", resp.StatusCode, again, a.ID)
	}
	if s, _ := e.c.Stats(e.ctx); s.Used != 3 {
		t.Fatalf("retry lent more GPUs: %+v", s)
	}
	// The same request_id with other parameters (another host, another
	// count) is a conflict, not the old allocation.
	for _, other := range []pool.Request{{Host: "host1", Count: 1, RequestID: req.RequestID}, {Host: "host0", Count: 2, RequestID: req.RequestID}} {
		if _, err := e.c.Allocate(e.ctx, other); !ctlclient.IsCode(err, manager.CodeConflict) || !strings.Contains(err.Error(), "made with other parameters") {
			t.Fatalf("%+v: %v", other, err)
		}
	}
	// Once freed, the request_id may be used again.
	e.c.Free(e.ctx, a.ID)
	b, err := e.c.Allocate(e.ctx, req)
	if err != nil || b.ID == a.ID {
		t.Fatalf("%+v %v", b, err)
	}
	e.agree()
}

func TestEvents(t *testing.T) {
	e := newEnv(t, nil)
	seed(t, e.c, 1, 4, 2)
	_, start, err := e.c.Events(e.ctx, 0, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []ctlclient.Event, 1)
	go func() {
		evs, _, err := e.c.Events(e.ctx, start, "host1", 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- evs
	}()
	a0, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host0", Count: 1})
	a1, _ := e.c.Allocate(e.ctx, pool.Request{Host: "host1", Count: 2})
	evs := <-got
	if len(evs) != 1 || evs[0].Type != manager.EventAllocated || evs[0].Allocation != a1.ID || len(evs[0].GPUs) != 2 {
		t.Fatalf("host1's watch got %+v", evs)
	}
	e.c.SetGPUHealth(e.ctx, a1.GPUs[1].GPU, pool.Unhealthy)
	e.c.Free(e.ctx, a0.ID)
	e.c.Drain(e.ctx, "box0", true)
	all, next, _ := e.c.Events(e.ctx, start, "", 0)
	var types []string
	for _, ev := range all {
		types = append(types, ev.Type)
	}
	want := []string{"allocated", "allocated", "gpu_failed", "released", "box_drained"}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if f := all[2]; f.Host != "host1" || f.Pair != a1.GPUs[1].Pair || f.HostPort == nil || *f.HostPort != a1.GPUs[1].HostPort {
		t.Fatalf("gpu_failed event %+v", f)
	}
	if evs, n, _ := e.c.Events(e.ctx, next, "", 10*time.Millisecond); len(evs) != 0 || n != next {
		t.Fatalf("nothing new: %+v %d", evs, n)
	}
	// A sequence from another leader's term (ahead of ours) starts over.
	if evs, _, _ := e.c.Events(e.ctx, next+1000, "", 0); len(evs) != len(all)+3 {
		t.Fatalf("a foreign sequence got %d events, want all %d kept (3 registrations, then ours)", len(evs), len(all)+3)
	}
}
