// Package linkbench measures a bridge pair on real time: two bridges joined
// by UDP sockets on loopback (or an in-memory link), faults injected in
// code, a host-side stub requester issuing a TLP mix as fast as the bridges
// take it, and a GPU-side stub completer. It reports goodput, latency
// percentiles, retransmissions, and the delivery invariants it checked.
// `dxpu bench link` is its command line.
package linkbench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/memlink"
	"github.com/dxpu/dxpu/bridge/seal"
	"github.com/dxpu/dxpu/internal/app/rawgoodput"
	"github.com/dxpu/dxpu/tlp"
)

// Options configures a run.
type Options struct {
	Faults memlink.Faults
	// Write, Read, Config are the weights of the TLP mix.
	Write, Read, Config float64
	WriteBytes          int // payload per posted write (multiple of 4, <= MaxPayload)
	ReadBytes           int // bytes per read (multiple of 4, <= 4096)
	Duration            time.Duration
	// Outstanding caps the reads in flight (default 256, MaxOutstanding
	// at most). Up to 256 the requester uses 8-bit tags (0..255); beyond,
	// 10-bit tags (256..1023), and the bridges are configured for them
	// (bridge.Config.TagBits 10), as a GPU's copy engine with 10-bit tags
	// keeps up to 768 reads in flight.
	Outstanding int
	// Batch is how many TLPs the requester hands over at once (default 16).
	Batch      int
	MTU        int
	MaxPayload int
	Window     int
	Seed       uint64
	// CompletionTimeout is the bridges' on real-time runs (0: 50 ms, the
	// bridge package's default); a test on a loaded machine sets more.
	CompletionTimeout time.Duration
	// Spin: each runner polls its socket this long after the last frames
	// before it sleeps (driver.Runner.Spin; `dxpu bridge --spin`).
	Spin time.Duration
	// Key, when set, keys the pair (32 bytes): every frame sealed with
	// SealMode (seal.ModeGCM by default).
	Key      []byte
	SealMode seal.Mode
	// SharedSocket runs each bridge over an agent's data-plane port
	// (udp.Mux: one port for all pairs, frames told apart by pair ID,
	// each pair on a socket the kernel steers its frames to where it
	// can), as `dxpu bridge agent` does, instead of a socket of its own.
	SharedSocket bool
}

// MaxPayload is the bridges' MPS in a run, and MinWriteBytes the
// smallest write: each carries its number and its issue time.
const (
	MaxPayload    = 512
	MinWriteBytes = 16
)

func (o *Options) defaults() {
	if o.Write+o.Read+o.Config == 0 {
		o.Write, o.Read = 0.7, 0.3
	}
	if o.WriteBytes == 0 {
		o.WriteBytes = 256
	}
	if o.ReadBytes == 0 {
		o.ReadBytes = 512
	}
	if o.Duration == 0 {
		o.Duration = 2 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 16
	}
	if o.Outstanding == 0 {
		o.Outstanding = DefaultOutstanding
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = MaxPayload
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.Window == 0 {
		o.Window = bridge.DefaultWindow
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
}

// Percentiles of a latency distribution in microseconds. Real-time runs
// take them from a fixed-size log-linear histogram (within 0.1%; count and
// max exact), virtual runs from the sorted samples.
type Percentiles struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_us"`
	P90   float64 `json:"p90_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
}

func percentiles(d []time.Duration) Percentiles {
	if len(d) == 0 {
		return Percentiles{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(q * float64(len(d)-1))
		return float64(d[i]) / 1e3
	}
	return Percentiles{Count: len(d), P50: at(0.5), P90: at(0.9), P99: at(0.99), P999: at(0.999), Max: float64(d[len(d)-1]) / 1e3}
}

// Result is what a run measured. The invariant keys: Delivered (posted
// writes that arrived), Lost (posted writes that did not), Duplicated
// (arrived more than once), Misordered (arrived after a later one),
// Unanswered (non-posted requests left without a final completion).
type Result struct {
	// PairSteered: with SharedSocket, the kernel steered the pair's frames
	// to a socket of its own on each side's shared port (udp.Mux), as the
	// agent's are on Linux; false, through the muxes' queues.
	PairSteered bool    `json:"pair_steered"`
	Seconds     float64 `json:"duration_s"`
	GoodputGbps float64 `json:"goodput_gbps"`
	// CPUSeconds is the process's CPU time (user and system: both
	// bridges, their sockets' kernel work, and the stub requester and
	// completer) over the run, real-time runs only; CPUSecondsPerGB the
	// same per GB of goodput.
	CPUSeconds      float64 `json:"cpu_s,omitempty"`
	CPUSecondsPerGB float64 `json:"cpu_s_per_gb,omitempty"`
	WritesSent      int     `json:"writes_sent"`
	Delivered       int     `json:"delivered"`
	Lost            int     `json:"lost"`
	// ReportedLost: lost writes the host side reported (EventPostedLost),
	// which only a link down may cause.
	ReportedLost int `json:"reported_lost"`
	LinkDowns    int `json:"link_downs"`
	Duplicated   int `json:"duplicated"`
	Misordered   int `json:"misordered"`
	ReadsSent    int `json:"reads_sent"`
	Completed    int `json:"reads_completed"`
	Failed       int `json:"reads_failed"`
	// ReadsTimedOut of the failed reads got a CA from the host side's
	// bridge at its completion timeout (CompletionTimeoutMs); the
	// completions of LateCompletions of them came after all. On a
	// no-fault run these are the process stalling (MaxStallMs) past the
	// timeout, not the link: after the stall the bridge's timer ran
	// before it read the completions waiting in its socket.
	ReadsTimedOut       int     `json:"reads_timed_out"`
	LateCompletions     int     `json:"late_completions"`
	CompletionTimeoutMs float64 `json:"completion_timeout_ms"`
	// MaxStallMs is the longest this process went without running a 1 ms
	// ticker, beyond its period (real-time runs only: a loaded machine).
	MaxStallMs float64 `json:"max_stall_ms"`
	Unanswered int     `json:"unanswered"`
	// MaxReadsInFlight is the most reads the requester had in flight at
	// once (real-time runs; Options.Outstanding bounds it).
	MaxReadsInFlight int `json:"max_reads_in_flight,omitempty"`
	// MaxWireTag is the largest tag of a request the GPU side received
	// (the host side's bridge assigns it): 256 or more when the pair ran
	// 10-bit tags.
	MaxWireTag int `json:"max_wire_tag,omitempty"`
	BadCpls    int `json:"bad_completions"`
	// CompletionsDeferred: completions the GPU side's bridge could not
	// take in the turn that delivered their request (its queue or window
	// full), handed over later by the completer's goroutine.
	CompletionsDeferred uint64 `json:"completions_deferred"`
	// WriteLatency is the one-way time of a posted write from the host
	// side's Send to the GPU side's delivery; ReadLatency the round trip
	// of a read to its last completion.
	WriteLatency Percentiles    `json:"write_latency"`
	ReadLatency  Percentiles    `json:"read_latency"`
	Retransmits  uint64         `json:"retransmits"`
	RTOs         uint64         `json:"rtos"`
	Host         BridgeCounters `json:"host_counters"`
	GPU          BridgeCounters `json:"gpu_counters"`
	// Link is what the injected faults did to each direction (host to
	// GPU, GPU to host): the in-memory link's in virtual time, the fault
	// layer's in real time. A lossless real-time run has no fault layer
	// and no link_stats: the frames went straight to the sockets.
	Link *[2]LinkStats `json:"link_stats,omitempty"`
	// Events lists link events (up, down with reason, losses) of both sides.
	Events []string `json:"events,omitempty"`
}

// OK reports whether every invariant held: nothing duplicated, misordered
// or unanswered, and no write lost unless a link down reported it.
func (r *Result) OK() bool {
	return r.Lost == r.ReportedLost && (r.LinkDowns > 0 || r.Lost == 0) &&
		r.Duplicated == 0 && r.Misordered == 0 && r.Unanswered == 0 && r.BadCpls == 0
}

type readReq struct {
	active bool
	bytes  int
	got    int
	start  time.Duration
}

// reqHdr is a read request queued for the completer: its header, copied
// by value so that queueing allocates nothing.
type reqHdr struct {
	b [16]byte
	n uint8
}

// state is the run's bookkeeping. The GPU side's (gpu*) is touched only
// by gpuTLP, which runs under the GPU runner's lock, and writesSent only
// by the requester: a lock of their own per write (taken by the
// requester and the GPU side at once) cost the pair CPU that raw UDP's
// baseline does not pay. The rest is under mu. Run reads it all once the
// runners stopped.
type state struct {
	gpu struct {
		seen      []uint8 // arrivals per write number
		last      int64
		delivered int
		dup, mis  int
		bytes     int64
		wlat      *latHist
		maxTag    uint16 // largest wire tag of a request the GPU side got
		cpl       *completer
	}
	mu         sync.Mutex
	tagN       int // tags the requester uses (tagRange)
	maxOut     int // most reads in flight at once
	rlat       *latHist
	reads      []readReq
	freeTags   []uint16
	completed  int
	failed     int
	bad        int
	bytesDone  int64 // read completions' payload
	lostAddrs  map[uint64]bool
	writesSent int
	readsSent  int
	events     eventLog
}

const writeBase = 0x10_0000_0000

// DefaultOutstanding is the reads in flight by default: a requester's
// 8-bit tag space, what any PCIe function has. (It was 64: with 30% reads
// the requester then stopped every 213 TLPs until a burst of completions
// came back, a stop-and-wait of 58 KB per 100 us round trip that bounded
// the default mix at 0.28x raw UDP whatever the bridges could carry.)
const DefaultOutstanding = 256

// MaxOutstanding is the most reads in flight: the 768 tags of a 10-bit
// tag space (256..1023).
const MaxOutstanding = 768

// tagRange returns the requester's first tag and how many it uses.
func tagRange(outstanding int) (base, n int) {
	if outstanding > 256 {
		return 256, 768
	}
	return 0, 256
}

// completionTimeout is the bridges' (the bridge package's default, named
// here for the report).
const completionTimeout = 50 * time.Millisecond

// completionTimeout is o's, or the default.
func (o Options) completionTimeout() time.Duration {
	if o.CompletionTimeout > 0 {
		return o.CompletionTimeout
	}
	return completionTimeout
}

// burstClock is the time since t0, read at the first TLP of a burst a
// runner delivers and kept for the rest of it (next ends the burst). It
// is used under its runner's lock only.
type burstClock struct {
	t0 time.Time
	at time.Duration
	ok bool
}

func (c *burstClock) now() time.Duration {
	if !c.ok {
		c.at, c.ok = time.Since(c.t0), true
	}
	return c.at
}

func (c *burstClock) next() { c.ok = false }

// stallWatch measures how long the process goes without running: the
// longest gap between ticks of a ticker, beyond its period.
type stallWatch struct {
	max  atomic.Int64 // nanoseconds
	last time.Time
}

func (w *stallWatch) run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	w.last = time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.tick(time.Now(), period)
		}
	}
}

// tick records a tick at now (the time it ran, not the one it was due).
func (w *stallWatch) tick(now time.Time, period time.Duration) {
	if gap := now.Sub(w.last) - period; gap > time.Duration(w.max.Load()) {
		w.max.Store(int64(gap))
	}
	w.last = now
}

// checkSizes refuses TLP sizes a run cannot issue (o with defaults).
func (o *Options) checkSizes() error {
	if o.WriteBytes%4 != 0 || o.WriteBytes > o.MaxPayload || o.WriteBytes < MinWriteBytes {
		return fmt.Errorf("linkbench: write size %d: want a multiple of 4 in %d..%d", o.WriteBytes, MinWriteBytes, o.MaxPayload)
	}
	if o.ReadBytes%4 != 0 || o.ReadBytes > 4096 || o.ReadBytes < 4 {
		return fmt.Errorf("linkbench: read size %d: want a multiple of 4 in 4..4096", o.ReadBytes)
	}
	return nil
}

// realtimeConfig is the bridges' configuration of a real-time run (o
// with defaults; Role and Seed unset).
func realtimeConfig(o Options) bridge.Config {
	// Queues and credits are the library's defaults, as 'dxpu bridge'
	// runs them: the pair measured is the pair that ships.
	cfg := bridge.Config{MTU: o.MTU, MaxPayload: o.MaxPayload, Window: o.Window,
		MinRTO: 200 * time.Microsecond, InitialRTO: 2 * time.Millisecond, AckDelay: 10 * time.Microsecond,
		DeadAfter: 200 * time.Millisecond, Keepalive: 5 * time.Millisecond, Key: o.Key, SealMode: o.SealMode,
		CompletionTimeout: o.completionTimeout()}
	if base, _ := tagRange(o.Outstanding); base > 0 {
		cfg.TagBits = 10
	}
	return cfg
}

// checkPairConfig refuses, naming the flag, what the bridges of a run
// with o would refuse (keyed: as the keyed runs of --keys are).
func checkPairConfig(o Options, keyed bool) error {
	o.defaults()
	if err := o.checkSizes(); err != nil {
		return err
	}
	cfg := realtimeConfig(o)
	if keyed {
		cfg.Key = make([]byte, seal.KeyLen)
	}
	cfg.Role = bridge.RoleHost
	cfg = cfg.Defaults()
	err := cfg.Validate()
	var ce *bridge.ConfigError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && ce.Field == "MTU":
		return fmt.Errorf("--mtu %d: %s", o.MTU, strings.TrimPrefix(ce.Problem, strconv.Itoa(o.MTU)+" "))
	case errors.As(err, &ce) && ce.Field == "Window":
		return fmt.Errorf("--window %d: %s", o.Window, ce.Problem)
	}
	return err
}

// Run performs one measurement.
// DefaultMTU is the pair's MTU when Options.MTU is 0: a jumbo frame.
const DefaultMTU = 9000

func Run(ctx context.Context, o Options) (Result, error) {
	o.defaults()
	if err := o.checkSizes(); err != nil {
		return Result{}, err
	}
	hc, gc, closeLink, steered, err := listenPair(ctx, o.SharedSocket)
	if err != nil {
		return Result{}, err
	}
	defer closeLink()
	var ht, gt driver.Transport = hc, gc
	var hf, gf *driver.Faulty
	if o.Faults != (memlink.Faults{}) {
		hf = driver.NewFaulty(hc, o.Faults, o.Seed)
		gf = driver.NewFaulty(gc, o.Faults, o.Seed+7)
		ht, gt = hf, gf
	}
	cfg := realtimeConfig(o)
	tagBase, tagN := tagRange(o.Outstanding)
	hcfg, gcfg := cfg, cfg
	hcfg.Role, gcfg.Role = bridge.RoleHost, bridge.RoleGPU
	hcfg.Seed, gcfg.Seed = o.Seed, o.Seed+1
	hb, err := bridge.New(hcfg)
	if err != nil {
		return Result{}, err
	}
	gb, err := bridge.New(gcfg)
	if err != nil {
		return Result{}, err
	}
	host, gpu := driver.New(hb, ht), driver.New(gb, gt)
	host.Spin, gpu.Spin = o.Spin, o.Spin
	st := &state{tagN: tagN, reads: make([]readReq, 1024), lostAddrs: map[uint64]bool{}, rlat: newLatHist()}
	st.gpu.seen, st.gpu.last, st.gpu.wlat = make([]uint8, 0, 1<<22), -1, newLatHist()
	for t := tagBase + tagN - 1; t >= tagBase; t-- {
		st.freeTags = append(st.freeTags, uint16(t))
	}
	t0 := time.Now()
	now := func() time.Duration { return time.Since(t0) }
	// Each side reads the clock once per burst the runner delivers, as
	// the requester stamps a batch with one reading: a reading per TLP
	// was a tenth of the run's CPU, charged to the pair.
	gclk, hclk := burstClock{t0: t0}, burstClock{t0: t0}
	gpu.OnTLP = func(v tlp.View) { st.gpuTLP(v, &gclk) }
	st.gpu.cpl = newCompleter(gpu, o.MaxPayload)
	gpu.OnDelivered = func() { gclk.next(); st.gpu.cpl.answer() }
	host.OnTLP = func(v tlp.View) { st.hostTLP(v, &hclk) }
	host.OnDelivered = hclk.next
	gpu.OnEvent = func(e bridge.Event) {
		st.mu.Lock()
		st.events.add("gpu", e)
		st.mu.Unlock()
	}
	host.OnEvent = func(e bridge.Event) {
		st.mu.Lock()
		st.events.add("host", e)
		st.mu.Unlock()
		if e.Kind == bridge.EventPostedLost {
			st.mu.Lock()
			for _, a := range e.Addrs {
				st.lostAddrs[a] = true
			}
			st.mu.Unlock()
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range []*driver.Runner{host, gpu} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = r.Run(rctx) }()
	}
	// Cancel, then wait: on an early return (a pair that never came up)
	// the runners would otherwise run on, and the wait never end.
	defer func() { cancel(); wg.Wait() }()
	wg.Add(1)
	go func() { defer wg.Done(); st.gpu.cpl.run(rctx) }()
	var stalls stallWatch
	wg.Add(1)
	go func() { defer wg.Done(); stalls.run(rctx, time.Millisecond) }()

	// Link up.
	for host.State() != bridge.StateUp || gpu.State() != bridge.StateUp {
		if time.Since(t0) > 3*time.Second {
			if o.Faults != (memlink.Faults{}) {
				return Result{}, errors.New("linkbench: the bridges did not come up within 3 s: the faults injected (--loss, --corrupt, ...) let no handshake through")
			}
			return Result{}, errors.New("linkbench: the bridges did not come up within 3 s")
		}
		time.Sleep(time.Millisecond)
	}
	start, cpu0 := time.Now(), rawgoodput.CPUTime()
	st.produce(rctx, host, o, now)
	// Drain: everything acknowledged and answered.
	drainEnd := time.Now().Add(2 * time.Second)
	for time.Now().Before(drainEnd) {
		st.mu.Lock()
		out := st.tagN - len(st.freeTags)
		st.mu.Unlock()
		if out == 0 && host.Pending() == 0 && gpu.Pending() == 0 {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	elapsed, cpu := time.Since(start), rawgoodput.CPUTime()-cpu0
	cancel()
	wg.Wait() // the runners stopped: the GPU side's state is still

	st.mu.Lock()
	defer st.mu.Unlock()
	res := Result{
		PairSteered:         steered,
		Seconds:             elapsed.Seconds(),
		GoodputGbps:         float64(st.bytesDone+st.gpu.bytes) * 8 / elapsed.Seconds() / 1e9,
		CPUSeconds:          cpu.Seconds(),
		WritesSent:          st.writesSent,
		Delivered:           st.gpu.delivered,
		Duplicated:          st.gpu.dup,
		Misordered:          st.gpu.mis,
		ReadsSent:           st.readsSent,
		Completed:           st.completed,
		Failed:              st.failed,
		Unanswered:          st.tagN - len(st.freeTags),
		MaxReadsInFlight:    st.maxOut,
		MaxWireTag:          int(st.gpu.maxTag),
		BadCpls:             st.bad,
		CompletionsDeferred: st.gpu.cpl.deferred.Load(),
		WriteLatency:        st.gpu.wlat.percentiles(),
		ReadLatency:         st.rlat.percentiles(),
		Host:                BridgeCounters(host.Counters()),
		GPU:                 BridgeCounters(gpu.Counters()),
	}
	if err := host.FrameError(); err != nil {
		st.events.addLine(fmt.Sprintf("host last frame error: %v", err))
	}
	if err := gpu.FrameError(); err != nil {
		st.events.addLine(fmt.Sprintf("gpu last frame error: %v", err))
	}
	res.Events = st.events.list()
	for n := 0; n < st.writesSent; n++ {
		if n >= len(st.gpu.seen) || st.gpu.seen[n] == 0 {
			res.Lost++
			if st.lostAddrs[writeBase+uint64(n)*4096] {
				res.ReportedLost++
			}
		}
	}
	if b := st.bytesDone + st.gpu.bytes; b > 0 {
		res.CPUSecondsPerGB = cpu.Seconds() / (float64(b) / 1e9)
	}
	res.LinkDowns = int(res.Host.LinkDowns + res.GPU.LinkDowns)
	res.Retransmits = res.Host.Retransmits + res.GPU.Retransmits
	res.RTOs = res.Host.RTOs + res.GPU.RTOs
	res.ReadsTimedOut, res.LateCompletions = int(res.Host.CompletionTimeouts), int(res.Host.LateCompletions)
	res.CompletionTimeoutMs = float64(o.completionTimeout()) / 1e6
	res.MaxStallMs = float64(stalls.max.Load()) / 1e6
	if hf != nil {
		res.Link = &[2]LinkStats{LinkStats(hf.Stats()), LinkStats(gf.Stats())}
	}
	return res, nil
}

// produce issues the mix until the duration is over, in batches of up to
// Batch TLPs handed over under one lock (as a PCIe port delivers bursts).
func (st *state) produce(ctx context.Context, host *driver.Runner, o Options, now func() time.Duration) {
	defer host.SendHeld() // what SendManyHeld left queued
	rng := rand.New(rand.NewPCG(o.Seed, 99))
	end := time.Now().Add(o.Duration)
	store := make([][]byte, o.Batch)
	for i := range store {
		store[i] = make([]byte, 0, 16+max(o.WriteBytes, 16))
	}
	batch := make([][]byte, 0, o.Batch)
	tags := make([]int, 0, o.Batch) // tag of each batch entry, -1 for writes
	// Each TLP is a copy of its kind's template with the address, tag
	// and the write's number and time patched in, as a port's TLPs come
	// ready made: encoding and checking every field per TLP (AppendTo)
	// was a tenth of the run's CPU, charged to the pair.
	mwr, _ := (&tlp.Packet{Kind: tlp.MWr, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: writeBase, Data: make([]byte, o.WriteBytes)}).AppendTo(nil)
	mrd := tlp.Packet{Kind: tlp.MRd, Addr64: true, FirstBE: 0xf, LastBE: 0xf, Address: 0x20_0000_0000, Length: uint16(o.ReadBytes / 4)}
	if mrd.Length == 1 {
		mrd.LastBE = 0
	}
	mrdT, _ := mrd.AppendTo(nil)
	cfgT, _ := (&tlp.Packet{Kind: tlp.CfgRd0, FirstBE: 0xf, Length: 1, TargetID: tlp.NewID(1, 0, 0)}).AppendTo(nil)
	hdr := tlp.View(mwr).HeaderLen()
	total := o.Write + o.Read + o.Config
	waitT := time.NewTimer(time.Hour)
	defer waitT.Stop()
	wait := func() {
		host.SendHeld() // nothing more is ready: what is queued goes now
		waitT.Reset(100 * time.Microsecond)
		select {
		case <-host.Progress:
		case <-waitT.C:
		}
	}
	// send hands the batch over; on stop it undoes what was not taken.
	// (It walks the batch with its own slices: re-slicing batch itself
	// would shrink its capacity and make every later append allocate.)
	send := func() bool {
		rest, restTags := batch, tags
		batch, tags = batch[:0], tags[:0]
		for len(rest) > 0 {
			// Held: the next batch fills the frame this one leaves
			// part-filled (wait and the end send the rest).
			n, err := host.SendManyHeld(rest)
			rest, restTags = rest[n:], restTags[n:]
			if err == nil {
				continue
			}
			if !errors.Is(err, bridge.ErrBusy) || time.Now().After(end) || ctx.Err() != nil {
				st.mu.Lock()
				for _, tag := range restTags {
					if tag < 0 {
						st.writesSent--
					} else {
						st.reads[tag].active = false
						st.freeTags = append(st.freeTags, uint16(tag))
						st.readsSent--
					}
				}
				st.mu.Unlock()
				return false
			}
			wait()
		}
		return true
	}
	// One clock reading a batch stamps its TLPs and checks the end, and
	// the context is checked with it (its lock costs as much): its TLPs
	// are handed over together, and a reading (tens to hundreds of ns on
	// a VM's clock) per TLP cost more than a tenth of the run's CPU.
	endAt := now() + o.Duration
	var stamp time.Duration
	for i := 0; ; i++ {
		if len(batch) == 0 {
			if stamp = now(); stamp >= endAt || ctx.Err() != nil {
				break
			}
		}
		buf := store[len(batch)][:0]
		r := rng.Float64() * total
		if r < o.Write {
			n := st.writesSent
			st.writesSent++
			b := append(buf, mwr...)
			tlp.View(b).SetAddress(writeBase + uint64(n)*4096)
			binary.BigEndian.PutUint64(b[hdr:], uint64(n))
			binary.BigEndian.PutUint64(b[hdr+8:], uint64(stamp))
			batch, tags = append(batch, b), append(tags, -1)
		} else {
			cfg := r >= o.Write+o.Read
			st.mu.Lock()
			if len(st.freeTags) <= st.tagN-o.Outstanding {
				st.mu.Unlock()
				if len(batch) > 0 {
					if !send() {
						return
					}
				}
				wait()
				continue
			}
			tag := st.freeTags[len(st.freeTags)-1]
			st.freeTags = st.freeTags[:len(st.freeTags)-1]
			st.maxOut = max(st.maxOut, st.tagN-len(st.freeTags))
			rq := readReq{active: true, start: stamp}
			var b []byte
			if cfg {
				b = append(buf, cfgT...)
				rq.bytes = 4
			} else {
				b = append(buf, mrdT...)
				tlp.View(b).SetAddress(0x20_0000_0000 + uint64(i%4096)*4096)
				rq.bytes = o.ReadBytes
			}
			tlp.View(b).SetTag(tag)
			st.reads[tag] = rq
			st.readsSent++
			st.mu.Unlock()
			batch, tags = append(batch, b), append(tags, int(tag))
		}
		if len(batch) == o.Batch {
			if !send() {
				return
			}
		}
	}
	send()
}

func (st *state) gpuTLP(v tlp.View, clk *burstClock) {
	switch k := v.Kind(); {
	case k == tlp.MWr:
		n := (v.Address() - writeBase) / 4096
		pl := v.Payload()
		g := &st.gpu // under the GPU runner's lock (see state)
		if n >= uint64(len(g.seen)) {
			g.seen = append(g.seen, make([]uint8, int(n)+1-len(g.seen))...)
		}
		if g.seen[n] < 255 {
			g.seen[n]++
		}
		if g.seen[n] > 1 {
			g.dup++
		} else {
			g.delivered++
			g.bytes += int64(len(pl))
		}
		if int64(n) <= g.last {
			g.mis++
		}
		g.last = max(g.last, int64(n))
		if len(pl) >= 16 {
			g.wlat.add(clk.now() - time.Duration(binary.BigEndian.Uint64(pl[8:])))
		}
	case k == tlp.MRd || k == tlp.CfgRd0:
		st.gpu.maxTag = max(st.gpu.maxTag, v.Tag())
		st.gpu.cpl.request(v)
	}
}

func (st *state) hostTLP(v tlp.View, clk *burstClock) {
	if !v.Kind().IsCompletion() {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	tag := v.Tag()
	if int(tag) >= len(st.reads) || !st.reads[tag].active {
		st.bad++
		return
	}
	r := &st.reads[tag]
	fin := func(ok bool) {
		r.active = false
		st.freeTags = append(st.freeTags, tag)
		if ok {
			st.completed++
			st.rlat.add(clk.now() - r.start)
		} else {
			st.failed++
		}
	}
	if v.Status() != tlp.StatusSC {
		fin(false)
		return
	}
	carried := v.PayloadLen() - int(v.LowerAddress()&3)
	if v.ByteCount() != r.bytes-r.got {
		st.bad++
	}
	r.got += carried
	st.bytesDone += int64(carried)
	if carried >= v.ByteCount() {
		fin(true)
	}
}
