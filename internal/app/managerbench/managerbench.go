// Package managerbench measures the manager under concurrency: an
// in-process manager over a real store (bbolt, or an etcd cluster) with a
// pool of boxes of 8 GPUs and hosts written straight into the store, fake
// agents that record every pair they are told to program, and clients
// allocating and freeing at once. It reports allocations per second and
// latency percentiles, checks that no GPU is ever lent twice and that the
// pool's, the clients' and the agents' counts agree, then restarts the
// manager on the same store and times it to its first answer.
// `dxpu bench manager` is its command line.
package managerbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/fabric/pool"
	"github.com/dxpu/dxpu/fabric/store"
	"github.com/dxpu/dxpu/internal/app/units"
)

// GPUsPerBox is the size of every box.
const GPUsPerBox = 8

// Options configures a run.
type Options struct {
	// Store is "bbolt" (default), "etcd", or "memory" (no persistence:
	// the baseline of what the store costs; the restart reloads the same
	// in-memory records).
	Store string
	// Dir holds the bbolt file (default: a temporary directory, removed).
	Dir string
	// EtcdEndpoints are the etcd cluster's client URLs (Store "etcd");
	// none: a three-member cluster on loopback from the etcd on PATH,
	// started for the run and removed after it.
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix in etcd (default: a fresh one per run,
	// so that runs do not see each other's pools).
	EtcdPrefix string
	GPUs       int           // default 10,000 (a multiple of 8)
	Hosts      int           // default 1,000
	Clients    int           // default 50
	Duration   time.Duration // default 10s
	Seed       uint64        // default 1
	// MinOps: each client makes at least this many calls, past Duration if
	// it must (tests: on a loaded machine a short run may otherwise end
	// before a client frees anything).
	MinOps int
	// Log receives the manager's log (default: discarded).
	Log *slog.Logger
}

func (o *Options) defaults() error {
	if o.Store == "" {
		o.Store = "bbolt"
	}
	if o.GPUs == 0 {
		o.GPUs = 10000
	}
	if o.Hosts == 0 {
		o.Hosts = 1000
	}
	if o.Clients == 0 {
		o.Clients = 50
	}
	if o.Duration == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return Validate(*o)
}

// Validate checks o as it is, zeros included: `dxpu bench manager`, whose
// flags give every field its default, calls it so that an explicit 0 is
// refused rather than taken for "the default" (Run fills zeros in first).
func Validate(o Options) error {
	switch {
	case o.Store != "bbolt" && o.Store != "etcd" && o.Store != "memory":
		return fmt.Errorf("--store %q: want bbolt, etcd or memory", o.Store)
	case o.GPUs < GPUsPerBox || o.GPUs%GPUsPerBox != 0 || o.GPUs > 1_000_000:
		return fmt.Errorf("--gpus %d: want a multiple of %d in %d..1000000", o.GPUs, GPUsPerBox, GPUsPerBox)
	case o.Hosts < 1 || o.Hosts > 100_000:
		return fmt.Errorf("--hosts %d: want 1..100000", o.Hosts)
	case o.Clients < 1 || o.Clients > 10_000:
		return fmt.Errorf("--clients %d: want 1..10000", o.Clients)
	case o.Duration <= 0:
		return fmt.Errorf("--duration %s: must be positive", units.Duration(o.Duration))
	case o.Seed == 0:
		return fmt.Errorf("--seed 0: want 1 or above")
	}
	for _, e := range o.EtcdEndpoints {
		// Checked here: etcd's client takes anything and then waits out
		// its dial timeout to say "context deadline exceeded".
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.Port() == "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("--etcd-endpoints %q: want http:// or https:// URLs with a host and port, such as http://10.0.0.1:2379, separated by commas", e)
		}
		if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("--etcd-endpoints %q: port %s: want 1..65535", e, u.Port())
		}
	}
	return nil
}

// Latency is a latency distribution in microseconds.
type Latency struct {
	Count int     `json:"count"`
	P50Us float64 `json:"p50_us"`
	P99Us float64 `json:"p99_us"`
	MaxUs float64 `json:"max_us"`
}

func latency(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))]) / 1e3 }
	return Latency{Count: len(d), P50Us: at(0.5), P99Us: at(0.99), MaxUs: float64(d[len(d)-1]) / 1e3}
}

// Result is what a run measured and checked.
type Result struct {
	Store string `json:"store"`
	// EtcdEndpoints is the etcd cluster; EtcdLocal: three members on
	// loopback started for the run.
	EtcdEndpoints []string `json:"etcd_endpoints,omitempty"`
	EtcdLocal     bool     `json:"etcd_local,omitempty"`
	GPUs          int      `json:"gpus"`
	Boxes         int      `json:"boxes"`
	Hosts         int      `json:"hosts"`
	Clients       int      `json:"clients"`
	Seconds       float64  `json:"duration_s"`
	// Allocations that succeeded and Releases of them; Refused: the pool
	// had not enough free GPUs or host ports (the load keeps it about
	// 60% lent, so few); Errors: any other failure.
	Allocations     int     `json:"allocations"`
	Releases        int     `json:"releases"`
	Refused         int     `json:"refused"`
	Errors          int     `json:"errors"`
	FirstError      string  `json:"first_error,omitempty"`
	AllocsPerSecond float64 `json:"allocs_per_s"`
	// Operations per second: allocations and releases together.
	OpsPerSecond   float64 `json:"ops_per_s"`
	AllocLatency   Latency `json:"alloc_latency"`
	ReleaseLatency Latency `json:"release_latency"`
	PeakGPUsHeld   int     `json:"peak_gpus_held"`
	// OverAllocated counts GPUs an allocation returned while another
	// live allocation held them; AgentConflicts GPUs the GPU bridges
	// were told to pair while already in another pair. Both must be 0.
	OverAllocated  int `json:"over_allocated"`
	AgentConflicts int `json:"agent_conflicts"`
	// At the end of the load: GPUs and allocations the clients hold, the
	// pool lends, and the agents have paired; they must agree.
	GPUsHeld        int  `json:"gpus_held"`
	GPUsUsed        int  `json:"gpus_used"`
	GPUsPaired      int  `json:"gpus_paired"`
	AllocationsHeld int  `json:"allocations_held"`
	AllocationsLive int  `json:"allocations_live"`
	CountsAddUp     bool `json:"counts_add_up"`
	// RestartMs: the manager and its store closed, then the store
	// reopened and a new manager on it, until it answered an allocation;
	// RestartGPUsUsed is what it lent before that answer (must equal
	// GPUsUsed less RestartFreedGPUs: that allocation needs room, so a run
	// that ended with host 0 holding GPUs, or with none free, frees one
	// allocation before the close).
	RestartMs        float64 `json:"restart_ms"`
	RestartGPUsUsed  int     `json:"restart_gpus_used"`
	RestartFreedGPUs int     `json:"restart_freed_gpus"`
	InvariantsHold   bool    `json:"invariants_hold"`
}

// held is the clients' view: every GPU some live allocation holds.
type held struct {
	mu    sync.Mutex
	by    map[string]string // GPU -> allocation
	gpus  int
	peak  int
	over  int
	allcs int
}

func (h *held) add(a pool.Allocation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range a.GPUs {
		if other, ok := h.by[g.GPU]; ok && other != a.ID {
			h.over++
			continue
		}
		h.by[g.GPU] = a.ID
		h.gpus++
	}
	h.allcs++
	h.peak = max(h.peak, h.gpus)
}

// drop forgets a's GPUs; called before its release starts, since from
// then on the pool may lend them again.
func (h *held) drop(a pool.Allocation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, g := range a.GPUs {
		if h.by[g.GPU] == a.ID {
			delete(h.by, g.GPU)
			h.gpus--
		}
	}
	h.allcs--
}

// Run performs one measurement.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, err
	}
	res := Result{Store: o.Store, GPUs: o.GPUs, Boxes: o.GPUs / GPUsPerBox, Hosts: o.Hosts, Clients: o.Clients}
	if o.Store == "etcd" {
		res.EtcdEndpoints = o.EtcdEndpoints
		if len(o.EtcdEndpoints) == 0 {
			l, err := startLocalEtcd(ctx, 3)
			if err != nil {
				return res, err
			}
			defer l.stop()
			o.EtcdEndpoints, res.EtcdEndpoints, res.EtcdLocal = l.endpoints, l.endpoints, true
		}
	}
	open, cleanup, err := storeOpener(&o)
	if err != nil {
		return res, err
	}
	defer cleanup()
	st, err := open()
	if err != nil {
		return res, err
	}
	if err := seed(ctx, st, res.Boxes, o.Hosts); err != nil {
		st.Close()
		return res, err
	}
	ag := newAgents()
	m, err := startManager(ctx, st, ag, o.Log)
	if err != nil {
		st.Close()
		return res, err
	}
	if s := m.Pool().Stats(); s.GPUs != o.GPUs || s.Hosts != o.Hosts {
		m.Close()
		st.Close()
		return res, fmt.Errorf("managerbench: the manager loaded %d GPUs and %d hosts of the %d and %d written", s.GPUs, s.Hosts, o.GPUs, o.Hosts)
	}
	h := &held{by: map[string]string{}}
	// Each client holds about hold allocations of 1-8 GPUs (4.5 on
	// average): the pool stays about 60% lent. It frees its oldest with
	// a chance of what it holds over 2*hold (always from 2*hold on), so
	// that allocations and frees run at once from the start: a client
	// that freed only once it held hold allocations freed nothing on a
	// loaded machine, whose 10 s saw 12 allocations a client.
	hold := max(1, int(0.6*float64(o.GPUs)/(4.5*float64(o.Clients))))
	var (
		mu        sync.Mutex
		alat      []time.Duration
		rlat      []time.Duration
		refused   int
		errs      int
		firstErr  error
		remaining [][]pool.Allocation
		wg        sync.WaitGroup
	)
	remaining = make([][]pool.Allocation, o.Clients)
	end := time.Now().Add(o.Duration)
	start := time.Now()
	for c := range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(o.Seed, uint64(c)))
			var mine []pool.Allocation
			var al, rl []time.Duration
			var nref, nerr int
			var ferr error
			for ops := 0; (time.Now().Before(end) || ops < o.MinOps) && ctx.Err() == nil; ops++ {
				if freeNext(r, len(mine), hold) {
					a := mine[0]
					mine = mine[1:]
					h.drop(a)
					t0 := time.Now()
					_, err := m.Release(ctx, a.ID)
					d := time.Since(t0)
					if err != nil {
						nerr++
						ferr = cmp(ferr, fmt.Errorf("release %s: %w", a.ID, err))
						continue
					}
					rl = append(rl, d)
					continue
				}
				req := pool.Request{Host: hostID(r.IntN(o.Hosts)), Count: 1 + r.IntN(GPUsPerBox)}
				t0 := time.Now()
				a, err := m.Allocate(ctx, req)
				d := time.Since(t0)
				switch {
				case errors.Is(err, pool.ErrInsufficient) || errors.Is(err, pool.ErrNoHostPorts):
					nref++
				case err != nil:
					nerr++
					ferr = cmp(ferr, fmt.Errorf("allocate %+v: %w", req, err))
				default:
					al = append(al, d)
					h.add(a)
					mine = append(mine, a)
				}
			}
			mu.Lock()
			alat, rlat = append(alat, al...), append(rlat, rl...)
			refused, errs = refused+nref, errs+nerr
			firstErr = cmp(firstErr, ferr)
			remaining[c] = mine
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if ctx.Err() != nil {
		m.Close()
		st.Close()
		return res, ctx.Err()
	}
	res.Seconds = el.Seconds()
	res.Allocations, res.Releases, res.Refused, res.Errors = len(alat), len(rlat), refused, errs
	res.AllocsPerSecond = float64(len(alat)) / el.Seconds()
	res.OpsPerSecond = float64(len(alat)+len(rlat)) / el.Seconds()
	res.AllocLatency, res.ReleaseLatency = latency(alat), latency(rlat)
	if firstErr != nil {
		res.FirstError = firstErr.Error()
	}

	// The counts at rest: clients, pool and agents agree.
	stats := m.Pool().Stats()
	h.mu.Lock()
	res.PeakGPUsHeld, res.OverAllocated, res.GPUsHeld, res.AllocationsHeld = h.peak, h.over, h.gpus, h.allcs
	h.mu.Unlock()
	res.GPUsUsed, res.AllocationsLive = stats.Used, stats.Allocs
	res.GPUsPaired, res.AgentConflicts = ag.counts()
	res.CountsAddUp = res.GPUsHeld == res.GPUsUsed && res.GPUsUsed == res.GPUsPaired && res.AllocationsHeld == res.AllocationsLive &&
		poolMatches(m.Pool(), remaining)

	// The restarted manager's first allocation (host 0, one GPU) needs a
	// free GPU and a free port on host 0: a loaded run may end with the
	// pool full. Free one allocation first, host 0's if it has one.
	freed, err := makeRoom(ctx, m, hostID(0))
	if err != nil {
		st.Close()
		return res, fmt.Errorf("managerbench: freeing room for the restart's allocation: %w", err)
	}
	res.RestartFreedGPUs = freed
	// Restart: everything closed, then the store reopened and a manager
	// on it until it answers.
	if err := m.Close(); err != nil {
		st.Close()
		return res, fmt.Errorf("managerbench: closing the manager: %w", err)
	}
	if err := st.Close(); err != nil {
		return res, fmt.Errorf("managerbench: closing the store: %w", err)
	}
	t0 := time.Now()
	if st, err = open(); err != nil {
		return res, fmt.Errorf("managerbench: reopening the store: %w", err)
	}
	defer st.Close()
	if m, err = startManager(ctx, st, ag, o.Log); err != nil {
		return res, fmt.Errorf("managerbench: restarting the manager: %w", err)
	}
	defer m.Close()
	res.RestartGPUsUsed = m.Pool().Stats().Used
	a, err := m.Allocate(ctx, pool.Request{Host: hostID(0), Count: 1})
	if err != nil {
		return res, fmt.Errorf("managerbench: the restarted manager's first allocation: %w", err)
	}
	res.RestartMs = float64(time.Since(t0)) / 1e6
	if _, err := m.Release(ctx, a.ID); err != nil {
		return res, fmt.Errorf("managerbench: the restarted manager's first release: %w", err)
	}
	res.InvariantsHold = res.OverAllocated == 0 && res.AgentConflicts == 0 && res.CountsAddUp && res.Errors == 0 &&
		res.RestartGPUsUsed == res.GPUsUsed-res.RestartFreedGPUs && res.Allocations > 0
	return res, nil
}

// makeRoom releases one allocation when host's next one-GPU allocation
// might not fit: host's own if it holds any, else any one when no GPU is
// free. It returns the GPUs freed.
func makeRoom(ctx context.Context, m *manager.Manager, host string) (int, error) {
	p := m.Pool()
	full := p.Stats().Free == 0
	var pick *pool.Allocation
	for _, a := range p.Allocations() {
		if a.Host == host {
			pick = &a
			break
		}
		if pick == nil && full {
			pick = &a
		}
	}
	if pick == nil {
		return 0, nil
	}
	if _, err := m.Release(ctx, pick.ID); err != nil {
		return 0, err
	}
	return len(pick.GPUs), nil
}

// freeNext reports whether a client holding held allocations frees its
// oldest next rather than allocate: with a chance of held over 2*hold, so
// that it frees from its first allocation on and holds about hold.
func freeNext(r *rand.Rand, held, hold int) bool {
	return held > 0 && r.Float64()*float64(2*hold) < float64(held)
}

// poolMatches reports whether the pool's allocations are exactly the ones
// the clients hold, GPU for GPU.
func poolMatches(p *pool.Pool, mine [][]pool.Allocation) bool {
	want := map[string][]string{}
	for _, as := range mine {
		for _, a := range as {
			want[a.ID] = a.GPUIDs()
		}
	}
	live := p.Allocations()
	if len(live) != len(want) {
		return false
	}
	for _, a := range live {
		w, ok := want[a.ID]
		g := a.GPUIDs()
		slices.Sort(w)
		slices.Sort(g)
		if !ok || !slices.Equal(w, g) {
			return false
		}
	}
	return true
}

func cmp(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func hostID(i int) string { return fmt.Sprintf("host%05d", i) }

// startManager starts a manager on st and, on an electing store (etcd),
// waits until it leads.
func startManager(ctx context.Context, st store.Store, ag *agents, log *slog.Logger) (*manager.Manager, error) {
	m, err := manager.New(manager.Config{Store: st, GPUBridge: ag.gpu(), Switch: ag.sw(), HostBridge: ag.host(), Logger: log, ReconcileInterval: -1})
	if err != nil {
		return nil, fmt.Errorf("managerbench: manager: %w", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !m.Leading() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.Close()
			return nil, errors.New("managerbench: the manager did not lead within 30 s")
		}
		time.Sleep(time.Millisecond)
	}
	return m, nil
}

// storeOpener returns how to open the run's store (again, for the
// restart) and what removes it afterwards.
func storeOpener(o *Options) (func() (store.Store, error), func(), error) {
	switch o.Store {
	case "memory":
		mem := store.NewMemory()
		return func() (store.Store, error) { return reopened{mem}, nil }, func() {}, nil
	case "etcd":
		prefix := o.EtcdPrefix
		if prefix == "" {
			prefix = fmt.Sprintf("/dxpu-bench-%d-%d/", os.Getpid(), time.Now().UnixNano())
		}
		return func() (store.Store, error) {
			s, err := store.OpenEtcd(store.EtcdConfig{Endpoints: o.EtcdEndpoints, Prefix: prefix})
			if err != nil {
				return nil, fmt.Errorf("managerbench: %w", err)
			}
			return s, nil
		}, func() {}, nil
	default:
		dir, cleanup := o.Dir, func() {}
		if dir == "" {
			d, err := os.MkdirTemp("", "dxpu-bench-manager-")
			if err != nil {
				return nil, nil, fmt.Errorf("managerbench: %w", err)
			}
			dir, cleanup = d, func() { os.RemoveAll(d) }
		}
		path := filepath.Join(dir, "manager.db")
		if _, err := os.Stat(path); err == nil {
			cleanup()
			return nil, nil, fmt.Errorf("managerbench: %s exists: give an empty directory", path)
		}
		return func() (store.Store, error) {
			s, err := store.OpenBolt(path, time.Second)
			if err != nil {
				return nil, fmt.Errorf("managerbench: %w", err)
			}
			return s, nil
		}, cleanup, nil
	}
}

// reopened is the in-memory store as a restart finds it: the same
// records; closing it keeps them.
type reopened struct{ *store.Memory }

func (reopened) Close() error { return nil }

// seed writes the pool into the store as the manager keeps it: boxes of 8
// GPUs over pods of 25 racks, and hosts of 32 virtual ports.
func seed(ctx context.Context, st store.Store, boxes, hosts int) error {
	var ops []store.Op
	flush := func(force bool) error {
		if len(ops) == 0 || (!force && len(ops) < 500) {
			return nil
		}
		err := st.Apply(ctx, ops...)
		ops = ops[:0]
		if err != nil {
			return fmt.Errorf("managerbench: writing the pool: %w", err)
		}
		return nil
	}
	for i := range boxes {
		b := newBox(i)
		v, err := json.Marshal(b)
		if err != nil {
			return err
		}
		ops = append(ops, store.Put("box/"+b.ID, v))
		if err := flush(false); err != nil {
			return err
		}
	}
	for i := range hosts {
		h := newHost(i)
		v, err := json.Marshal(h)
		if err != nil {
			return err
		}
		ops = append(ops, store.Put("host/"+h.ID, v))
		if err := flush(false); err != nil {
			return err
		}
	}
	return flush(true)
}

func loc(i int) pool.Location {
	return pool.Location{Pod: fmt.Sprintf("pod%d", i/250%10), Rack: fmt.Sprintf("rack%d", i%250)}
}

// newBox is box i of the pool, with GPUsPerBox GPUs.
func newBox(i int) pool.Box {
	b := pool.Box{ID: fmt.Sprintf("box%05d", i), Location: loc(i),
		Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("b%d", i), MAC: mac(0x100000 + i), IP: ip(10, i), UDPPort: 4791}}
	for g := range GPUsPerBox {
		b.GPUs = append(b.GPUs, pool.GPU{ID: fmt.Sprintf("%s-g%d", b.ID, g), Model: "H100", MemoryMiB: 80 << 10,
			BDF: fmt.Sprintf("0000:%02x:00.0", 0x18+g), Switch: g / 4, Port: g % 4, Health: pool.Healthy})
	}
	return b
}

// newHost is host i of the pool, with 32 virtual ports.
func newHost(i int) pool.Host {
	return pool.Host{ID: hostID(i), Location: loc(i), Ports: 32,
		Bridge: pool.Endpoint{SwitchPort: fmt.Sprintf("h%d", i), MAC: mac(0x200000 + i), IP: ip(11, i), UDPPort: 4791}}
}

func mac(n int) string {
	return fmt.Sprintf("02:00:00:%02x:%02x:%02x", n>>16&0xff, n>>8&0xff, n&0xff)
}

// ip is a distinct address of net for each i below 250^3.
func ip(net, i int) string {
	return fmt.Sprintf("%d.%d.%d.%d", net, i/62500%250, i/250%250, i%250+1)
}

// agents are fake agents: the GPU bridges record which pair each GPU is
// in (a GPU paired twice at once is a conflict), the switch and host
// bridges accept every call.
type agents struct {
	mu        sync.Mutex
	pairOf    map[string]uint32 // GPU -> pair
	conflicts int
}

func newAgents() *agents { return &agents{pairOf: map[string]uint32{}} }

func (a *agents) counts() (paired, conflicts int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pairOf), a.conflicts
}

type gpuAgent struct{ a *agents }

func (g gpuAgent) ProgramPair(_ context.Context, p manager.Pair) error {
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	if id, ok := g.a.pairOf[p.GPU]; ok && id != p.ID {
		g.a.conflicts++
		return nil
	}
	g.a.pairOf[p.GPU] = p.ID
	return nil
}

func (g gpuAgent) RemovePair(_ context.Context, p manager.Pair) error {
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	if g.a.pairOf[p.GPU] == p.ID {
		delete(g.a.pairOf, p.GPU)
	}
	return nil
}

func (a *agents) gpu() manager.GPUBridgeProgrammer   { return gpuAgent{a} }
func (a *agents) sw() manager.SwitchProgrammer       { return manager.Noop{} }
func (a *agents) host() manager.HostBridgeProgrammer { return manager.Noop{} }
