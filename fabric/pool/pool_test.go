package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func ep(n int) Endpoint {
	return Endpoint{SwitchPort: fmt.Sprintf("sw%d", n), MAC: fmt.Sprintf("02:00:00:00:%02x:%02x", n>>8&0xff, n&0xff), IP: fmt.Sprintf("10.0.%d.%d", n>>8&0xff, n&0xff), UDPPort: 4791}
}

// epN numbers endpoints; atomic, as tests run in parallel.
var epN atomic.Int64

// nextEP is an endpoint no other call returns: a test that needs one no box
// or host of its pool has takes it here, never a fixed ep(n), which the
// counter may already have handed out.
func nextEP() Endpoint { return ep(int(epN.Add(1))) }

func box(id, pod, rack string, n int, model string, mem uint64) Box {
	b := Box{ID: id, Bridge: nextEP(), Location: Location{Pod: pod, Rack: rack}}
	for i := 0; i < n; i++ {
		b.GPUs = append(b.GPUs, GPU{ID: fmt.Sprintf("%s-g%d", id, i), Model: model, MemoryMiB: mem,
			BDF: fmt.Sprintf("0000:%02x:00.0", 0x41+i), Switch: i / 4, Port: i % 4})
	}
	return b
}

func host(id, pod, rack string) Host {
	return Host{ID: id, Bridge: nextEP(), Location: Location{Pod: pod, Rack: rack}, Ports: 32}
}

func mustAdd(t testing.TB, p *Pool, items ...any) {
	t.Helper()
	for _, it := range items {
		var err error
		switch v := it.(type) {
		case Box:
			_, err = p.AddBox(v)
		case Host:
			_, err = p.AddHost(v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func boxesOf(a Allocation) map[string]int {
	m := map[string]int{}
	for _, g := range a.GPUs {
		m[g.Box]++
	}
	return m
}

func check(t testing.TB, p *Pool) {
	t.Helper()
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// snapshot captures everything observable about a pool.
func snapshot(p *Pool) string {
	b, _ := json.Marshal([]any{p.Boxes(), p.Hosts(), p.Allocations(), p.Stats(), p.RTTs()})
	return string(b)
}

func TestPrefersNearBoxAndBestFit(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p,
		box("far8", "p2", "r9", 8, "H100", 80<<10),
		box("near8", "p1", "r1", 8, "H100", 80<<10),
		box("near2", "p1", "r1", 2, "H100", 80<<10),
		box("pod4", "p1", "r2", 4, "H100", 80<<10),
		host("h1", "p1", "r1"))

	// Two GPUs: both rack-local boxes fit; best fit is the 2-GPU box.
	a, err := p.Reserve("a1", Request{Host: "h1", Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"near2": 2}) {
		t.Fatalf("2 GPUs went to %v, want both from near2", got)
	}
	// Eight: only near8 holds 8 in the rack.
	a, err = p.Reserve("a2", Request{Host: "h1", Count: 8})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"near8": 8}) {
		t.Fatalf("8 GPUs went to %v", got)
	}
	// Rack is full: next nearest is the pod box, then the far one.
	a, err = p.Reserve("a3", Request{Host: "h1", Count: 6})
	if err != nil {
		t.Fatal(err)
	}
	// Radius reaches far8 (20µs); inside it one box fits 6: far8 (best fit).
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"far8": 6}) {
		t.Fatalf("6 GPUs went to %v", got)
	}
	a, err = p.Reserve("a4", Request{Host: "h1", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"pod4": 3}) {
		t.Fatalf("3 GPUs went to %v, want pod4 (nearer than far8)", got)
	}
	check(t, p)
}

func TestMeasuredRTTWins(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b1", "p1", "r1", 4, "A100", 40<<10), box("b2", "p2", "r5", 4, "A100", 40<<10), host("h", "p1", "r1"))
	if err := p.SetRTT(RTT{Host: "h", Box: "b1", RTT: Duration(50 * time.Microsecond)}); err != nil {
		t.Fatal(err)
	}
	a, err := p.Reserve("a", Request{Host: "h", Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if a.GPUs[0].Box != "b2" {
		t.Fatalf("got box %s; measured 50µs to b1 should lose to estimated 20µs to b2", a.GPUs[0].Box)
	}
	_, err = p.Reserve("b", Request{Host: "h", Count: 4, MaxRTT: Duration(30 * time.Microsecond)})
	if !errors.Is(err, ErrInsufficient) {
		t.Fatalf("max_rtt 30µs with 3 GPUs inside: err %v, want ErrInsufficient", err)
	}
}

func TestConstraints(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p,
		box("a100", "p1", "r1", 4, "A100", 40<<10),
		box("h100", "p1", "r2", 4, "H100", 80<<10),
		box("small", "p1", "r1", 2, "H100", 80<<10),
		host("h", "p1", "r1"))
	a, err := p.Reserve("m", Request{Host: "h", Count: 2, Model: "h100"})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range a.GPUs {
		if gg, _ := p.GPU(g.GPU); gg.Model != "H100" {
			t.Fatalf("model constraint broken: %+v", gg)
		}
	}
	a, err = p.Reserve("mem", Request{Host: "h", Count: 3, MinMemoryMiB: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"h100": 3}) {
		t.Fatalf("memory constraint: %v", got)
	}
	if _, err := p.Reserve("x", Request{Host: "h", Count: 2, MinMemoryMiB: 64 << 10}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("one 80G GPU left, asked for 2: %v", err)
	}
	// Same box: 4 A100s exist in one box.
	a, err = p.Reserve("sb", Request{Host: "h", Count: 4, SameBox: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(boxesOf(a)) != 1 {
		t.Fatalf("same_box spread over %v", boxesOf(a))
	}
	if _, err := p.Reserve("sb2", Request{Host: "h", Count: 2, SameBox: true}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("no box has 2 free: %v", err)
	}
	check(t, p)
}

func TestSpread(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b1", "p1", "r1", 8, "H100", 1), box("b2", "p1", "r1", 8, "H100", 1),
		box("b3", "p1", "r2", 8, "H100", 1), host("h", "p1", "r1"))
	a, err := p.Reserve("s", Request{Host: "h", Count: 3, Spread: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"b1": 1, "b2": 1, "b3": 1}) {
		t.Fatalf("spread 3: %v", got)
	}
	a, err = p.Reserve("t", Request{Host: "h", Count: 2, Spread: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"b1": 1, "b2": 1}) {
		t.Fatalf("spread 2 should stay in the rack: %v", got)
	}
	// Without spread, 6 go to one box of the rack (b1 and b2 have 6 free).
	a, err = p.Reserve("u", Request{Host: "h", Count: 6})
	if err != nil {
		t.Fatal(err)
	}
	if got := boxesOf(a); !reflect.DeepEqual(got, map[string]int{"b1": 6}) {
		t.Fatalf("packing 8: %v", boxesOf(a))
	}
	check(t, p)
}

func TestPCIeSwitchLocality(t *testing.T) {
	t.Parallel()
	p := New()
	b := box("b", "p", "r", 8, "H100", 1) // switches 0 (g0-g3) and 1 (g4-g7)
	mustAdd(t, p, b, host("h", "p", "r"))
	a, _ := p.Reserve("x", Request{Host: "h", Count: 1}) // takes g0 of switch 0
	if a.GPUs[0].GPU != "b-g0" {
		t.Fatalf("first GPU %s", a.GPUs[0].GPU)
	}
	a, err := p.Reserve("y", Request{Host: "h", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	// Switch 0 has exactly 3 left: best fit keeps switch 1 whole.
	if got := a.GPUIDs(); !reflect.DeepEqual(got, []string{"b-g1", "b-g2", "b-g3"}) {
		t.Fatalf("got %v", got)
	}
}

func TestInsufficientChangesNothing(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b1", "p", "r", 4, "H100", 1), box("b2", "p", "r", 4, "H100", 1), host("h", "p", "r"))
	if _, err := p.Reserve("a", Request{Host: "h", Count: 5}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(p)
	_, err := p.Reserve("b", Request{Host: "h", Count: 4})
	if !errors.Is(err, ErrInsufficient) {
		t.Fatalf("err %v, want ErrInsufficient", err)
	}
	t.Logf("error text: %v", err)
	if after := snapshot(p); after != before {
		t.Fatalf("failed reserve changed the pool:\n%s\n%s", before, after)
	}
	check(t, p)
}

func TestHostPorts(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b1", "p", "r", 40, "H100", 1), host("h", "p", "r"))
	if _, err := p.Reserve("a", Request{Host: "h", Count: 30}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(p)
	if _, err := p.Reserve("b", Request{Host: "h", Count: 3}); !errors.Is(err, ErrNoHostPorts) {
		t.Fatalf("err %v, want ErrNoHostPorts", err)
	}
	if snapshot(p) != before {
		t.Fatal("changed")
	}
	if _, err := p.AddHost(Host{ID: "h", Bridge: nextEP(), Ports: 16}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("16 ports accepted: %v", err)
	}
	if _, err := p.RemoveHost("h"); !errors.Is(err, ErrInUse) {
		t.Fatalf("removing a host with GPUs: %v", err)
	}
}

func TestDrainAndRemove(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b1", "p", "r", 2, "H100", 1), box("b2", "p", "r2", 2, "H100", 1), host("h", "p", "r"))
	a, _ := p.Reserve("a", Request{Host: "h", Count: 1})
	if a.GPUs[0].Box != "b1" {
		t.Fatal(a)
	}
	_, allocs, err := p.SetDraining("b1", true)
	if err != nil || !reflect.DeepEqual(allocs, []string{"a"}) {
		t.Fatalf("drain: %v %v", allocs, err)
	}
	// One of b1's two GPUs is lent: the other counts as draining, and the
	// box as a draining box.
	if st := p.Stats(); st.DrainingBoxes != 1 || st.Draining != 1 || st.Used != 1 {
		t.Fatalf("stats with b1 draining and its GPU lent: %+v", st)
	}
	b, _ := p.Reserve("b", Request{Host: "h", Count: 2})
	if got := boxesOf(b); !reflect.DeepEqual(got, map[string]int{"b2": 2}) {
		t.Fatalf("draining box used: %v", got)
	}
	if _, err := p.Reserve("c", Request{Host: "h", Count: 1}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("draining box used: %v", err)
	}
	if _, err := p.RemoveBox("b1"); !errors.Is(err, ErrInUse) {
		t.Fatalf("remove with lent GPU: %v", err)
	}
	// Re-registration keeps the drain flag and may not drop a lent GPU.
	nb := box("b1", "p", "r", 1, "H100", 1)
	cur, _ := p.Box("b1")
	nb.Bridge = cur.Bridge // a box with GPUs lent keeps its endpoint
	if _, err := p.AddBox(Box{ID: "b1", Bridge: nextEP()}); !errors.Is(err, ErrInUse) {
		t.Fatalf("dropping a lent GPU: %v", err)
	}
	got, err := p.AddBox(nb)
	if err != nil || !got.Draining || got.GPUs[0].Allocation != "a" {
		t.Fatalf("re-register: %+v %v", got, err)
	}
	p.Remove("a")
	if _, err := p.RemoveBox("b1"); err != nil {
		t.Fatal(err)
	}
	check(t, p)
}

func TestGPUFailureTouchesOnlyThatGPU(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b", "p", "r", 8, "H100", 1), host("h1", "p", "r"), host("h2", "p", "r"))
	a1, _ := p.Reserve("a1", Request{Host: "h1", Count: 3})
	a2, _ := p.Reserve("a2", Request{Host: "h2", Count: 3})
	victim := a1.GPUs[1]
	ch, err := p.SetHealth(victim.GPU, Unhealthy)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Lost == nil || *ch.Lost != victim || ch.Alloc == nil || len(ch.Alloc.GPUs) != 2 || !reflect.DeepEqual(ch.Alloc.Lost, []string{victim.GPU}) {
		t.Fatalf("change %+v", ch)
	}
	got1, _ := p.Allocation("a1")
	want1 := []Assignment{a1.GPUs[0], a1.GPUs[2]}
	if !reflect.DeepEqual(got1.GPUs, want1) {
		t.Fatalf("a1 now %+v, want %+v", got1.GPUs, want1)
	}
	if got2, _ := p.Allocation("a2"); !reflect.DeepEqual(got2.GPUs, a2.GPUs) {
		t.Fatal("a2 disturbed")
	}
	if s := p.Stats(); s.Unhealthy != 1 || s.Used != 5 || s.Free != 2 {
		t.Fatalf("stats %+v", s)
	}
	// The unhealthy GPU is never handed out.
	a3, err := p.Reserve("a3", Request{Host: "h1", Count: 2})
	if err != nil || slices.Contains(a3.GPUIDs(), victim.GPU) {
		t.Fatalf("%v %v", a3, err)
	}
	check(t, p)
	if _, err := p.SetHealth(victim.GPU, Healthy); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Free != 1 || s.Unhealthy != 0 {
		t.Fatalf("after repair %+v", s)
	}
}

func TestRestoreRoundTrip(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b", "p", "r", 8, "H100", 1), host("h", "p", "r"))
	a, _ := p.Reserve("a", Request{Host: "h", Count: 3})
	p.Activate("a")
	q := New()
	for _, b := range p.Boxes() {
		if _, err := q.AddBox(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, h := range p.Hosts() {
		if _, err := q.AddHost(h); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := p.Allocation("a")
	if err := q.Restore(got); err != nil {
		t.Fatal(err)
	}
	if snapshot(p) != snapshot(q) {
		t.Fatalf("restored pool differs\n%s\n%s", snapshot(p), snapshot(q))
	}
	if err := q.Restore(got); !errors.Is(err, ErrExists) {
		t.Fatalf("double restore: %v", err)
	}
	bad := got
	bad.ID = "b"
	if err := q.Restore(bad); !errors.Is(err, ErrConflict) {
		t.Fatalf("restore of taken GPUs: %v", err)
	}
	// New pair IDs continue after the restored ones.
	n, _ := q.Reserve("n", Request{Host: "h", Count: 1})
	if n.GPUs[0].Pair <= a.GPUs[2].Pair {
		t.Fatalf("pair %d reused after restore", n.GPUs[0].Pair)
	}
	check(t, q)
}

func TestValidation(t *testing.T) {
	t.Parallel()
	p := New()
	cases := []struct {
		b    Box
		want string
	}{
		{Box{}, "missing required fields id, bridge.switch_port, bridge.mac"},
		{Box{Bridge: ep(1)}, "id is required"},
		{Box{ID: "a/b", Bridge: ep(1)}, "character '/'"},
		{Box{ID: "b", Bridge: Endpoint{SwitchPort: "x", MAC: "zz"}}, "bridge.mac"},
		{Box{ID: "b", Bridge: Endpoint{SwitchPort: "x", MAC: "02:00:00:00:00:01", IP: "::1"}}, "bridge.ip"},
		{Box{ID: "b", Bridge: ep(1), GPUs: []GPU{{ID: "g", Model: "x"}, {ID: "g", Model: "x"}}}, "gpus[1].id"},
		{Box{ID: "b", Bridge: ep(1), GPUs: []GPU{{ID: "g"}}}, "gpus[0].model"},
	}
	for _, c := range cases {
		_, err := p.AddBox(c.b)
		if !errors.Is(err, ErrInvalid) || !contains(err.Error(), c.want) {
			t.Errorf("AddBox(%+v) = %v, want ErrInvalid mentioning %q", c.b, err, c.want)
		}
	}
	if _, err := p.AddHost(Host{}); !errors.Is(err, ErrInvalid) || !contains(err.Error(), "missing required fields id, bridge.switch_port, bridge.mac, ports") {
		t.Errorf("AddHost({}) = %v", err)
	}
	for _, r := range []Request{{Count: 1}, {Host: "h"}, {Host: "h", Count: 1, SameBox: true, Spread: true},
		{Host: "h", Count: 1, Model: "H100\r"}, {Host: "h", Count: 1, Model: "H\x1b[2J100"}, {Host: "h", Count: 1, Model: "H\xff"}} {
		if err := r.Validate(); !errors.Is(err, ErrInvalid) || strings.ContainsAny(err.Error(), "\r\n\x1b") {
			t.Errorf("%+v: %v", r, err)
		}
	}
	if err := (Request{Host: "h", Count: 1, Model: "H100 SXM5 80GB"}).Validate(); err != nil {
		t.Errorf("a model name with spaces: %v", err)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s[:len(sub)] == sub || contains(s[1:], sub)))
}

func TestConcurrentReserveRelease(t *testing.T) {
	t.Parallel()
	p := New()
	for i := 0; i < 10; i++ {
		mustAdd(t, p, box(fmt.Sprintf("b%d", i), "p", fmt.Sprintf("r%d", i%3), 8, "H100", 1))
	}
	for i := 0; i < 8; i++ {
		mustAdd(t, p, host(fmt.Sprintf("h%d", i), "p", fmt.Sprintf("r%d", i%3)))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	lent := map[string]string{}
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []string
			for i := 0; i < 300; i++ {
				if len(mine) > 0 && r.IntN(2) == 0 {
					id := mine[0]
					mine = mine[1:]
					// Forget the GPUs before the pool frees them, so a
					// worker that gets them next finds them unowned.
					a, err := p.Allocation(id)
					mu.Lock()
					for _, g := range a.GPUs {
						delete(lent, g.GPU)
					}
					mu.Unlock()
					if _, err := p.Remove(id); err != nil {
						t.Error(err)
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					continue
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				a, err := p.Reserve(id, Request{Host: fmt.Sprintf("h%d", r.IntN(8)), Count: 1 + r.IntN(4)})
				if err != nil {
					if !errors.Is(err, ErrInsufficient) && !errors.Is(err, ErrNoHostPorts) {
						t.Error(err)
					}
					continue
				}
				mine = append(mine, id)
				mu.Lock()
				for _, g := range a.GPUs {
					if prev, ok := lent[g.GPU]; ok {
						t.Errorf("gpu %s handed to %s and %s", g.GPU, prev, id)
					}
					lent[g.GPU] = id
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	check(t, p)
	if s := p.Stats(); s.Used != len(lent) || s.Used+s.Free != 80 {
		t.Fatalf("stats %+v, %d lent", s, len(lent))
	}
}

// TestRandomOperations drives the pool with a random mix of every operation
// and checks the invariants after each.
func TestRandomOperations(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(42, 7))
	p := New()
	var allocs []string
	for step := 0; step < 3000; step++ {
		var err error
		switch op := r.IntN(10); op {
		case 0:
			_, err = p.AddBox(box(fmt.Sprintf("b%d", r.IntN(12)), "p", fmt.Sprintf("r%d", r.IntN(3)), 1+r.IntN(8), []string{"A", "B"}[r.IntN(2)], uint64(r.IntN(3))<<14))
		case 1:
			_, err = p.AddHost(host(fmt.Sprintf("h%d", r.IntN(6)), "p", fmt.Sprintf("r%d", r.IntN(3))))
		case 2, 3, 4:
			id := fmt.Sprintf("a%d", step)
			_, err = p.Reserve(id, Request{Host: fmt.Sprintf("h%d", r.IntN(6)), Count: 1 + r.IntN(6),
				SameBox: r.IntN(4) == 0, Model: []string{"", "A", "B"}[r.IntN(3)], MinMemoryMiB: uint64(r.IntN(3)) << 14})
			if err == nil {
				allocs = append(allocs, id)
			}
		case 5, 6:
			if len(allocs) > 0 {
				i := r.IntN(len(allocs))
				_, err = p.Remove(allocs[i])
				allocs = slices.Delete(allocs, i, i+1)
			}
		case 7:
			_, err = p.SetHealth(fmt.Sprintf("b%d-g%d", r.IntN(12), r.IntN(8)), []Health{Healthy, Unhealthy}[r.IntN(2)])
		case 8:
			_, _, err = p.SetDraining(fmt.Sprintf("b%d", r.IntN(12)), r.IntN(3) == 0)
		case 9:
			_, err = p.RemoveBox(fmt.Sprintf("b%d", r.IntN(12)))
		}
		if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInsufficient) && !errors.Is(err, ErrInUse) && !errors.Is(err, ErrNoHostPorts) && !errors.Is(err, ErrConflict) {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := p.CheckInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

func TestMixedBox(t *testing.T) {
	t.Parallel()
	p := New()
	b := box("mix", "p", "r", 6, "A100", 40<<10)
	for i := 3; i < 6; i++ {
		b.GPUs[i].Model, b.GPUs[i].MemoryMiB = "H100", 80<<10
	}
	mustAdd(t, p, b, box("a", "p", "r", 4, "A100", 40<<10), host("h", "p", "r"))
	a, err := p.Reserve("x", Request{Host: "h", Count: 2, Model: "H100"})
	if err != nil {
		t.Fatal(err)
	}
	// H100s are g3 (PCIe switch 0) and g4, g5 (switch 1): the pair that
	// shares a switch wins.
	if got := a.GPUIDs(); !reflect.DeepEqual(got, []string{"mix-g4", "mix-g5"}) {
		t.Fatalf("got %v", got)
	}
	if _, err := p.Reserve("y", Request{Host: "h", Count: 2, MinMemoryMiB: 80 << 10}); !errors.Is(err, ErrInsufficient) {
		t.Fatalf("one 80G GPU left: %v", err)
	}
	a, err = p.Reserve("z", Request{Host: "h", Count: 3, Model: "a100", SameBox: true})
	if err != nil || len(boxesOf(a)) != 1 {
		t.Fatalf("%v %v", a, err)
	}
	for _, g := range a.GPUs {
		if gg, _ := p.GPU(g.GPU); gg.Model != "A100" {
			t.Fatalf("got %+v", gg)
		}
	}
	check(t, p)
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	p := New()
	mustAdd(t, p, box("b", "p", "r", 4, "H100", 1), host("h", "p", "r"))
	a, err := p.Reserve("a", Request{Host: "h", Count: 2, RequestID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(p)
	got, err := p.Reserve("b", Request{Host: "h", Count: 2, RequestID: "r1"})
	if !errors.Is(err, ErrDuplicate) || got.ID != "a" || !reflect.DeepEqual(got.GPUs, a.GPUs) {
		t.Fatalf("%+v %v", got, err)
	}
	if snapshot(p) != before {
		t.Fatal("duplicate request changed the pool")
	}
	p.Remove("a")
	if _, err := p.Reserve("c", Request{Host: "h", Count: 2, RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
}

// TestNearestRadiusProperty: on random pools with random measured RTTs,
// every allocation's worst RTT is the smallest possible: no smaller RTT
// bound holds enough eligible GPUs (for same_box: no box within a smaller
// bound has enough).
func TestNearestRadiusProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	served := 0
	defer func() {
		if served < 100 {
			t.Errorf("only %d of 200 rounds allocated; the property was hardly exercised", served)
		}
	}()
	for round := 0; round < 200; round++ {
		p := New()
		nb := 2 + r.IntN(10)
		for i := 0; i < nb; i++ {
			b := box(fmt.Sprintf("b%d", i), fmt.Sprintf("p%d", r.IntN(2)), fmt.Sprintf("r%d", r.IntN(3)), 1+r.IntN(8), []string{"A", "B"}[r.IntN(2)], 1)
			for j := range b.GPUs {
				if r.IntN(6) == 0 {
					b.GPUs[j].Health = Unhealthy
				}
			}
			mustAdd(t, p, b)
		}
		mustAdd(t, p, host("h", "p0", "r0"))
		for i := 0; i < nb; i++ {
			if r.IntN(2) == 0 {
				p.SetRTT(RTT{Host: "h", Box: fmt.Sprintf("b%d", i), RTT: Duration(time.Duration(1+r.IntN(5)) * time.Microsecond)})
			}
		}
		// Some GPUs already lent.
		for i := 0; i < 3; i++ {
			p.Reserve(fmt.Sprintf("pre%d", i), Request{Host: "h", Count: 1 + r.IntN(3), Spread: r.IntN(2) == 0})
		}
		req := Request{Host: "h", Count: 1 + r.IntN(6), Model: []string{"", "A"}[r.IntN(2)], SameBox: r.IntN(3) == 0}
		// Eligible free GPUs per box, and each box's RTT, before the call.
		rtt := map[string]time.Duration{}
		free := map[string]int{}
		hs := p.hosts["h"]
		for _, bs := range p.boxOrder {
			rtt[bs.ID] = p.rttLocked(hs, bs)
			for _, g := range bs.gpus {
				if req.matches(g) {
					free[bs.ID]++
				}
			}
		}
		a, err := p.Reserve("x", req)
		if err != nil {
			if !errors.Is(err, ErrInsufficient) {
				t.Fatal(err)
			}
			continue
		}
		var worst time.Duration
		for _, g := range a.GPUs {
			worst = max(worst, rtt[g.Box])
			if gg, _ := p.GPU(g.GPU); req.Model != "" && gg.Model != req.Model {
				t.Fatalf("round %d: model %s given for %q", round, gg.Model, req.Model)
			}
		}
		// Could a smaller bound have served the request?
		for bound := time.Duration(0); bound < worst; bound += time.Microsecond / 2 {
			total, biggest := 0, 0
			for id, n := range free {
				if rtt[id] <= bound {
					total += n
					biggest = max(biggest, n)
				}
			}
			if (!req.SameBox && total >= req.Count) || (req.SameBox && biggest >= req.Count) {
				t.Fatalf("round %d: %+v got worst RTT %v, but %v would do (free %v rtt %v)", round, req, worst, bound, free, rtt)
			}
		}
		if req.SameBox && len(boxesOf(a)) != 1 {
			t.Fatalf("round %d: same_box over %v", round, boxesOf(a))
		}
		check(t, p)
		served++
	}
}
