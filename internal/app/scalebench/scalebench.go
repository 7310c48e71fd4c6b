package scalebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/bridge/udp"
	"github.com/dxpu/dxpu/internal/app/apperr"
	"github.com/dxpu/dxpu/internal/app/cpuset"
	"github.com/dxpu/dxpu/internal/app/labnet"
	"github.com/dxpu/dxpu/internal/app/progress"
	"github.com/dxpu/dxpu/internal/app/rawgoodput"
	"github.com/dxpu/dxpu/internal/app/units"
)

// Scenario kinds.
const (
	Sweep  = "sweep"
	Borrow = "borrow"
	Lend   = "lend"
	Switch = "switch"
)

// Options configures a run.
type Options struct {
	// Loopback runs every process on 127.x addresses instead of in
	// network namespaces behind the XDP switch (which needs root).
	Loopback bool
	// Binary is the dxpu executable the bridges run as (default: this
	// process's own).
	Binary string
	// Scenarios to run, of Sweep, Borrow, Lend and Switch (default all;
	// Switch only in namespaces).
	Scenarios []string
	// Pairs are the sweep's points (default 1, 2, 4, 8, 16, 32).
	Pairs []int
	// Borrow: one host borrowing each of these many GPUs (default 8, 32).
	Borrow []int
	// Lend: one box lending this many GPUs to as many hosts (default 8).
	Lend int
	// SwitchPairs through one switch (default 64).
	SwitchPairs int
	// Duration each scenario is measured for once its pairs move data
	// (default 2s), or longer, until 20 reads were timed under the load.
	Duration time.Duration
	// ReadBytes is each DMA read's size (default 4096).
	ReadBytes int
	// Readers are the reads each pair keeps outstanding, one per NetTLP
	// tag port (default 8, at most 15: tag 15 is the probe's).
	Readers int
	// IdleSamples is how many reads the idle baseline times (default 200).
	IdleSamples int
	// Insecure runs the pairs unkeyed (--insecure-no-keys) instead of
	// sealed with AES-256-GCM as daemons run.
	Insecure bool
	// MTU is the bridges' --mtu (default 1472, what dxpu bridge ships;
	// at most labnet.MaxMTU in namespaces) and the raw baseline's datagram
	// size; MPS the memory devices' --mps (default 256), the bridges'
	// --max-payload the larger of it and 512.
	MTU, MPS int
	// Pin gives each pair a core: both its bridges run with --cpus of one
	// CPU, pair i on the i-th CPU this process may use, round robin.
	Pin bool
	// Spin is the bridges' --spin: how long each polls its socket after
	// its last frames before it sleeps (0: at once, the default). With a
	// pair's two bridges on one CPU (Pin) a spinning one delays the other:
	// on a 2-core machine 50us cost a pair 0.87-0.92x its goodput.
	Spin time.Duration
	// Log receives progress (default: discarded).
	Log *slog.Logger
	// Progress, when a terminal, shows the scenario running.
	Progress io.Writer
}

func (o *Options) defaults() error {
	binary := "--bridge-binary " + o.Binary
	if o.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return fmt.Errorf("scalebench: the dxpu binary: %w", err)
		}
		o.Binary, binary = b, "the dxpu binary "+b
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = []string{Sweep, Borrow, Lend, Switch}
	}
	if len(o.Pairs) == 0 {
		o.Pairs = []int{1, 2, 4, 8, 16, 32}
	}
	if len(o.Borrow) == 0 {
		o.Borrow = []int{8, 32}
	}
	if o.Lend == 0 {
		o.Lend = 8
	}
	if o.SwitchPairs == 0 {
		o.SwitchPairs = 64
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	if o.ReadBytes == 0 {
		o.ReadBytes = 4096
	}
	if o.Readers == 0 {
		o.Readers = 8
	}
	if o.IdleSamples == 0 {
		o.IdleSamples = 200
	}
	if o.MTU == 0 {
		o.MTU = bridgeMTU
	}
	if o.MPS == 0 {
		o.MPS = 256
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	for _, s := range o.Scenarios {
		if !slices.Contains([]string{Sweep, Borrow, Lend, Switch}, s) {
			return fmt.Errorf("--scenarios %q: want sweep, borrow, lend or switch", s)
		}
	}
	for _, n := range append(slices.Clone(o.Pairs), append(o.Borrow, o.Lend, o.SwitchPairs)...) {
		if n < 1 || n > maxLoopbackPairs {
			return fmt.Errorf("%d pairs: want 1..%d (--pairs, --borrow, --lend, --switch-pairs)", n, maxLoopbackPairs)
		}
	}
	switch {
	case o.Duration < 0:
		return units.Errorf("--duration %v: must be positive", o.Duration)
	case o.ReadBytes < 4 || o.ReadBytes > 4096 || o.ReadBytes%4 != 0:
		return fmt.Errorf("--read-bytes %d: want a multiple of 4 in 4..4096", o.ReadBytes)
	case o.Readers < 1 || o.Readers > probeTag:
		return fmt.Errorf("--readers %d: want 1..%d (one NetTLP tag port each; tag %d is the probe's)", o.Readers, probeTag, probeTag)
	case o.IdleSamples < 1:
		return fmt.Errorf("--idle-samples %d: want at least 1", o.IdleSamples)
	case o.MTU < 0 || o.MTU > udp.MaxPayload:
		return fmt.Errorf("--mtu %d: want at most %d (a UDP datagram's payload)", o.MTU, udp.MaxPayload)
	case !o.Loopback && o.MTU > labnet.MaxMTU:
		return fmt.Errorf("--mtu %d: the namespaces' veths carry %d-byte packets, so at most %d (or --loopback)", o.MTU, labnet.VethMTU, labnet.MaxMTU)
	case !nettlp.ValidMPS(o.MPS):
		return fmt.Errorf("--mps %d: want %s", o.MPS, nettlp.MPSChoices)
	case o.Spin < 0 || o.Spin > driver.MaxSpin:
		return units.Errorf("--spin %v: want 0 up to %v", o.Spin, driver.MaxSpin)
	}
	// The bridges' own check, up front: a frame too small for one TLP is
	// refused by each bridge process, after the set-up.
	bc := bridge.Config{Role: bridge.RoleHost, MTU: o.MTU, MaxPayload: max(o.MPS, 512)}
	if !o.Insecure {
		bc.Key = make([]byte, seal.KeyLen)
	}
	bc = bc.Defaults()
	if err := bc.Validate(); err != nil {
		return fmt.Errorf("--mtu %d: %w", o.MTU, err)
	}
	// Up front, as exec would find it: one that will not start is an
	// option wrong, not a run that failed.
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		why := err.Error()
		var ee *exec.Error
		if errors.As(err, &ee) {
			why = ee.Err.Error()
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			why = "no such file"
		case errors.Is(err, syscall.EISDIR):
			why = "a directory, not an executable file"
		case errors.Is(err, fs.ErrPermission):
			why = "not an executable file"
		}
		return fmt.Errorf("%s: %s", binary, why)
	}
	o.Binary = bin
	return nil
}

// scenario is one set of pairs: pair i belongs to host hostOf(i) and box
// boxOf(i).
type scenario struct {
	name                string
	pairs, hosts, boxes int
}

func (s scenario) hostOf(i int) int { return i % s.hosts }
func (s scenario) boxOf(i int) int  { return i * s.boxes / s.pairs }

// plan lists the scenarios of o in the order they run.
func (o *Options) plan() []scenario {
	var out []scenario
	has := func(k string) bool { return slices.Contains(o.Scenarios, k) }
	if has(Sweep) {
		for _, n := range o.Pairs {
			out = append(out, scenario{fmt.Sprintf("pairs-%d", n), n, n, n})
		}
	}
	if has(Borrow) {
		for _, n := range o.Borrow {
			out = append(out, scenario{fmt.Sprintf("borrow-%d", n), n, 1, min(n, max(2, n/4))})
		}
	}
	if has(Lend) {
		out = append(out, scenario{fmt.Sprintf("lend-%d", o.Lend), o.Lend, o.Lend, 1})
	}
	if has(Switch) && !o.Loopback {
		out = append(out, scenario{fmt.Sprintf("switch-%d", o.SwitchPairs), o.SwitchPairs, o.SwitchPairs, max(1, o.SwitchPairs/8)})
	}
	return out
}

// Result is what a run measured.
type Result struct {
	Mode           string  `json:"mode"` // "loopback" or "netns"
	Cores          int     `json:"cores"`
	ReadBytes      int     `json:"read_bytes"`
	ReadersPerPair int     `json:"readers_per_pair"`
	Seconds        float64 `json:"duration_per_scenario_s"`
	Sealed         bool    `json:"sealed"`
	// Pinned: each pair's bridges ran on one CPU of their own (Pin).
	Pinned bool `json:"pinned"`
	// MTUBytes and MPSBytes are the bridges' --mtu and the memory
	// devices' --mps.
	MTUBytes int `json:"mtu_bytes"`
	MPSBytes int `json:"mps_bytes"`
	// SpinUs is the bridges' --spin.
	SpinUs float64 `json:"spin_us"`
	// The raw baseline: two plain UDP sockets on the pairs' path flooded
	// with datagrams of the bridges' MTU (from the dxpu header on),
	// before the first scenario, for Seconds.
	UDPGoodputGbps   float64 `json:"udp_goodput_gbps"`
	UDPDatagramBytes int     `json:"udp_datagram_bytes"`
	// SinglePairGbps is the 1-pair sweep point's aggregate (0 when it
	// did not run).
	SinglePairGbps float64          `json:"single_pair_gbps"`
	Scenarios      []ScenarioResult `json:"scenarios"`
}

// ScenarioResult is one scenario's figures.
type ScenarioResult struct {
	Name          string    `json:"name"`
	Pairs         int       `json:"pairs"`
	Hosts         int       `json:"hosts"`
	Boxes         int       `json:"boxes"`
	AggregateGbps float64   `json:"aggregate_gbps"`
	PairGbps      []float64 `json:"pair_gbps"`
	MinPairGbps   float64   `json:"min_pair_gbps"`
	MaxPairGbps   float64   `json:"max_pair_gbps"`
	JainFairness  float64   `json:"jain_fairness"`
	HostGbps      []float64 `json:"host_gbps"`
	BoxGbps       []float64 `json:"box_gbps"`
	// ScalingOverLinear: aggregate over pairs times the single pair's.
	ScalingOverLinear   float64 `json:"scaling_over_linear,omitempty"`
	AggregateOverUDP    float64 `json:"aggregate_over_udp"`
	Reads               uint64  `json:"reads"`
	ReadErrors          uint64  `json:"read_errors"`
	FirstReadError      string  `json:"first_read_error,omitempty"`
	MMIOSamples         int     `json:"mmio_samples"`
	MMIOReadP50Us       float64 `json:"mmio_read_p50_us"`
	MMIOReadP99Us       float64 `json:"mmio_read_p99_us"`
	EchoP50Us           float64 `json:"echo_p50_us"`
	EchoP99Us           float64 `json:"echo_p99_us"`
	MMIOP50OverEcho     float64 `json:"mmio_p50_over_echo_p50"`
	MMIOP99OverEcho     float64 `json:"mmio_p99_over_echo_p99"`
	MMIOIdleP50Us       float64 `json:"mmio_read_idle_p50_us"`
	MMIOIdleP99Us       float64 `json:"mmio_read_idle_p99_us"`
	BridgeCPUSeconds    float64 `json:"bridge_cpu_s"`
	CPUSecondsPerGB     float64 `json:"cpu_s_per_gb"`
	LoadCPUSecondsPerGB float64 `json:"load_cpu_s_per_gb"`
	SwitchDrops         *uint64 `json:"switch_drops,omitempty"`
	// From the bridges' metrics over the flood, all processes summed:
	// frames sent, frames retransmitted, times a TLP waited for credits;
	// and their smoothed RTT at its end, the mean over processes.
	FramesSent   uint64  `json:"frames_sent"`
	Retransmits  uint64  `json:"retransmits"`
	CreditStalls uint64  `json:"credit_stalls"`
	SRTTMeanUs   float64 `json:"srtt_mean_us"`
	// MetricsErrors counts the reads of a process's metrics that failed
	// (the figures above then miss it).
	MetricsErrors int `json:"metrics_errors,omitempty"`
}

// Jain is Jain's fairness index of xs: (sum x)^2 / (n * sum x^2), from 1/n
// (one gets everything) to 1 (all equal); 1 when all are zero or none.
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(xs)) * s2)
}

// Run performs every scenario of o in turn. Options that cannot run are
// apperr.ErrUsage (nothing ran); a bridge process that stopped, or a pair
// that moved no data, once the bridges run is apperr.ErrFailed.
func Run(ctx context.Context, o Options) (Result, error) {
	if err := o.defaults(); err != nil {
		return Result{}, apperr.Usage(err)
	}
	plan := o.plan()
	if len(plan) == 0 {
		return Result{}, apperr.Usage(errors.New("no scenario to run (switch needs namespaces: drop --loopback)"))
	}
	res := Result{Mode: "loopback", Cores: runtime.NumCPU(), ReadBytes: o.ReadBytes, ReadersPerPair: o.Readers, MTUBytes: o.MTU, MPSBytes: o.MPS, SpinUs: float64(o.Spin) / 1e3,
		Seconds: o.Duration.Seconds(), Sealed: !o.Insecure, Pinned: o.Pin}
	if !o.Loopback {
		res.Mode = "netns"
	}
	bar := progress.New(o.Progress, len(plan)+1, "raw UDP baseline")
	defer bar.Finish()
	info := o.Log.Info
	if bar != nil {
		info = o.Log.Debug
	}
	for i, sc := range plan {
		bar.Describe(fmt.Sprintf("%s: %d pairs (%d bridge processes)", sc.name, sc.pairs, 2*sc.pairs))
		info("scalebench: scenario", "name", sc.name, "pairs", sc.pairs, "hosts", sc.hosts, "boxes", sc.boxes)
		r, err := runScenario(ctx, &o, sc, &res, i == 0, bar)
		if err != nil {
			return res, fmt.Errorf("%s: %w", sc.name, err)
		}
		if sc.name == "pairs-1" {
			res.SinglePairGbps = r.AggregateGbps
		}
		res.Scenarios = append(res.Scenarios, r)
		bar.Add(1)
		info("scalebench: done", "name", sc.name, "aggregate_gbps", r.AggregateGbps, "jain_fairness", r.JainFairness)
	}
	if res.SinglePairGbps > 0 {
		for i := range res.Scenarios {
			s := &res.Scenarios[i]
			s.ScalingOverLinear = s.AggregateGbps / (float64(s.Pairs) * res.SinglePairGbps)
		}
	}
	return res, nil
}

// minLoadedSamples is the fewest reads timed under load.
const minLoadedSamples = 20

// bridgeMTU is the shipped bridge's MTU (bridge.Config's default): the
// default of Options.MTU.
var bridgeMTU = bridge.Config{}.Defaults().MTU

// runScenario starts sc's processes, floods every pair, and measures.
// Once a bridge process started, an error other than ctx's is the run's
// failure (apperr.ErrFailed).
func runScenario(ctx context.Context, o *Options, sc scenario, res *Result, first bool, bar *progress.Bar) (_ ScenarioResult, err error) {
	out := ScenarioResult{Name: sc.name, Pairs: sc.pairs, Hosts: sc.hosts, Boxes: sc.boxes}
	var procs []*proc
	defer func() {
		if err != nil && len(procs) > 0 && ctx.Err() == nil {
			err = apperr.Failed(err)
		}
	}()
	var fab fabric
	if o.Loopback {
		fab = newLoopback()
	} else {
		n, err := newNamespaces(ctx, sc.pairs, o.Log)
		if err != nil {
			return out, err
		}
		fab = n
	}
	defer fab.close()
	if first {
		tx, rx, prefix, err := fab.raw()
		if err != nil {
			return out, err
		}
		u, err := rawgoodput.UDP(ctx, tx, rx, o.MTU, prefix, o.Duration)
		if err != nil {
			return out, fmt.Errorf("scalebench: %w", err)
		}
		res.UDPGoodputGbps, res.UDPDatagramBytes = u.GoodputGbps, u.DatagramBytes
		bar.Add(1)
	}
	dir, err := os.MkdirTemp("", "dxpu-bench-scale-")
	if err != nil {
		return out, fmt.Errorf("scalebench: %w", err)
	}
	defer os.RemoveAll(dir)

	var cpus cpuset.Set
	if o.Pin {
		if cpus = cpuset.Allowed(); len(cpus) == 0 {
			return out, errors.New("scalebench: --pin: this process's CPUs are unknown")
		}
	}
	defer func() {
		var wg sync.WaitGroup
		for _, p := range procs {
			wg.Go(p.stop)
		}
		wg.Wait()
	}()
	loads := make([]*pairLoad, 0, sc.pairs)
	defer func() {
		for _, pl := range loads {
			pl.close()
		}
	}()
	pairProcs := make([][]*proc, sc.pairs)
	for i := range sc.pairs {
		e, err := fab.pair(i, sc.hostOf(i), sc.boxOf(i))
		if err != nil {
			return out, err
		}
		cpu := -1
		if o.Pin {
			cpu = cpus[i%len(cpus)]
		}
		ps, err := startPair(fab, o, dir, i, e, cpu)
		if err != nil {
			return out, err
		}
		procs, pairProcs[i] = append(procs, ps...), ps
		pl, err := dialPair(fab, e, o.Readers)
		if err != nil {
			return out, err
		}
		loads = append(loads, pl)
	}
	// Many processes start at once on few cores: allow each its second.
	deadline := time.Now().Add(30*time.Second + time.Duration(2*sc.pairs)*time.Second)
	for i, pl := range loads {
		if err := pl.up(ctx, deadline, pairProcs[i]); err != nil {
			if _, ok := err.(*exitError); !ok { // which names its pair
				err = fmt.Errorf("pair %d: %w", i+1, err)
			}
			return out, err
		}
	}
	ech, err := newEcho(fab)
	if err != nil {
		return out, err
	}
	defer ech.close()

	// The idle baseline, then the load.
	idle, _, err := turns(ctx, ech, loads[0].probe, o.IdleSamples, time.Time{})
	if err != nil {
		return out, err
	}
	out.MMIOIdleP50Us, out.MMIOIdleP99Us = quantileUs(idle, 0.5), quantileUs(idle, 0.99)
	// The bridges' metrics are read with no load running: a loaded
	// machine is slow to answer 2N requests at once.
	m0, merr := scrapeAll(ctx, fab, procs)
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for _, pl := range loads {
		pl.flood(&wg, &stop, o.ReadBytes)
	}
	// The window opens once every pair moved data.
	deadline = time.Now().Add(30*time.Second + time.Duration(sc.pairs)*time.Second)
	for i, pl := range loads {
		for pl.bytes.Load() == 0 {
			if err := alive(ctx, procs, deadline); err != nil {
				return out, fmt.Errorf("pair %d moved no data: %w", i+1, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	before := snapshot(loads, procs)
	// At least minLoadedSamples turns: on a saturated machine a turn
	// takes up to a second, and the window stretches to hold them.
	mm, ec, err := turns(ctx, ech, loads[0].probe, minLoadedSamples, time.Now().Add(o.Duration))
	if err != nil {
		return out, err
	}
	after := snapshot(loads, procs)
	if err := alive(ctx, procs, time.Time{}); err != nil {
		return out, err
	}
	stop.Store(true)
	wg.Wait()
	m1, err := scrapeAll(ctx, fab, procs)
	if err = errors.Join(merr, err); err != nil {
		o.Log.Warn("scalebench: bridge metrics", "err", err)
		out.MetricsErrors = len(m0.failed) + len(m1.failed)
	}
	// Deltas only over processes read both times.
	both := 0
	for i := range procs {
		if m0.by[i] == nil || m1.by[i] == nil {
			m0.by[i], m1.by[i] = nil, nil
		} else {
			both++
		}
	}
	out.FramesSent = uint64(m1.sum("dxpu_bridge_frames_sent_total") - m0.sum("dxpu_bridge_frames_sent_total"))
	out.Retransmits = uint64(m1.sum("dxpu_bridge_retransmits_total") - m0.sum("dxpu_bridge_retransmits_total"))
	out.CreditStalls = uint64(m1.sum("dxpu_bridge_credit_stalls_total") - m0.sum("dxpu_bridge_credit_stalls_total"))
	if both > 0 {
		out.SRTTMeanUs = m1.sum("dxpu_bridge_srtt_seconds") / float64(both) * 1e6
	}
	el := after.at.Sub(before.at).Seconds()
	var moved uint64
	out.HostGbps, out.BoxGbps = make([]float64, sc.hosts), make([]float64, sc.boxes)
	for i, pl := range loads {
		b := after.bytes[i] - before.bytes[i]
		moved += b
		g := float64(b) * 8 / el / 1e9
		out.PairGbps = append(out.PairGbps, g)
		out.AggregateGbps += g
		out.HostGbps[sc.hostOf(i)] += g
		out.BoxGbps[sc.boxOf(i)] += g
		out.Reads += after.reads[i] - before.reads[i]
		out.ReadErrors += pl.errs.Load()
		if s := pl.first.Load(); s != nil && out.FirstReadError == "" {
			out.FirstReadError = *s
		}
	}
	out.MinPairGbps, out.MaxPairGbps = slices.Min(out.PairGbps), slices.Max(out.PairGbps)
	out.JainFairness = Jain(out.PairGbps)
	if res.UDPGoodputGbps > 0 {
		out.AggregateOverUDP = out.AggregateGbps / res.UDPGoodputGbps
	}
	out.MMIOSamples = len(mm)
	out.MMIOReadP50Us, out.MMIOReadP99Us = quantileUs(mm, 0.5), quantileUs(mm, 0.99)
	out.EchoP50Us, out.EchoP99Us = quantileUs(ec, 0.5), quantileUs(ec, 0.99)
	if out.EchoP50Us > 0 {
		out.MMIOP50OverEcho, out.MMIOP99OverEcho = out.MMIOReadP50Us/out.EchoP50Us, out.MMIOReadP99Us/out.EchoP99Us
	}
	out.BridgeCPUSeconds = (after.bridgeCPU - before.bridgeCPU).Seconds()
	if moved > 0 {
		gb := float64(moved) / 1e9
		out.CPUSecondsPerGB = out.BridgeCPUSeconds / gb
		out.LoadCPUSecondsPerGB = (after.selfCPU - before.selfCPU).Seconds() / gb
	}
	if d, ok, err := fab.drops(ctx); err != nil {
		return out, err
	} else if ok {
		out.SwitchDrops = &d
	}
	return out, nil
}

// samples are every process's metrics together; failed names the
// processes whose metrics could not be read.
type samples struct {
	by     []map[string]float64
	failed []string
}

// sum adds up name's series (every label set) over the processes.
func (s samples) sum(name string) float64 {
	var t float64
	for _, m := range s.by {
		for k, v := range m {
			if k == name || strings.HasPrefix(k, name+"{") {
				t += v
			}
		}
	}
	return t
}

// scrapeAll fetches every process's metrics, at once; the error names
// the first process that did not answer and how many did not.
func scrapeAll(ctx context.Context, fab fabric, procs []*proc) (samples, error) {
	out := samples{by: make([]map[string]float64, len(procs))}
	errs := make([]error, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { out.by[i], errs[i] = fab.metrics(ctx, p.gpu, p.metrics) })
	}
	wg.Wait()
	var first error
	for i, err := range errs {
		if err != nil {
			out.failed = append(out.failed, procs[i].what)
			if first == nil {
				first = fmt.Errorf("%s: %w", procs[i].what, err)
			}
		}
	}
	if first != nil {
		return out, fmt.Errorf("%d of %d processes: %w", len(out.failed), len(procs), first)
	}
	return out, nil
}

// alive returns an error when a process exited, ctx ended, or deadline
// (when set) passed.
func alive(ctx context.Context, procs []*proc, deadline time.Time) error {
	for _, p := range procs {
		if err := p.exited(); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if !deadline.IsZero() && time.Now().After(deadline) {
		return errors.New("scalebench: deadline passed")
	}
	return nil
}

// counts are the counters at one moment.
type counts struct {
	at                 time.Time
	bytes, reads       []uint64
	bridgeCPU, selfCPU time.Duration
}

func snapshot(loads []*pairLoad, procs []*proc) counts {
	c := counts{at: time.Now(), selfCPU: selfCPU()}
	for _, pl := range loads {
		c.bytes = append(c.bytes, pl.bytes.Load())
		c.reads = append(c.reads, pl.reads.Load())
	}
	for _, p := range procs {
		c.bridgeCPU += p.cpu()
	}
	return c
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
