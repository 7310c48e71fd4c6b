package model

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/model/trace"
)

const us = time.Microsecond

// wl builds small workloads by hand; times are in microseconds.
type wl struct{ w trace.Workload }

func (b *wl) call(name string, start, dur float64, corr int64) {
	b.w.Ops = append(b.w.Ops, trace.Op{Kind: trace.Runtime, Name: name, Start: int64(start * 1000), Dur: int64(dur * 1000),
		PID: 1, TID: 1, Device: trace.NoID, Stream: trace.NoID, Corr: corr, WaitStream: trace.NoID, WaitEventCorr: trace.NoID})
}

func (b *wl) gpu(kind trace.Kind, name string, stream int64, start, dur float64, corr, bytes int64) {
	op := trace.Op{Kind: kind, Name: name, Start: int64(start * 1000), Dur: int64(dur * 1000), PID: 0, TID: stream,
		Device: 0, Stream: stream, Corr: corr, Bytes: bytes, WaitStream: trace.NoID, WaitEventCorr: trace.NoID}
	if kind == trace.Memcpy {
		op.Copy, op.Pageable = trace.ParseCopy(name)
	}
	b.w.Ops = append(b.w.Ops, op)
}

func (b *wl) kernel(stream int64, start, dur float64, corr int64) {
	b.gpu(trace.Kernel, "k", stream, start, dur, corr, 0)
}

func (b *wl) sync(kind trace.SyncKind, corr, stream, waitStream, waitCorr int64) {
	b.w.Ops = append(b.w.Ops, trace.Op{Kind: trace.Sync, Name: kind.String(), Device: 0, Stream: stream, Corr: corr,
		SyncKind: kind, WaitStream: waitStream, WaitEventCorr: waitCorr, TID: stream})
}

func (b *wl) build(t *testing.T) *Graph {
	t.Helper()
	g, err := Build(&b.w)
	if err != nil {
		t.Fatal(err)
	}
	checkGraph(t, g)
	return g
}

// checkGraph asserts the invariants every graph must have: the schedule
// puts each dependency first, and a native re-timing lands every node on
// its measured times.
func checkGraph(t *testing.T, g *Graph) {
	t.Helper()
	pos := make(map[Point]int, len(g.schedule))
	for k, p := range g.Schedule() {
		pos[p] = k
	}
	if len(pos) != 2*len(g.Nodes) {
		t.Fatalf("schedule has %d distinct points for %d nodes", len(pos), len(g.Nodes))
	}
	for i := range g.Nodes {
		if pos[Point{int32(i), false}] > pos[Point{int32(i), true}] {
			t.Fatalf("node %d ends before it starts in the schedule", i)
		}
		for _, e := range g.InEdges(i) {
			if e.To != int32(i) {
				t.Fatalf("edge %+v listed under node %d", e, i)
			}
			if pos[Point{e.From, !e.FromStart()}] > pos[Point{e.To, e.ToEnd()}] {
				t.Fatalf("edge %+v goes backwards in the schedule", e)
			}
		}
	}
	nt := g.Retime(Native)
	for i := range g.Nodes {
		if nt.Start[i] != g.Nodes[i].Start || nt.End[i] != g.Nodes[i].End() {
			t.Fatalf("native re-timing moved node %d (%s %s) from %v..%v to %v..%v", i, g.Nodes[i].Kind, g.Nodes[i].Name,
				g.Nodes[i].Start, g.Nodes[i].End(), nt.Start[i], nt.End[i])
		}
	}
	if nt.Span != g.Baseline {
		t.Fatalf("native span %v, baseline %v", nt.Span, g.Baseline)
	}
}

func fab(rtt time.Duration) Fabric { return Native.WithRTT(rtt) }

func expect(t *testing.T, p Prediction, predicted time.Duration, causes map[Cause]time.Duration) {
	t.Helper()
	if p.Predicted != predicted {
		t.Errorf("predicted %v, want %v", p.Predicted, predicted)
	}
	for _, c := range Causes {
		if p.Breakdown[c] != causes[c] {
			t.Errorf("breakdown %s = %v, want %v (all: %v)", c, p.Breakdown[c], causes[c], p.Breakdown)
		}
	}
	if got := p.Breakdown.Total(); got != p.Predicted-p.Baseline {
		t.Errorf("breakdown sums to %v, overhead is %v", got, p.Predicted-p.Baseline)
	}
}

func TestIdleLaunchPaysOneWayPlusRTT(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	g := b.build(t)
	if g.Baseline != 110*us {
		t.Fatalf("baseline %v", g.Baseline)
	}
	p := g.Predict(fab(10 * us))
	expect(t, p, 125*us, map[Cause]time.Duration{CauseLaunch: 15 * us})
	if math.Abs(p.OverheadPct-15.0/110*100) > 1e-9 {
		t.Errorf("overhead %v%%", p.OverheadPct)
	}
}

func TestQueuedLaunchCostsNothing(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 1000, 1) // idle launch: 10 us
	b.call("cudaLaunchKernel", 20, 5, 2)
	b.kernel(7, 1010, 100, 2) // queued behind the first
	g := b.build(t)
	// Only the first launch, to an idle stream, is exposed.
	expect(t, g.Predict(fab(10*us)), 1125*us, map[Cause]time.Duration{CauseLaunch: 15 * us})
}

func TestSyncPaysNotification(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	b.call("cudaStreamSynchronize", 20, 95, 2) // returns 5 us after the kernel
	b.sync(trace.SyncStream, 2, 7, trace.NoID, trace.NoID)
	b.call("cudaEventRecord", 120, 5, 3)
	g := b.build(t)
	if g.Stats.Waits != 1 || g.Stats.WaitGuesses != 0 {
		t.Fatalf("stats %+v", g.Stats)
	}
	// Kernel 25..125; the sync returns at 125 + 5 (one way) + 5 (its own
	// return); the next call follows 5 us later.
	expect(t, g.Predict(fab(10*us)), 145*us, map[Cause]time.Duration{CauseLaunch: 15 * us, CauseSync: 5 * us})
}

func TestSyncWithoutRecordIsInferred(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	b.call("cudaLaunchKernel", 6, 5, 2)
	b.kernel(9, 20, 50, 2)
	b.call("cudaStreamSynchronize", 20, 95, 3) // no cuda_sync record (old schema)
	g := b.build(t)
	if g.Stats.Waits != 1 || g.Stats.WaitGuesses != 1 {
		t.Fatalf("stats %+v", g.Stats)
	}
	// It waits for the kernel that ended last before it returned (110).
	expect(t, g.Predict(fab(10*us)), 135*us, map[Cause]time.Duration{CauseLaunch: 15 * us, CauseSync: 5 * us})
}

func TestDeviceSyncWaitsForEveryStream(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1) // ends 110
	b.call("cudaLaunchKernel", 6, 5, 2)
	b.kernel(9, 16, 90, 2) // ends 106
	b.call("cudaDeviceSynchronize", 20, 92, 3)
	g := b.build(t)
	var waits int
	for _, e := range g.Edges {
		if e.Kind == Wait {
			waits++
		}
	}
	if waits != 2 {
		t.Fatalf("%d wait edges, want one per stream", waits)
	}
	checkGraph(t, g)
}

func TestH2DCopyBoundByReadWindow(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaMemcpyAsync", 0, 5, 1)
	b.gpu(trace.Memcpy, "Memcpy HtoD (Pinned -> Device)", 7, 10, 100, 1, 1<<20)
	b.call("cudaStreamSynchronize", 20, 92, 2)
	b.sync(trace.SyncStream, 2, 7, trace.NoID, trace.NoID)
	g := b.build(t)
	f := Fabric{RTT: 20 * us, Tags: 32, MRRS: 256}
	// 32 x 256 B per 20 us = 409.6 MB/s: 1 MiB takes 2560 us, plus one RTT.
	if got := f.CopyTime(H2D, 1<<20, 100*us); got != 2580*us {
		t.Fatalf("CopyTime = %v, want 2580us", got)
	}
	// Copy 40..2620; sync returns 2620 + 2 + 10.
	expect(t, g.Predict(f), 2632*us, map[Cause]time.Duration{CauseLaunch: 30 * us, CauseH2D: 2480 * us, CauseSync: 10 * us})
	// With 10-bit tags the window no longer binds: only the latency shows.
	f.Tags, f.MRRS = 768, 512
	if got := f.CopyTime(H2D, 1<<20, 100*us); got != 120*us {
		t.Errorf("CopyTime with 768 tags = %v, want 120us", got)
	}
}

func TestD2HCopyAtLinkRate(t *testing.T) {
	t.Parallel()
	f := Fabric{RTT: 10 * us, Bandwidth: 1e9 / 8, Tags: 256, MRRS: 512} // 1 Gbit/s
	// 1 MiB at 125 MB/s is 8388.608 us; plus one way.
	if got, want := f.CopyTime(D2H, 1<<20, 100*us), 8388608*time.Nanosecond+5*us; got != want {
		t.Errorf("D2H CopyTime = %v, want %v", got, want)
	}
	f.Bandwidth = 0
	if got := f.CopyTime(D2H, 1<<20, 100*us); got != 105*us {
		t.Errorf("D2H CopyTime unlimited = %v, want 105us", got)
	}
	if got := f.CopyTime(D2D, 1<<20, 100*us); got != 100*us {
		t.Errorf("D2D CopyTime = %v, want native", got)
	}
}

func TestPageableCopyBlocksItsCall(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaMemcpyAsync", 0, 120, 1) // returns after its copy
	b.gpu(trace.Memcpy, "Memcpy DtoH (Device -> Pageable)", 7, 10, 100, 1, 4096)
	g := b.build(t)
	var call *Node
	for i := range g.Nodes {
		if g.Nodes[i].Kind == Call {
			call = &g.Nodes[i]
		}
	}
	if call.Wait != WaitCopy || call.Work != 10*us {
		t.Fatalf("call wait %v work %v, want copy and 10us", call.Wait, call.Work)
	}
	// Copy 25..130 (launch 15, one way 5); the call returns 5 + 10 later.
	expect(t, g.Predict(fab(10*us)), 145*us, map[Cause]time.Duration{CauseLaunch: 15 * us, CauseD2H: 5 * us, CauseSync: 5 * us})
}

func TestMMIOReadsStallTheCPU(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaMalloc", 0, 50, 1)
	b.call("cudaLaunchKernel", 60, 5, 2)
	b.kernel(7, 70, 10, 2)
	g := b.build(t)
	expect(t, g.Predict(fab(10*us)), 105*us, map[Cause]time.Duration{CauseMMIO: 10 * us, CauseLaunch: 15 * us})
}

func TestEventWaitLinksStreams(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 1000, 1) // A, ends 1010
	b.call("cudaEventRecord", 10, 2, 2)
	b.call("cudaStreamWaitEvent", 20, 2, 3)
	b.sync(trace.SyncStreamWaitEvent, 3, 20, 7, 2)
	b.call("cudaLaunchKernel", 30, 5, 4)
	b.kernel(20, 1012, 100, 4) // B waits for A
	g := b.build(t)
	if g.Stats.EventEdges != 1 {
		t.Fatalf("stats %+v", g.Stats)
	}
	// A moves by 15; B follows it, not its own (early) launch.
	expect(t, g.Predict(fab(10*us)), 1127*us, map[Cause]time.Duration{CauseLaunch: 15 * us})
}

func TestZeroFabricIsExact(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	g := b.build(t)
	p := g.Predict(Native)
	if p.OverheadPct != 0 || p.Predicted != g.Baseline || p.Breakdown.Total() != 0 {
		t.Fatalf("native prediction %+v", p)
	}
}

func TestEmptyWorkload(t *testing.T) {
	t.Parallel()
	if _, err := Build(&trace.Workload{}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("Build(empty) = %v, want ErrEmpty", err)
	}
}

// randomWorkload is a trace of random calls and GPU operations, consistent
// or not: the model must take it without panicking and reproduce it.
func randomWorkload(r *rand.Rand, n int) *trace.Workload {
	names := []string{"cudaLaunchKernel", "cudaMemcpyAsync", "cudaStreamSynchronize", "cudaDeviceSynchronize",
		"cudaEventSynchronize", "cudaMalloc", "cudaEventRecord", "cudaStreamWaitEvent", "cudaMemcpy", "cudaEventQuery"}
	copies := []string{"Memcpy HtoD (Pinned -> Device)", "Memcpy DtoH (Device -> Pageable)", "Memcpy DtoD (Device -> Device)"}
	var b wl
	t := 0.0
	for i := 0; i < n; i++ {
		corr := int64(r.IntN(n)) + 1
		switch r.IntN(4) {
		case 0, 1:
			t += r.Float64() * 20
			b.call(names[r.IntN(len(names))], t, r.Float64()*50, corr)
			b.w.Ops[len(b.w.Ops)-1].TID = int64(r.IntN(2))
		case 2:
			stream := int64(7 + r.IntN(3))
			if r.IntN(3) == 0 {
				b.gpu(trace.Memcpy, copies[r.IntN(len(copies))], stream, t+r.Float64()*100-20, r.Float64()*80, corr, int64(r.IntN(1<<22)))
			} else {
				b.kernel(stream, t+r.Float64()*100-20, r.Float64()*80, corr)
			}
		case 3:
			kinds := []trace.SyncKind{trace.SyncStream, trace.SyncContext, trace.SyncEvent, trace.SyncStreamWaitEvent}
			b.sync(kinds[r.IntN(len(kinds))], corr, int64(7+r.IntN(4))-1, int64(7+r.IntN(3)), int64(r.IntN(n)))
		}
	}
	return &b.w
}

func TestRandomWorkloadsReproduceAndAreMonotone(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		w := randomWorkload(r, 5+r.IntN(60))
		g, err := Build(w)
		if errors.Is(err, ErrEmpty) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		checkGraph(t, g)
		prev := -1.0
		for _, rtt := range []time.Duration{0, 1 * us, 2 * us, 5 * us, 10 * us, 50 * us} {
			f := Fabric{RTT: rtt, Bandwidth: 25e9, Tags: 32, MRRS: 256}
			p := g.Predict(f)
			if p.OverheadPct < prev-1e-9 {
				t.Fatalf("iteration %d: overhead fell from %v%% to %v%% at RTT %v", iter, prev, p.OverheadPct, rtt)
			}
			if p.Predicted < p.Baseline {
				t.Fatalf("iteration %d: predicted %v below baseline %v", iter, p.Predicted, p.Baseline)
			}
			if p.Predicted > p.Baseline && p.Breakdown.Total() != p.Predicted-p.Baseline {
				t.Fatalf("iteration %d: breakdown %v does not sum to %v", iter, p.Breakdown, p.Predicted-p.Baseline)
			}
			prev = p.OverheadPct
		}
	}
}

func TestBudget(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	g := b.build(t)
	// Overhead = 1.5 R / 110 us: 10% at R = 7.333 us.
	rtt, within := g.Budget(Native, 10)
	if !within || rtt < 7333*time.Nanosecond-10 || rtt > 7334*time.Nanosecond {
		t.Fatalf("budget %v (within %v), want 7.333us", rtt, within)
	}
	if p := g.Predict(fab(rtt)); p.OverheadPct > 10 {
		t.Errorf("overhead at the budget %v%%", p.OverheadPct)
	}
	if p := g.Predict(fab(rtt + 20*time.Nanosecond)); p.OverheadPct <= 10 {
		t.Errorf("overhead just past the budget %v%%", p.OverheadPct)
	}
	if rtt, within := g.Budget(Native, 1e9); within || rtt != MaxBudget {
		t.Errorf("unreachable target: %v, %v", rtt, within)
	}
	// A link so slow that bandwidth alone exceeds the target.
	var c wl
	c.call("cudaMemcpyAsync", 0, 5, 1)
	c.gpu(trace.Memcpy, "Memcpy HtoD (Pinned -> Device)", 7, 10, 100, 1, 1<<30)
	slow := Native
	slow.Bandwidth = 1e6
	if rtt, within := c.build(t).Budget(slow, 10); !within || rtt != 0 {
		t.Errorf("bandwidth-bound budget %v, %v; want 0", rtt, within)
	}
}

func TestSteps(t *testing.T) {
	t.Parallel()
	var b wl
	b.w.Steps = []trace.Step{{Num: 1, Start: 0, Dur: 200_000}, {Num: 2, Start: 200_000, Dur: 200_000}}
	for s := 0; s < 2; s++ {
		base := float64(s * 200)
		b.call("cudaLaunchKernel", base, 5, int64(10*s+1))
		b.kernel(7, base+10, 100, int64(10*s+1))
		b.call("cudaStreamSynchronize", base+20, 95, int64(10*s+2))
		b.sync(trace.SyncStream, int64(10*s+2), 7, trace.NoID, trace.NoID)
	}
	g := b.build(t)
	p := g.Predict(fab(10 * us))
	if len(p.Steps) != 2 {
		t.Fatalf("steps %+v", p.Steps)
	}
	// Step 1 runs 0..200 natively and 0..220 behind the fabric (its sync
	// returns 20 us later, and the next step's first call follows it).
	if s := p.Steps[0]; s.Num != 1 || s.Baseline != 200*us || s.Predicted != 220*us {
		t.Errorf("step 1 = %+v", s)
	}
	if s := p.Steps[1]; s.Num != 2 || s.Baseline != 115*us || s.Predicted != 135*us {
		t.Errorf("step 2 = %+v", s)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	g := b.build(t)
	if _, err := Validate(context.Background(), nil, g, Native, []time.Duration{2 * us}); !errors.Is(err, ErrNoMeasurer) {
		t.Fatalf("Validate(nil) = %v", err)
	}
	checks, err := Validate(context.Background(), ReplayMeasurer{}, g, Native, []time.Duration{2 * us, 20 * us})
	if err != nil {
		t.Fatal(err)
	}
	if len(checks) != 2 || checks[1].MeasuredFabric != 140*us || checks[1].DifferencePoints != 0 {
		t.Fatalf("checks %+v", checks)
	}
}

// benchFabricOutput is what `dxpu bench fabric --rtt 5us --json` printed
// (copy sizes trimmed).
const benchFabricOutput = `{"rtt_us":5,"added_rtt_us":6.3,"gbit":100,"tags":768,"mrrs":512,"gpu":"H100-SXM5-80GB","path":"pipe",
"mmio_read_us":{"native":0.602,"fabric":6.91},"launch_sync_us":{"native":4.457,"fabric":23.386},
"dma_read_rtt_us":{"native":0.56,"fabric":6.908},
"h2d":[{"bytes":1048576,"native_gbps":54.31066452581965,"fabric_gbps":9.358943234559085}],
"d2h":[{"bytes":1048576,"native_gbps":55.144675256376544,"fabric_gbps":9.846616145965386}],"clock":"virtual"}`

func TestFabricFromProfile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Fabric
		err  string
	}{
		{`{"rtt_us": 5, "bandwidth_gbps": 100, "tags": 768, "mrrs": 1024}`, Fabric{RTT: 5 * us, Bandwidth: 12.5e9, Tags: 768, MRRS: 1024}, ""},
		{`{"fabric": {"added_rtt_us": 2.5}}`, Fabric{RTT: 2500 * time.Nanosecond, Tags: 256, MRRS: 512}, ""},
		{`{"mmio_read_us": {"native": 0.9, "fabric": 10.9}, "link_gbps": 200}`, Fabric{RTT: 10 * us, Bandwidth: 25e9, Tags: 256, MRRS: 512}, ""},
		{benchFabricOutput, Fabric{RTT: 6308 * time.Nanosecond, Bandwidth: 12.5e9, Tags: 768, MRRS: 512}, ""},
		{`{"rtt_us": 5, "added_rtt_us": 6.3}`, Fabric{RTT: 6300 * time.Nanosecond, Tags: 256, MRRS: 512}, ""},
		{`{"bandwidth_gbps": 100}`, Fabric{}, "no mmio_read_us"},
		{`{"mmio_read_us": {"native": 5, "fabric": 1}}`, Fabric{}, "below native"},
		{`{"rtt_us": "five"}`, Fabric{}, "not a number"},
		{`{"rtt_us": 5, "mrrs": 300}`, Fabric{}, "MRRS"},
		{`{"rtt_us": 5`, Fabric{}, "profile"},
	}
	for _, c := range cases {
		got, err := FabricFromProfile(strings.NewReader(c.in), Native)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

func TestParsers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"100Gbit": 12.5e9, "100Gbps": 12.5e9, "12.5GB/s": 12.5e9, "400G": 50e9, "0": 0, "800 Mbit": 1e8} {
		if got, err := ParseBandwidth(in); err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"fast", "-5Gbit", "Gbit", "5 furlongs"} {
		if _, err := ParseBandwidth(bad); err == nil {
			t.Errorf("ParseBandwidth(%q) accepted", bad)
		}
	}
	for in, want := range map[string]time.Duration{"5us": 5 * us, "5µs": 5 * us, "0.02ms": 20 * us, "7": 7 * us, "0": 0} {
		if got, err := ParseRTT(in); err != nil || got != want {
			t.Errorf("ParseRTT(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1us", "soon", "-3"} {
		if _, err := ParseRTT(bad); err == nil {
			t.Errorf("ParseRTT(%q) accepted", bad)
		}
	}
	if v, err := ParsePercent("10%"); err != nil || v != 10 {
		t.Errorf("ParsePercent(10%%) = %v, %v", v, err)
	}
	if _, err := ParsePercent("-1%"); err == nil {
		t.Error("ParsePercent(-1%) accepted")
	}
	if err := (Fabric{RTT: us, Tags: 0, MRRS: 512}).Validate(); err == nil {
		t.Error("zero tags accepted")
	}
	// 10-bit tags allow 768 outstanding reads, as every command's --tags.
	if err := (Fabric{RTT: us, Tags: 768, MRRS: 512}).Validate(); err != nil {
		t.Errorf("768 tags: %v", err)
	}
	if err := (Fabric{RTT: us, Tags: 769, MRRS: 512}).Validate(); err == nil || !strings.Contains(err.Error(), "tags 769 out of range 1..768") {
		t.Errorf("769 tags: %v, want out of range 1..768", err)
	}
}

func TestPlot(t *testing.T) {
	t.Parallel()
	var b wl
	b.call("cudaLaunchKernel", 0, 5, 1)
	b.kernel(7, 10, 100, 1)
	g := b.build(t)
	curves := []Curve{{Name: "tiny", Points: g.Sweep(Native, DefaultSweep)}}
	var svg, png bytes.Buffer
	if err := WritePlot(&svg, "svg", curves, 10); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(svg.Bytes(), []byte("<svg")) || !bytes.Contains(svg.Bytes(), []byte("tiny")) {
		t.Errorf("svg output lacks <svg or the legend: %.200s", svg.String())
	}
	if err := WritePlot(&png, "png", curves, 10); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png.Bytes(), []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("png output does not start with the PNG signature")
	}
	if err := WritePlot(&png, "gif", curves, 10); err == nil {
		t.Error("gif accepted")
	}
	if _, err := PlotFormat("x.pdf"); err == nil {
		t.Error("PlotFormat accepted .pdf")
	}
}
