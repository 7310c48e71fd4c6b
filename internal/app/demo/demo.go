package demo

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/replay"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/internal/shareddata"
	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
	"github.com/dxpu/dxpu/sim"
)

// Config of a demo run.
type Config struct {
	// RTT overrides the network round trip between bridges (0: the RTTs
	// registered with the control plane: 3us in the same rack, 6us across).
	RTT time.Duration
	// RTTSet: RTT was given, 0 too (--rtt 0 fell back to the per-rack
	// RTTs without a word).
	RTTSet bool
	// BytesPerSec is the fabric rate of one pair (default 100 Gbit/s).
	BytesPerSec float64
	// TracesDir holds the profiler traces ("" : none).
	TracesDir string
	// TracesMissing says why TracesDir is empty (where the default was
	// looked for), for the notes.
	TracesMissing string
	// Log receives progress lines (nil: discarded).
	Log io.Writer
	// Progress, when set, is told how many runs finished of how many; it
	// is never called concurrently.
	Progress func(done, total int, what string)
	// Workers bounds parallel runs (default: number of CPUs).
	Workers int
	// Bridge runs the workloads' fabric side through real bridge pairs too
	// (slower); by default they use the latency and bandwidth pipe, while
	// enumeration always goes through real bridge pairs.
	Bridge bool
}

// Row is one workload's result.
type Row struct {
	Workload    string   `json:"workload"`
	Host        string   `json:"host"`
	GPUs        int      `json:"gpus"`
	AddedRTTus  float64  `json:"added_rtt_us"` // what a round trip pays over native: network RTT + bridges
	NativeS     float64  `json:"native_s"`
	FabricS     float64  `json:"fabric_s"`
	OverheadPct float64  `json:"overhead_pct"`
	ModelPct    *float64 `json:"model_overhead_pct,omitempty"`
	// Bridge is what the bridge pairs carried in the fabric run (--bridge).
	Bridge *BridgeStats `json:"bridge,omitempty"`
	Note   string       `json:"note,omitempty"`
}

// BridgeStats is what a fabric run's dxpu bridge pairs carried, both
// sides of every pair summed: the sign that the TLPs crossed real bridges.
type BridgeStats struct {
	Pairs        int    `json:"pairs"`
	TLPs         uint64 `json:"tlps"`          // first transmissions
	Frames       uint64 `json:"frames"`        // data, ack and keepalive frames sent
	Bytes        uint64 `json:"bytes"`         // frame bytes sent on the links
	PayloadBytes uint64 `json:"payload_bytes"` // TLP payload bytes of first transmissions
	Retransmits  uint64 `json:"retransmits"`
	LinkDowns    uint64 `json:"link_downs"`
}

// add sums the counters of one bridge.
func (b *BridgeStats) add(c bridge.Counters) {
	b.TLPs += c.TLPsSent
	b.Frames += c.FramesSent
	b.Bytes += c.BytesSent
	b.PayloadBytes += c.PayloadBytesTx
	b.Retransmits += c.Retransmits
	b.LinkDowns += c.LinkDowns
}

// bridgeRecorder is a fabric path factory of real bridge pairs that keeps
// each path, to sum what its pair carried once the run is over.
type bridgeRecorder struct {
	inner topo.PathFactory
	paths []*topo.BridgePath
}

func (r *bridgeRecorder) factory(s *sim.Sim, i int, g *gpu.GPU) pcie.Path {
	p := r.inner(s, i, g)
	if bp, ok := p.(*topo.BridgePath); ok {
		r.paths = append(r.paths, bp)
	}
	return p
}

func (r *bridgeRecorder) stats() *BridgeStats {
	st := &BridgeStats{}
	for _, p := range r.paths {
		if p.Pair == nil {
			continue
		}
		st.Pairs++
		st.add(p.Pair.Host.Bridge.Counters())
		st.add(p.Pair.GPU.Bridge.Counters())
	}
	return st
}

// HostSummary says what one host got and found.
type HostSummary struct {
	Host       string   `json:"host"`
	Asked      int      `json:"asked"`
	Allocation string   `json:"allocation"`
	GPUs       []string `json:"gpus"`
	Enumerated int      `json:"enumerated"`
	ConfigSame bool     `json:"config_identical"`
	RTTus      float64  `json:"rtt_us"`
}

// Report is a demo's outcome.
type Report struct {
	Hosts []HostSummary `json:"hosts"`
	Rows  []Row         `json:"workloads"`
	Notes []string      `json:"notes,omitempty"`
}

type hostPlan struct {
	id    string
	rack  string
	asks  int
	alloc pool.Allocation
	world *topo.World
	rtt   time.Duration
	model gpu.Model
}

// recorder is the host-bridge agent: it remembers which pairs the control
// plane hot-added, and the demo plugs those GPUs into the emulated host.
type recorder struct {
	manager.Noop
	mu       sync.Mutex
	added    []manager.Pair
	removed  []manager.Pair
	released []manager.Pair
}

func (r *recorder) HotRemove(_ context.Context, p manager.Pair) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, p)
	return nil
}

func (r *recorder) SurpriseRemove(_ context.Context, p manager.Pair) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removed = append(r.removed, p)
	return nil
}

func (r *recorder) HotAdd(_ context.Context, p manager.Pair) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.added = append(r.added, p)
	return nil
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, format+"\n", args...)
	}
}

// Run runs the demo.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.BytesPerSec == 0 {
		cfg.BytesPerSec = 100e9 / 8
	}
	if cfg.Workers <= 0 {
		cfg.Workers = runtime.NumCPU()
	}
	rep := &Report{}
	plans, err := datacenter(ctx, &cfg, rep)
	if err != nil {
		return nil, err
	}
	if err := runWorkloads(ctx, &cfg, plans, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

func datacenter(ctx context.Context, cfg *Config, rep *Report) ([]*hostPlan, error) {
	agent := &recorder{}
	m, err := manager.New(manager.Config{HostBridge: agent, Token: "demo-token", ReconcileInterval: -1,
		Logger: discardLogger()})
	if err != nil {
		return nil, fmt.Errorf("demo: control plane: %w", err)
	}
	defer m.Close()
	h := m.Handler()
	models := []gpu.Model{gpu.H100SXM, gpu.A100SXM}
	for b := 0; b < 2; b++ {
		box := pool.Box{ID: fmt.Sprintf("box-%d", b+1), Location: pool.Location{Pod: "pod-1", Rack: fmt.Sprintf("rack-%d", b+1)},
			Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("sw0/%d", 40+b), MAC: fmt.Sprintf("02:dd:00:00:01:%02x", b+1)}}
		for i := 0; i < 8; i++ {
			box.GPUs = append(box.GPUs, pool.GPU{ID: fmt.Sprintf("box-%d-gpu%d", b+1, i), Model: models[b].Name,
				MemoryMiB: models[b].MemBytes >> 20, BDF: fmt.Sprintf("0000:%02x:00.0", 0x18+i), Switch: i / 4, Port: i % 4})
		}
		if err := api(h, "POST", "/v1/boxes", box, nil); err != nil {
			return nil, err
		}
	}
	plans := []*hostPlan{{id: "host-a", rack: "rack-1", asks: 1}, {id: "host-b", rack: "rack-2", asks: 2},
		{id: "host-c", rack: "rack-1", asks: 4}, {id: "host-d", rack: "rack-2", asks: 8}}
	for i, p := range plans {
		hst := pool.Host{ID: p.id, Ports: 32, Location: pool.Location{Pod: "pod-1", Rack: p.rack},
			Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("sw0/%d", i), MAC: fmt.Sprintf("02:dd:00:00:00:%02x", i+1)}}
		if err := api(h, "POST", "/v1/hosts", hst, nil); err != nil {
			return nil, err
		}
		for b := 1; b <= 2; b++ {
			rtt := 6 * time.Microsecond
			if p.rack == fmt.Sprintf("rack-%d", b) {
				rtt = 3 * time.Microsecond
			}
			if err := api(h, "PUT", "/v1/rtt", pool.RTT{Host: p.id, Box: fmt.Sprintf("box-%d", b), RTT: pool.Duration(rtt)}, nil); err != nil {
				return nil, err
			}
		}
	}
	rtts := map[string]time.Duration{}
	for _, r := range m.Pool().RTTs() {
		rtts[r.Host+"/"+r.Box] = time.Duration(r.RTT)
	}
	for _, p := range plans {
		if err := api(h, "POST", "/v1/allocations", pool.Request{Host: p.id, Count: p.asks}, &p.alloc); err != nil {
			return nil, err
		}
		cfg.logf("control plane: %s asked for %s, got allocation %s: %s", p.id, countGPUs(p.asks), p.alloc.ID, gpuList(p.alloc))
	}
	// A fifth request larger than what is left is refused and changes nothing.
	if err := api(h, "POST", "/v1/allocations", pool.Request{Host: "host-a", Count: 8}, nil); err != nil {
		cfg.logf("control plane: host-a asking for 8 more: refused (%v)", shortErr(err))
		rep.Notes = append(rep.Notes, "an over-large request was refused by the control plane and changed nothing")
	}
	// The demo's pairs live in one process, in virtual time: they run
	// unkeyed. Daemons seal every frame (see SECURITY.md).
	rep.Notes = append(rep.Notes, "the emulated pairs run unkeyed, in one process; bridge daemons seal every frame with the pair's key")
	byPort := map[string]map[int]manager.Pair{}
	for _, pr := range agent.added {
		if byPort[pr.Host] == nil {
			byPort[pr.Host] = map[int]manager.Pair{}
		}
		byPort[pr.Host][pr.HostPort] = pr
	}
	for _, p := range plans {
		// The host's RTT is the worst of its boxes' (what its slowest GPU sees).
		for _, a := range p.alloc.GPUs {
			p.rtt = max(p.rtt, rtts[p.id+"/"+a.Box])
		}
		if cfg.RTT > 0 || cfg.RTTSet {
			p.rtt = cfg.RTT
		}
		f := &topo.Fabric{RTT: p.rtt, BytesPerSec: cfg.BytesPerSec}
		w, err := topo.Build(topo.Options{Fabric: f, Ports: 32, Path: topo.BridgePaths(*f), Enum: host.EnumConfig{TenBitTags: true}})
		if err != nil {
			return nil, err
		}
		p.world = w
		if _, err := w.Host.Enumerate(host.EnumConfig{TenBitTags: true}); err != nil {
			return nil, fmt.Errorf("demo: %s: enumeration: %w", p.id, err)
		}
		sum := HostSummary{Host: p.id, Asked: p.asks, Allocation: p.alloc.ID, RTTus: float64(p.rtt) / 1e3, ConfigSame: true}
		ports := make([]int, 0, len(byPort[p.id]))
		for port := range byPort[p.id] {
			ports = append(ports, port)
		}
		sort.Ints(ports)
		for _, port := range ports {
			pr := byPort[p.id][port]
			mdl, ok := gpu.ModelByName(pr.Model)
			if !ok {
				mdl = gpu.H100SXM
			}
			if p.model.DeviceID == 0 {
				p.model = mdl
			}
			g, dev, err := w.HotAddModel(port, mdl)
			if err != nil {
				return nil, fmt.Errorf("demo: %s: hot-add of %s on port %d: %w", p.id, pr.GPU, port, err)
			}
			sum.GPUs = append(sum.GPUs, pr.GPU)
			same, err := configIdentical(w.Host, dev, g)
			if err != nil {
				return nil, err
			}
			sum.ConfigSame = sum.ConfigSame && same
		}
		sum.Enumerated = len(w.Devices)
		cfg.logf("%s: %s hot-added behind its bridge and enumerated through dxpu bridge pairs (network RTT %s), config space identical: %v",
			p.id, countGPUs(sum.Enumerated), units.Duration(p.rtt), sum.ConfigSame)
		rep.Hosts = append(rep.Hosts, sum)
	}
	if err := gpuFailure(cfg, h, agent, plans, rep); err != nil {
		return nil, err
	}
	return plans, ctx.Err()
}

// gpuFailure marks one of host-d's GPUs unhealthy through the API: the
// control plane takes it out of the allocation and tells the host bridge,
// whose port reports a surprise removal to the host; the host's other GPUs
// keep answering.
func gpuFailure(cfg *Config, h http.Handler, agent *recorder, plans []*hostPlan, rep *Report) error {
	p := plans[len(plans)-1]
	if len(p.alloc.GPUs) < 2 {
		return nil
	}
	victim := p.alloc.GPUs[len(p.alloc.GPUs)-1]
	if err := api(h, "POST", "/v1/gpus/"+victim.GPU+"/health", map[string]string{"health": "unhealthy"}, nil); err != nil {
		return err
	}
	agent.mu.Lock()
	removed := append([]manager.Pair(nil), agent.removed...)
	agent.mu.Unlock()
	var gone []*host.Device
	p.world.Host.OnRemove = func(d *host.Device) { gone = append(gone, d) }
	for _, pr := range removed {
		if pr.Host != p.id {
			continue
		}
		if err := p.world.SurpriseRemove(pr.HostPort); err != nil {
			return fmt.Errorf("demo: surprise removal of %s: %w", pr.GPU, err)
		}
	}
	alive := 0
	for _, d := range p.world.Devices {
		if !d.Present {
			continue
		}
		if v, err := p.world.Host.CfgRead32(d.ID, 0); err == nil && v&0xffff == 0x10de {
			alive++
		}
	}
	msg := fmt.Sprintf("%s failed: the control plane took it from %s, whose bridge reported a surprise removal (%d device gone); its other %s still answer",
		victim.GPU, p.id, len(gone), countGPUs(alive))
	cfg.logf("control plane: %s", msg)
	rep.Notes = append(rep.Notes, msg)

	// host-a gives its GPU back: an orderly hot removal, then the GPU is
	// free for others.
	a := plans[0]
	if err := api(h, "DELETE", "/v1/allocations/"+a.alloc.ID, nil, nil); err != nil {
		return err
	}
	agent.mu.Lock()
	released := append([]manager.Pair(nil), agent.released...)
	agent.mu.Unlock()
	n := 0
	for _, pr := range released {
		if pr.Host == a.id {
			if err := a.world.SurpriseRemove(pr.HostPort); err != nil {
				return fmt.Errorf("demo: removal of %s from %s: %w", pr.GPU, a.id, err)
			}
			n++
		}
	}
	var stats struct {
		Free int `json:"free"`
	}
	_ = api(h, "GET", "/v1/stats", nil, &stats)
	msg = fmt.Sprintf("%s released allocation %s: %d GPU hot-removed from its bridge; the pool has %d free GPUs", a.id, a.alloc.ID, n, stats.Free)
	cfg.logf("control plane: %s", msg)
	rep.Notes = append(rep.Notes, msg)
	return nil
}

func gpuList(a pool.Allocation) string {
	var b bytes.Buffer
	for i, g := range a.GPUs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s@port%d", g.GPU, g.HostPort)
	}
	return b.String()
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// configIdentical reads the GPU's whole config space through the fabric
// and compares it with the model's own bytes.
func configIdentical(rc *host.RootComplex, d *host.Device, g *gpu.GPU) (bool, error) {
	want := g.ConfigBytes()
	for off := 0; off < 4096; off += 4 {
		v, err := rc.CfgRead32(d.ID, uint16(off))
		if err != nil {
			return false, fmt.Errorf("demo: config read %v+%#x: %w", d.ID, off, err)
		}
		if v != binary.LittleEndian.Uint32(want[off:]) {
			return false, nil
		}
	}
	return true, nil
}

// job is one workload run natively and over the fabric.
type job struct {
	name   string
	plan   *hostPlan
	gpus   int
	bundle *Bundled
	graph  *model.Graph
	// profiled is the graph of the native run of a bundled workload, as
	// the emulator's profiler recorded it.
	profiled *model.Graph
	row      Row
	bridge   *BridgeStats // the fabric run's, with --bridge
	err      error
}

func runWorkloads(ctx context.Context, cfg *Config, plans []*hostPlan, rep *Report) error {
	var jobs []*job
	pick := func(n int) *hostPlan {
		for _, p := range plans {
			if len(p.world.Devices) >= n {
				return p
			}
		}
		return nil
	}
	bundled := BundledWorkloads()
	for i := range bundled {
		b := &bundled[i]
		p := pick(b.GPUs)
		if b.GPUs == 1 {
			p = plans[i%2] // spread the single-GPU ones over host-a and host-b
		}
		if p == nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s skipped: no host got %d GPUs", b.Name, b.GPUs))
			continue
		}
		jobs = append(jobs, &job{name: b.Name, plan: p, gpus: b.GPUs, bundle: b})
	}
	traces, err := filepath.Glob(filepath.Join(cfg.TracesDir, "*.json.gz"))
	// The note always says where the traces were looked for.
	switch {
	case cfg.TracesDir == "" && cfg.TracesMissing != "":
		rep.Notes = append(rep.Notes, "traces skipped: "+cfg.TracesMissing)
	case cfg.TracesDir == "":
		rep.Notes = append(rep.Notes, "traces skipped: no traces directory given")
	case err != nil || len(traces) == 0:
		rep.Notes = append(rep.Notes, fmt.Sprintf("traces skipped: no *.json.gz in %s", cfg.TracesDir))
	default:
		rep.Notes = append(rep.Notes, fmt.Sprintf("traces: %d from %s", len(traces), cfg.TracesDir))
	}
	sort.Strings(traces)
	for i, path := range traces {
		w, err := trace.DecodeFile(path)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s skipped: %v", filepath.Base(path), err))
			continue
		}
		g, err := model.Build(w)
		if err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s skipped: %v", filepath.Base(path), err))
			continue
		}
		p := plans[len(plans)-1-i%2] // host-d and host-c
		devs := map[int64]bool{}
		for _, s := range g.Streams {
			devs[s.Device] = true
		}
		jobs = append(jobs, &job{name: trace.TraceName(path) + " (trace)", plan: p, gpus: max(1, len(devs)), graph: g})
	}
	total := 2 * len(jobs)
	var mu sync.Mutex
	finished := 0
	var progMu sync.Mutex // Progress is called from one goroutine at a time
	progress := func(what string) {
		progMu.Lock()
		defer progMu.Unlock()
		mu.Lock()
		finished++
		n := finished
		mu.Unlock()
		if cfg.Progress != nil {
			cfg.Progress(n, total, what)
		}
	}
	type task struct {
		j      *job
		fabric bool
	}
	tasks := make(chan task)
	results := make(map[*job][2]time.Duration)
	var wg sync.WaitGroup
	for k := 0; k < cfg.Workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range tasks {
				d, bs, err := runOne(ctx, cfg, t.j, t.fabric)
				mu.Lock()
				r := results[t.j]
				if t.fabric {
					r[1] = d
					t.j.bridge = bs
				} else {
					r[0] = d
				}
				results[t.j] = r
				if err != nil && t.j.err == nil {
					t.j.err = err
				}
				mu.Unlock()
				progress(t.j.name)
			}
		}()
	}
	for _, j := range jobs {
		tasks <- task{j, false}
		tasks <- task{j, true}
	}
	close(tasks)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, j := range jobs {
		if j.err != nil {
			return fmt.Errorf("demo: %s: %w", j.name, j.err)
		}
		r := results[j]
		fab := fabricOf(cfg, j.plan)
		row := Row{Workload: j.name, Host: j.plan.id, GPUs: j.gpus, AddedRTTus: float64(fab.AddedRoundTrip()) / 1e3,
			NativeS: r[0].Seconds(), FabricS: r[1].Seconds(), OverheadPct: 100 * (r[1].Seconds()/r[0].Seconds() - 1),
			Bridge: j.bridge}
		g := j.graph
		if g == nil {
			g = j.profiled
		}
		if g != nil {
			// The model is told the fabric's payload rate: 256-byte TLPs
			// with their header and framing share on the wire.
			mf := model.Fabric{RTT: fab.AddedRoundTrip(), Bandwidth: fab.PayloadRate(256), Tags: 768, MRRS: 512}
			pct := g.Predict(mf).OverheadPct
			row.ModelPct = &pct
		}
		rep.Rows = append(rep.Rows, row)
	}
	return nil
}

func fabricOf(cfg *Config, p *hostPlan) topo.Fabric {
	return topo.Fabric{RTT: p.rtt, BytesPerSec: cfg.BytesPerSec}
}

// runOne runs j natively or over the fabric; with cfg.Bridge, a fabric
// run also says what its bridge pairs carried.
func runOne(ctx context.Context, cfg *Config, j *job, fabric bool) (time.Duration, *BridgeStats, error) {
	var f *topo.Fabric
	if fabric {
		ff := fabricOf(cfg, j.plan)
		f = &ff
	}
	mdl := j.plan.model
	if mdl.DeviceID == 0 {
		mdl = gpu.H100SXM
	}
	var rec *bridgeRecorder
	var path topo.PathFactory
	if cfg.Bridge && f != nil {
		rec = &bridgeRecorder{inner: topo.BridgePaths(*f)}
		path = rec.factory
	}
	stats := func() *BridgeStats {
		if rec == nil {
			return nil
		}
		return rec.stats()
	}
	if j.graph != nil {
		res, err := replay.Run(ctx, j.graph, replay.Options{Fabric: f, TenBitTags: true, Path: path})
		if err != nil {
			return 0, nil, err
		}
		return res.Span, stats(), nil
	}
	w, err := topo.Build(topo.Options{GPUs: j.gpus, Model: mdl, Fabric: f, Path: path, Enum: host.EnumConfig{TenBitTags: true},
		GPU: gpu.Config{MaxSimBytes: 1 << 20}})
	if err != nil {
		return 0, nil, err
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
	if err != nil {
		return 0, nil, err
	}
	var prof *cuda.Profiler
	if !fabric {
		prof = c.Profile()
		for i, g := range w.GPUs {
			prof.AttachGPU(i, g)
		}
	}
	t0 := c.Now()
	if err := j.bundle.Run(c); err != nil {
		return 0, nil, err
	}
	span := c.Now() - t0
	if prof != nil {
		g, err := ProfileGraph(prof, j.name)
		if err != nil {
			return 0, nil, fmt.Errorf("profile of the native run: %w", err)
		}
		j.profiled = g
	}
	return span, stats(), nil
}

// ProfileGraph turns a profiler's recording into the model's graph, through
// the same trace decoder as real profiler traces.
func ProfileGraph(p *cuda.Profiler, name string) (*model.Graph, error) {
	var buf bytes.Buffer
	if err := p.WriteTrace(&buf); err != nil {
		return nil, err
	}
	w, err := trace.Decode(&buf)
	if err != nil {
		return nil, err
	}
	w.Name = name
	return model.Build(w)
}

// DefaultTracesDir returns the repository's testdata/traces: the public
// profiler traces committed with dxpu (see its SOURCE.md), in the checkout
// found from the working directory, then from where dxpu was built (see
// shareddata.ModuleRoot). The error says where it looked.
func DefaultTracesDir() (string, error) {
	mod, err := shareddata.ModuleRoot()
	if err != nil {
		return "", fmt.Errorf("no dxpu checkout to take testdata/traces from: %w", err)
	}
	p := filepath.Join(mod, "testdata", "traces")
	if st, err := os.Stat(p); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", p)
	}
	return p, nil
}

// countGPUs is "1 GPU", "0 GPUs", "8 GPUs".
func countGPUs(n int) string {
	if n == 1 {
		return "1 GPU"
	}
	return fmt.Sprintf("%d GPUs", n)
}
