package replay

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/model"
)

// Options say where and how to replay.
type Options struct {
	Fabric *topo.Fabric // nil: native
	// Model is the GPU model (default A100, the GPU of most shared traces).
	Model          gpu.Model
	TenBitTags     bool
	MRRS           int
	MaxOutstanding int
	// MaxSimBytes bounds the TLP-level part of each copy (default 1 MiB;
	// the rest moves functionally at the rate the TLPs reached).
	MaxSimBytes uint64
	Sync        cuda.SyncMode
	// Bridge puts a real dxpu bridge pair (package bridge) on each fabric
	// path instead of the latency and bandwidth pipe.
	Bridge bool
	// Path, when set with a Fabric, is the fabric path (over Bridge): a
	// caller's own, e.g. to read the bridge pairs' counters afterwards.
	Path topo.PathFactory
	// Calibration of the native emulator; nil: measured (and cached).
	Calibration *Calibration
	// Progress, when set, is called with the nodes finished so far.
	Progress func(done, total int)
}

func (o *Options) defaults() {
	if o.Model.DeviceID == 0 {
		o.Model = gpu.A100SXM
	}
	if o.MaxSimBytes == 0 {
		o.MaxSimBytes = 1 << 20
	}
}

// Result is a replay's outcome.
type Result struct {
	// Span is first start to last end over calls and GPU operations.
	Span time.Duration
	// Start and End per node, relative to the replay's origin.
	Start, End []time.Duration
	Nodes      int
	GPUs       int
	Events     uint64 // simulator events run
	Stats      []gpu.Stats
}

// stallAfter is how long a replay may go without finishing a node before
// it is declared stalled (longer than any GPU operation or CPU gap in a
// trace is expected to be).
const stallAfter = 10 * time.Minute

// ErrStalled is returned when the simulation runs out of events with nodes
// still waiting: a dependency the emulator could not meet.
var ErrStalled = errors.New("replay: simulation stalled")

// Calibration is the native emulator's own latencies, which the trace's
// measured times already contain: a replay subtracts them so that the
// native replay reproduces the trace, and the fabric's additions stand out.
type Calibration struct {
	Launch time.Duration // doorbell write issued -> kernel starts, idle stream
	Notify time.Duration // kernel ends -> a spinning CPU sees its semaphore
	MMIO   time.Duration // one MMIO read of a GPU register
}

var (
	calMu    sync.Mutex
	calCache = map[string]Calibration{}
)

// Calibrate measures the native emulator for o's GPU model.
func Calibrate(o Options) (Calibration, error) {
	o.defaults()
	key := fmt.Sprintf("%s/%d", o.Model.Name, o.Sync)
	calMu.Lock()
	defer calMu.Unlock()
	if c, ok := calCache[key]; ok {
		return c, nil
	}
	w, err := topo.Build(topo.Options{GPUs: 1, Model: o.Model})
	if err != nil {
		return Calibration{}, err
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{Sync: o.Sync})
	if err != nil {
		return Calibration{}, err
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		return Calibration{}, err
	}
	var kStart, kEnd time.Duration
	w.GPUs[0].OnOp = func(_ gpu.Command, s, e time.Duration) { kStart, kEnd = s, e }
	t0 := c.Now()
	if _, err := st.Submit(gpu.Command{Op: gpu.OpKernel, Duration: 1000}); err != nil {
		return Calibration{}, err
	}
	var seen time.Duration
	st.OnDone(st.Submitted(), func() { seen = c.Now() })
	w.S.Run(-1)
	if err := st.Err(); err != nil {
		return Calibration{}, fmt.Errorf("replay: calibration kernel: %w", err)
	}
	if seen == 0 {
		return Calibration{}, fmt.Errorf("replay: calibration kernel never completed")
	}
	t1 := c.Now()
	if _, err := c.ReadRegister(c.Devices[0], gpu.RegScratch); err != nil {
		return Calibration{}, err
	}
	cal := Calibration{Launch: kStart - t0, Notify: seen - kEnd, MMIO: c.Now() - t1}
	calCache[key] = cal
	return cal, nil
}

// Run replays g.
func Run(ctx context.Context, g *model.Graph, o Options) (*Result, error) {
	o.defaults()
	if g == nil || len(g.Nodes) == 0 {
		return nil, fmt.Errorf("replay: empty graph")
	}
	cal := o.Calibration
	if cal == nil {
		c, err := Calibrate(o)
		if err != nil {
			return nil, fmt.Errorf("replay: calibrating: %w", err)
		}
		cal = &c
	}
	r, err := newRun(g, o, *cal)
	if err != nil {
		return nil, err
	}
	return r.run(ctx)
}

type gpuRef struct {
	dev    int
	stream *cuda.Stream
}

type run struct {
	g     *model.Graph
	o     Options
	cal   Calibration
	w     *topo.World
	c     *cuda.Context
	devOf map[int64]int
	strm  []gpuRef // per graph stream

	launches [][]int32 // per call: GPU nodes it launches
	threads  [][]int32 // per thread: its calls in order
	eventSrc map[int32]uint64
	seq      []uint64
	onSubmit map[int32][]func()
	start    []time.Duration
	end      []time.Duration
	started  []bool
	finished []bool
	done     int
	origin   time.Duration
	hostBuf  []uint64
	devBuf   []uint64
	// lastSubmit per graph stream: launches reach a stream in call order,
	// so a submission never overtakes an earlier one to the same stream.
	lastSubmit []time.Duration
	launched   []bool // GPU nodes with a Launch edge
	err        error
}

func newRun(g *model.Graph, o Options, cal Calibration) (*run, error) {
	r := &run{g: g, o: o, cal: cal, devOf: map[int64]int{}, eventSrc: map[int32]uint64{}, onSubmit: map[int32][]func(){}}
	for _, s := range g.Streams {
		if _, ok := r.devOf[s.Device]; !ok {
			r.devOf[s.Device] = len(r.devOf)
		}
	}
	ngpu := max(len(r.devOf), 1)
	if ngpu > 31 {
		return nil, fmt.Errorf("replay: trace uses %d devices, at most 31 supported", ngpu)
	}
	var path topo.PathFactory
	if o.Bridge && o.Fabric != nil {
		path = topo.BridgePaths(*o.Fabric)
	}
	if o.Path != nil && o.Fabric != nil {
		path = o.Path
	}
	w, err := topo.Build(topo.Options{GPUs: ngpu, Model: o.Model, Fabric: o.Fabric, Path: path,
		Enum: host.EnumConfig{TenBitTags: o.TenBitTags, MRRS: o.MRRS},
		GPU:  gpu.Config{MaxOutstanding: o.MaxOutstanding, MaxSimBytes: o.MaxSimBytes}})
	if err != nil {
		return nil, err
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{Sync: o.Sync})
	if err != nil {
		return nil, err
	}
	r.w, r.c = w, c
	// One channel per trace stream; staging buffers per device sized for
	// the largest copy (their contents do not matter to timing).
	var maxBytes int64 = 4096
	for i := range g.Nodes {
		maxBytes = max(maxBytes, g.Nodes[i].Bytes)
	}
	for range c.Devices {
		r.hostBuf = append(r.hostBuf, c.MallocHost(uint64(maxBytes)))
	}
	for _, d := range c.Devices {
		r.devBuf = append(r.devBuf, d.Malloc(uint64(maxBytes)))
	}
	for _, s := range g.Streams {
		di := r.devOf[s.Device]
		st, err := c.Devices[di].NewStream()
		if err != nil {
			return nil, err
		}
		r.strm = append(r.strm, gpuRef{dev: di, stream: st})
	}
	n := len(g.Nodes)
	r.lastSubmit = make([]time.Duration, len(g.Streams))
	r.launched = make([]bool, n)
	r.launches = make([][]int32, n)
	r.threads = make([][]int32, len(g.Threads))
	r.seq = make([]uint64, n)
	r.start, r.end = make([]time.Duration, n), make([]time.Duration, n)
	r.started, r.finished = make([]bool, n), make([]bool, n)
	for i := range g.Nodes {
		nd := &g.Nodes[i]
		if nd.Kind == model.Call && nd.Thread >= 0 {
			r.threads[nd.Thread] = append(r.threads[nd.Thread], int32(i))
		}
		for _, e := range g.InEdges(i) {
			switch e.Kind {
			case model.Launch:
				r.launches[e.From] = append(r.launches[e.From], int32(i))
				r.launched[i] = true
			case model.Event:
				r.eventSrc[e.From] = 1
			}
		}
	}
	for i := range r.threads {
		sort.Slice(r.threads[i], func(a, b int) bool { return r.threads[i][a] < r.threads[i][b] })
	}
	for i := range g.Nodes {
		nd := &g.Nodes[i]
		if nd.Kind.OnGPU() && nd.Stream >= 0 {
			if _, ok := r.eventSrc[int32(i)]; ok {
				r.eventSrc[int32(i)] = c.Devices[r.strm[nd.Stream].dev].Malloc(64)
			}
		}
	}
	for gi, gp := range w.GPUs {
		gi := gi
		_ = gi
		gp.OnOp = func(cmd gpu.Command, s, e time.Duration) {
			if cmd.Marker == 0 {
				return
			}
			j := int(cmd.Marker - 1)
			r.start[j], r.end[j] = s, e
			r.started[j] = true
			r.finish(j)
		}
	}
	return r, nil
}

func (r *run) now() time.Duration { return r.w.S.Now() }

func (r *run) finish(i int) {
	if r.finished[i] {
		return
	}
	r.finished[i] = true
	r.done++
	if r.o.Progress != nil && (r.done%256 == 0 || r.done == len(r.g.Nodes)) {
		r.o.Progress(r.done, len(r.g.Nodes))
	}
}

func (r *run) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *run) run(ctx context.Context) (*Result, error) {
	g := r.g
	s := r.w.S
	// The replay's time zero sits after set-up, on a round microsecond.
	r.origin = (s.Now()/time.Microsecond + 1) * time.Microsecond
	for t := range r.threads {
		if len(r.threads[t]) > 0 {
			first := r.threads[t][0]
			r.scheduleCall(0, first)
		}
	}
	// GPU operations no call launched in the trace are submitted so that
	// they start natively at their measured time.
	for i := range g.Nodes {
		nd := &g.Nodes[i]
		if !nd.Kind.OnGPU() || nd.Stream < 0 {
			continue
		}
		if !r.launched[i] {
			r.submitAt(int32(i), r.origin+max(0, nd.Start-r.cal.Launch))
		}
	}
	lastDone, lastProgress := -1, s.Now()
	for r.done < len(g.Nodes) && r.err == nil {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if pcie.RunUntil(s, s.Now()+10*time.Millisecond) == 0 && s.Pending() <= 0 {
			break
		}
		for _, d := range r.c.Devices {
			if err := d.Err(); err != nil {
				// Its nodes would never finish: say why now rather than
				// stall.
				r.fail(fmt.Errorf("replay: %w", err))
			}
		}
		if r.done != lastDone {
			lastDone, lastProgress = r.done, s.Now()
		} else if s.Now()-lastProgress > stallAfter {
			break // only timers (keepalives) left: nothing can finish
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.done < len(g.Nodes) {
		return nil, fmt.Errorf("%w: %d of %d nodes finished", ErrStalled, r.done, len(g.Nodes))
	}
	res := &Result{Nodes: len(g.Nodes), GPUs: len(r.w.GPUs), Events: s.Steps(),
		Start: make([]time.Duration, len(g.Nodes)), End: make([]time.Duration, len(g.Nodes))}
	first, last := r.start[0], r.end[0]
	for i := range g.Nodes {
		first = min(first, r.start[i])
		last = max(last, r.end[i])
		res.Start[i], res.End[i] = r.start[i]-r.origin, r.end[i]-r.origin
	}
	res.Span = last - first
	for _, gp := range r.w.GPUs {
		res.Stats = append(res.Stats, gp.Stats)
	}
	return res, nil
}

// scheduleCall starts call i when its program-order predecessors allow.
func (r *run) scheduleCall(_ int, i int32) {
	nd := &r.g.Nodes[i]
	at, bound := nd.Start, false
	for _, e := range r.g.InEdges(int(i)) {
		if e.Kind != model.Program {
			continue
		}
		t := r.end[e.From] - r.origin + e.Delay
		if !bound || t > at {
			at, bound = t, true
		}
	}
	if bound {
		at += nd.Slack
	}
	r.w.S.At(r.origin+at, func() { r.startCall(i) })
}

func (r *run) startCall(i int32) {
	g := r.g
	nd := &g.Nodes[i]
	now := r.now()
	r.start[i] = now
	r.started[i] = true
	for _, j := range r.launches[i] {
		delay := time.Duration(0)
		for _, e := range g.InEdges(int(j)) {
			if e.Kind == model.Launch && e.From == i {
				delay = e.Delay
			}
		}
		r.submitAt(j, now+max(0, delay-r.cal.Launch))
	}
	// What the call's end waits for: its own work, MMIO reads, and the
	// completions it synchronizes with.
	pending := 1
	endAt := now + nd.Work
	complete := func() {
		pending--
		if pending > 0 {
			return
		}
		r.w.S.At(max(endAt, r.now()), func() { r.endCall(i) })
	}
	if k := int(nd.MMIOReads); k > 0 && len(r.c.Devices) > 0 {
		pending++
		d := r.c.Devices[0]
		var read func(left int)
		read = func(left int) {
			if left == 0 {
				extra := r.now() - now - time.Duration(k)*r.cal.MMIO
				if extra > 0 {
					endAt += extra
				}
				complete()
				return
			}
			r.c.Host().MMIOReadAsync(d.BAR0()+gpu.RegScratch, 4, func(_ []byte, err error) {
				if err != nil {
					r.fail(fmt.Errorf("replay: MMIO read in call %d (%s): %w", i, nd.Name, err))
				}
				read(left - 1)
			})
		}
		read(k)
	}
	for _, e := range g.InEdges(int(i)) {
		if e.Kind != model.Wait {
			continue
		}
		pending++
		from, delay := e.From, e.Delay
		r.whenSubmitted(from, func() {
			ref := r.strm[g.Nodes[from].Stream]
			ref.stream.OnDone(r.seq[from], func() {
				if ref.stream.Completed() < r.seq[from] {
					// Woken by a lost device or a stopped channel.
					r.fail(fmt.Errorf("replay: call %d (%s) waits for node %d (%s): %w", i, nd.Name, from, g.Nodes[from].Name, ref.stream.Err()))
					return
				}
				endAt = max(endAt, r.now()+delay-r.cal.Notify)
				complete()
			})
		})
	}
	complete()
}

func (r *run) endCall(i int32) {
	r.end[i] = r.now()
	r.finish(int(i))
	nd := &r.g.Nodes[i]
	th := r.threads[nd.Thread]
	k := sort.Search(len(th), func(k int) bool { return th[k] >= i })
	if k+1 < len(th) {
		r.scheduleCall(0, th[k+1])
	}
}

// submitAt submits GPU node j at virtual time at, or right after the
// previous submission to its stream if that one is later.
func (r *run) submitAt(j int32, at time.Duration) {
	if st := r.g.Nodes[j].Stream; st >= 0 {
		at = max(at, r.lastSubmit[st])
		r.lastSubmit[st] = at
	}
	if at <= r.now() {
		r.submit(j)
		return
	}
	r.w.S.At(at, func() { r.submit(j) })
}

func (r *run) whenSubmitted(j int32, fn func()) {
	if r.seq[j] != 0 {
		fn()
		return
	}
	r.onSubmit[j] = append(r.onSubmit[j], fn)
}

// submit sends GPU node j to its stream's channel.
func (r *run) submit(j int32) {
	g := r.g
	nd := &g.Nodes[j]
	if r.seq[j] != 0 || nd.Stream < 0 {
		return
	}
	ref := r.strm[nd.Stream]
	var cmds []gpu.Command
	for _, e := range g.InEdges(int(j)) {
		if e.Kind != model.Event {
			continue
		}
		from := &g.Nodes[e.From]
		if from.Stream < 0 || r.strm[from.Stream].dev != ref.dev {
			continue // cross-device waits are not emulated
		}
		cmds = append(cmds, gpu.Command{Op: gpu.OpSemAcquire, Addr: r.eventSrc[e.From], Value: 1})
	}
	// Slack (a gap the trace shows before the op) is kept for launched ops;
	// an op no call launched is submitted at its measured time, which
	// already places it.
	if nd.Slack > 0 && r.launched[j] {
		cmds = append(cmds, gpu.Command{Op: gpu.OpWait, Duration: uint64(nd.Slack)})
	}
	marker := uint32(j + 1)
	switch nd.Kind {
	case model.Kernel:
		cmds = append(cmds, gpu.Command{Op: gpu.OpKernel, Duration: uint64(nd.Work), Marker: marker})
	case model.Memset:
		cmds = append(cmds, gpu.Command{Op: gpu.OpMemset, Dst: r.devBuf[ref.dev], Len: uint64(nd.Bytes), Duration: uint64(max(nd.Work, 1)), Marker: marker})
	case model.Memcpy:
		c := gpu.Command{Op: gpu.OpCopy, Len: uint64(nd.Bytes), Duration: uint64(nd.Work), Marker: marker}
		switch nd.Copy {
		case model.H2D:
			c.Dir, c.Src, c.Dst = gpu.DirH2D, r.hostBuf[ref.dev], r.devBuf[ref.dev]
		case model.D2H:
			c.Dir, c.Src, c.Dst = gpu.DirD2H, r.devBuf[ref.dev], r.hostBuf[ref.dev]
		default:
			c.Dir, c.Src, c.Dst = gpu.DirD2D, r.devBuf[ref.dev], r.devBuf[ref.dev]
		}
		cmds = append(cmds, c)
	}
	if addr, ok := r.eventSrc[j]; ok {
		cmds = append(cmds, gpu.Command{Op: gpu.OpSemRelease, Addr: addr, Value: 1})
	}
	seq, err := ref.stream.Submit(cmds...)
	if errors.Is(err, cuda.ErrRingFull) {
		// The CPU waits for room in the ring, as the driver does.
		ref.stream.OnDone(ref.stream.Completed()+1, func() { r.submit(j) })
		return
	}
	if err != nil {
		r.fail(fmt.Errorf("replay: submitting node %d (%s): %w", j, nd.Name, err))
		return
	}
	r.seq[j] = seq
	for _, fn := range r.onSubmit[j] {
		fn()
	}
	delete(r.onSubmit, j)
}
