package model

import (
	"container/heap"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dxpu/dxpu/model/trace"
)

// ErrEmpty is returned for a workload with no runtime call or GPU operation.
var ErrEmpty = errors.New("model: trace has no CUDA runtime calls or GPU operations")

// syncTolerance is how far past a blocking call's return a GPU operation may
// end (trace clock skew between CPU and GPU) and still count as waited for.
const syncTolerance = 2 * time.Microsecond

// defaultLaunchLatency stands in for the idle launch latency of a device
// with no idle launch in the trace.
const defaultLaunchLatency = 5 * time.Microsecond

// Build turns a decoded trace into its dependency graph.
func Build(w *trace.Workload) (*Graph, error) {
	b := &builder{w: w, g: &Graph{Name: w.Name}}
	if err := b.nodes(); err != nil {
		return nil, err
	}
	b.programEdges()
	b.streamOrder()
	b.eventEdges()
	b.launchEdges()
	b.waitEdges()
	b.sortEdges()
	b.clampAndSlack()
	b.sortTopo()
	b.calibrate()
	b.assignSteps()
	return b.g, nil
}

type builder struct {
	w *trace.Workload
	g *Graph

	edges     []Edge
	callCorr  map[int64]int32   // correlation -> call node
	launched  map[int32][]int32 // call node -> GPU nodes it launched
	launchAt  []time.Duration   // per node: when its launch was issued
	streamOps [][]int32         // per stream: GPU nodes in execution order
	streamPos []int32           // per GPU node: position in its stream
	syncs     map[int64][]*trace.Op
	prevCall  []int32 // per call: the previous call on its thread, or -1
	nextCall  []int32 // per call: the next call on its thread, or -1
}

type threadKey = struct{ pid, tid int64 }

func (b *builder) nodes() error {
	w, g := b.w, b.g
	first, last, ok := w.Span()
	if !ok {
		return ErrEmpty
	}
	g.Origin = first
	g.Baseline = time.Duration(last - first)
	threads := map[threadKey]int32{}
	streams := map[StreamInfo]int32{}
	b.callCorr = map[int64]int32{}
	b.syncs = map[int64][]*trace.Op{}
	for i := range w.Ops {
		o := &w.Ops[i]
		if o.Kind == trace.Sync {
			if o.Corr != trace.NoID {
				b.syncs[o.Corr] = append(b.syncs[o.Corr], o)
			}
			continue
		}
		n := Node{Name: o.Name, Start: time.Duration(o.Start - first), Dur: time.Duration(o.Dur),
			Thread: -1, Stream: -1, Corr: o.Corr, Bytes: o.Bytes, Step: -1}
		n.Work = n.Dur
		switch o.Kind {
		case trace.Runtime:
			n.Kind = Call
			k := threadKey{o.PID, o.TID}
			t, seen := threads[k]
			if !seen {
				t = int32(len(g.Threads))
				threads[k] = t
				g.Threads = append(g.Threads, Thread{PID: o.PID, TID: o.TID})
			}
			n.Thread = t
			n.Wait = BlockingWait(o.Name)
			n.MMIOReads = int32(MMIOReads(o.Name))
			if o.Corr != trace.NoID {
				if _, dup := b.callCorr[o.Corr]; !dup {
					b.callCorr[o.Corr] = int32(len(g.Nodes))
				}
			}
		case trace.Kernel, trace.Memcpy, trace.Memset:
			n.Kind = map[trace.Kind]NodeKind{trace.Kernel: Kernel, trace.Memcpy: Memcpy, trace.Memset: Memset}[o.Kind]
			k := StreamInfo{Device: o.Device, Stream: o.Stream}
			s, seen := streams[k]
			if !seen {
				s = int32(len(g.Streams))
				streams[k] = s
				g.Streams = append(g.Streams, k)
			}
			n.Stream = s
			n.Copy, n.Pageable = o.Copy, o.Pageable
		default:
			continue
		}
		g.Nodes = append(g.Nodes, n)
	}
	// Launch issue times: the call's start, or the op's own start when no
	// call launched it.
	b.launched = map[int32][]int32{}
	b.launchAt = make([]time.Duration, len(g.Nodes))
	for i := range g.Nodes {
		n := &g.Nodes[i]
		b.launchAt[i] = n.Start
		if n.Kind.OnGPU() {
			if c, ok := b.callCorr[n.Corr]; ok && n.Corr != trace.NoID {
				b.launchAt[i] = g.Nodes[c].Start
				b.launched[c] = append(b.launched[c], int32(i))
			}
		}
	}
	return nil
}

func (b *builder) add(from, to int32, kind EdgeKind, delay time.Duration) {
	b.edges = append(b.edges, Edge{From: from, To: to, Kind: kind, Delay: delay})
}

// programEdges chains the calls of each CPU thread in start order; the
// delay is the CPU time between one call's return and the next call.
func (b *builder) programEdges() {
	g := b.g
	per := make([][]int32, len(g.Threads))
	b.prevCall = make([]int32, len(g.Nodes))
	b.nextCall = make([]int32, len(g.Nodes))
	for i := range b.prevCall {
		b.prevCall[i], b.nextCall[i] = -1, -1
	}
	for i := range g.Nodes {
		if t := g.Nodes[i].Thread; t >= 0 {
			per[t] = append(per[t], int32(i))
		}
	}
	for _, calls := range per {
		slices.SortStableFunc(calls, func(a, c int32) int { return cmpDur(g.Nodes[a].Start, g.Nodes[c].Start) })
		for k := 1; k < len(calls); k++ {
			prev, cur := &g.Nodes[calls[k-1]], &g.Nodes[calls[k]]
			b.add(calls[k-1], calls[k], Program, cur.Start-prev.End())
			b.prevCall[calls[k]] = calls[k-1]
			b.nextCall[calls[k-1]] = calls[k]
		}
	}
}

// streamOrder sorts each stream's operations by start and links them.
func (b *builder) streamOrder() {
	g := b.g
	b.streamOps = make([][]int32, len(g.Streams))
	b.streamPos = make([]int32, len(g.Nodes))
	for i := range g.Nodes {
		if s := g.Nodes[i].Stream; s >= 0 {
			b.streamOps[s] = append(b.streamOps[s], int32(i))
		}
	}
	for _, ops := range b.streamOps {
		slices.SortStableFunc(ops, func(a, c int32) int { return cmpDur(g.Nodes[a].Start, g.Nodes[c].Start) })
		for k, i := range ops {
			b.streamPos[i] = int32(k)
			if k > 0 {
				p := ops[k-1]
				b.add(p, i, Stream, min(0, g.Nodes[i].Start-g.Nodes[p].End()))
			}
		}
	}
}

// launchEdges links each GPU operation to its call. When the stream was idle
// at the call (its previous operation and any event it waits for done), the
// whole measured latency is the launch's; otherwise the launch could have
// been as late as the device's typical idle latency without delaying the
// operation.
func (b *builder) launchEdges() {
	g := b.g
	// otherReady: when the stream and event edges let each operation start.
	otherReady := make([]time.Duration, len(g.Nodes))
	hasOther := make([]bool, len(g.Nodes))
	for _, e := range b.edges {
		if e.Kind == Stream || e.Kind == Event {
			if t := g.Nodes[e.From].End() + e.Delay; !hasOther[e.To] || t > otherReady[e.To] {
				otherReady[e.To], hasOther[e.To] = t, true
			}
		}
	}
	idle := func(i int32, c int32) bool {
		return !hasOther[i] || otherReady[i] <= g.Nodes[c].Start
	}
	lat := map[int64][]time.Duration{}
	for c, ops := range b.launched {
		for _, i := range ops {
			if idle(i, c) {
				dev := g.Streams[g.Nodes[i].Stream].Device
				lat[dev] = append(lat[dev], g.Nodes[i].Start-g.Nodes[c].Start)
			}
		}
	}
	median := map[int64]time.Duration{}
	for dev, l := range lat {
		slices.Sort(l)
		median[dev] = max(0, l[len(l)/2])
	}
	calls := make([]int32, 0, len(b.launched))
	for c := range b.launched {
		calls = append(calls, c)
	}
	slices.Sort(calls) // deterministic edge order
	for _, c := range calls {
		for _, i := range b.launched[c] {
			l := g.Nodes[i].Start - g.Nodes[c].Start
			if !idle(i, c) {
				m, ok := median[g.Streams[g.Nodes[i].Stream].Device]
				if !ok {
					m = defaultLaunchLatency
				}
				l = min(l, m)
			}
			b.add(c, i, Launch, l)
			g.Stats.Launches++
		}
	}
	for i := range g.Nodes {
		if g.Nodes[i].Kind.OnGPU() && b.launchAt[i] == g.Nodes[i].Start {
			if _, ok := b.callCorr[g.Nodes[i].Corr]; !ok || g.Nodes[i].Corr == trace.NoID {
				g.Stats.Orphans++
			}
		}
	}
}

// lastLaunched returns the last operation of stream s issued at or before t
// that ended by limit, or -1.
func (b *builder) lastLaunched(s int32, t, limit time.Duration) int32 {
	ops := b.streamOps[s]
	k := sort.Search(len(ops), func(k int) bool { return b.launchAt[ops[k]] > t })
	for j, steps := k-1, 0; j >= 0 && steps < 256; j, steps = j-1, steps+1 {
		if b.g.Nodes[ops[j]].End() <= limit {
			return ops[j]
		}
	}
	return -1
}

func (b *builder) streamIndex(device, stream int64) int32 {
	for i, s := range b.g.Streams {
		if s.Stream == stream && (device < 0 || s.Device == device) {
			return int32(i)
		}
	}
	return -1
}

// waitEdges links each blocking call to the GPU work it waited for.
func (b *builder) waitEdges() {
	g := b.g
	for ci := range g.Nodes {
		c := &g.Nodes[ci]
		if c.Kind != Call {
			continue
		}
		var srcs []int32
		guessed := false
		limit := c.End() + syncTolerance
		if c.Wait == NoWait && isCopyCall(c.Name) {
			// A copy call that returned only after its copy ended waited
			// for it (pageable memory, or a synchronous API under another
			// name).
			for _, i := range b.launched[int32(ci)] {
				n := &g.Nodes[i]
				if n.End() <= c.End() && n.End() > c.Start {
					c.Wait = WaitCopy
				}
			}
		}
		var pollFrom time.Duration
		if c.Wait == NoWait && isQuery(c.Name) {
			// The last query of a run of queries ends a polling loop: it
			// returned once the polled work was done.
			prev, next := b.prevCall[ci], b.nextCall[ci]
			if prev >= 0 && isQuery(g.Nodes[prev].Name) && (next < 0 || !isQuery(g.Nodes[next].Name)) {
				c.Wait = WaitPoll
				pollFrom = g.Nodes[prev].Start
			}
		}
		switch c.Wait {
		case NoWait:
			continue
		case WaitPoll:
			if rec := b.syncRecord(c.Corr); rec != nil && rec.WaitStream != trace.NoID && rec.WaitEventCorr != trace.NoID {
				if r, ok := b.callCorr[rec.WaitEventCorr]; ok {
					if s := b.streamIndex(rec.Device, rec.WaitStream); s >= 0 {
						if i := b.lastLaunched(s, g.Nodes[r].Start, limit); i >= 0 {
							srcs = append(srcs, i)
						}
					}
				}
				break
			}
			// Which event was polled is not in the trace: take the work
			// that completed while the loop made its last round.
			guessed = true
			best := int32(-1)
			for s := range g.Streams {
				i := b.lastLaunched(int32(s), c.Start, limit)
				if i >= 0 && g.Nodes[i].End() > pollFrom && (best < 0 || g.Nodes[i].End() > g.Nodes[best].End()) {
					best = i
				}
			}
			if best >= 0 {
				srcs = append(srcs, best)
			}
		case WaitCopy:
			for _, i := range b.launched[int32(ci)] {
				if g.Nodes[i].End() <= limit {
					srcs = append(srcs, i)
				}
			}
		case WaitStream, WaitEvent, WaitDevice:
			rec := b.syncRecord(c.Corr)
			switch {
			case c.Wait == WaitStream && rec != nil && rec.Stream != trace.NoID:
				if s := b.streamIndex(rec.Device, rec.Stream); s >= 0 {
					if i := b.lastLaunched(s, c.Start, limit); i >= 0 {
						srcs = append(srcs, i)
					}
				}
			case c.Wait == WaitEvent && rec != nil && rec.WaitStream != trace.NoID && rec.WaitEventCorr != trace.NoID:
				if r, ok := b.callCorr[rec.WaitEventCorr]; ok {
					if s := b.streamIndex(rec.Device, rec.WaitStream); s >= 0 {
						if i := b.lastLaunched(s, g.Nodes[r].Start, limit); i >= 0 {
							srcs = append(srcs, i)
						}
					}
				}
			case c.Wait == WaitDevice:
				for s := range g.Streams {
					if i := b.lastLaunched(int32(s), c.Start, limit); i >= 0 {
						srcs = append(srcs, i)
					}
				}
			default:
				// The trace does not say what was waited for: take the
				// latest-ending work issued before the call that ended by
				// its return, the tightest fit to what was measured.
				guessed = true
				best := int32(-1)
				for s := range g.Streams {
					if i := b.lastLaunched(int32(s), c.Start, limit); i >= 0 && (best < 0 || g.Nodes[i].End() > g.Nodes[best].End()) {
						best = i
					}
				}
				if best >= 0 {
					srcs = append(srcs, best)
				}
			}
		}
		if len(srcs) == 0 {
			c.Wait = NoWait
			continue
		}
		latest := srcs[0]
		for _, i := range srcs[1:] {
			if g.Nodes[i].End() > g.Nodes[latest].End() {
				latest = i
			}
		}
		w := g.Nodes[latest].End()
		var r time.Duration
		if w > c.Start { // the call really waited: keep only its return overhead
			r = c.End() - w
			c.Work = max(0, r)
		}
		for _, i := range srcs {
			b.add(i, int32(ci), Wait, r)
		}
		g.Stats.Waits++
		if guessed {
			g.Stats.WaitGuesses++
		}
	}
}

func (b *builder) syncRecord(corr int64) *trace.Op {
	if corr == trace.NoID {
		return nil
	}
	for _, o := range b.syncs[corr] {
		if o.SyncKind != trace.SyncStreamWaitEvent {
			return o
		}
	}
	return nil
}

// eventEdges adds the cross-stream dependencies of cudaStreamWaitEvent from
// the trace's cuda_sync records (newer Kineto schema).
func (b *builder) eventEdges() {
	g := b.g
	corrs := make([]int64, 0, len(b.syncs))
	for corr := range b.syncs {
		corrs = append(corrs, corr)
	}
	slices.Sort(corrs)
	for _, corr := range corrs {
		for _, rec := range b.syncs[corr] {
			if rec.SyncKind != trace.SyncStreamWaitEvent || rec.Stream == trace.NoID || rec.WaitStream == trace.NoID || rec.WaitEventCorr == trace.NoID {
				continue
			}
			q, ok1 := b.callCorr[corr]
			r, ok2 := b.callCorr[rec.WaitEventCorr]
			if !ok1 || !ok2 {
				continue
			}
			src := b.streamIndex(rec.Device, rec.WaitStream)
			dst := b.streamIndex(rec.Device, rec.Stream)
			if src < 0 || dst < 0 || src == dst {
				continue
			}
			w := b.lastLaunched(src, g.Nodes[r].Start, 1<<62)
			ops := b.streamOps[dst]
			k := sort.Search(len(ops), func(k int) bool { return b.launchAt[ops[k]] >= g.Nodes[q].Start })
			if w < 0 || k >= len(ops) {
				continue
			}
			t := ops[k]
			b.add(w, t, Event, min(0, g.Nodes[t].Start-g.Nodes[w].End()))
			g.Stats.EventEdges++
		}
	}
}

// sortEdges orders edges by target, kind and source, so that graphs come
// out the same whatever the order of map iterations.
func (b *builder) sortEdges() {
	slices.SortStableFunc(b.edges, func(x, y Edge) int {
		if x.To != y.To {
			return int(x.To - y.To)
		}
		if x.Kind != y.Kind {
			return int(x.Kind) - int(y.Kind)
		}
		return int(x.From - y.From)
	})
}

// clampAndSlack makes the measured times a fixed point of the equations:
// no edge may ask for more than was measured, and what no edge explains
// becomes the node's slack.
func (b *builder) clampAndSlack() {
	g := b.g
	ready := make([]time.Duration, len(g.Nodes))
	has := make([]bool, len(g.Nodes))
	for k := range b.edges {
		e := &b.edges[k]
		from := &g.Nodes[e.From]
		to := &g.Nodes[e.To]
		at := from.End()
		if e.FromStart() {
			at = from.Start
		}
		if e.ToEnd() {
			e.Delay = min(e.Delay, to.End()-at)
			continue
		}
		e.Delay = min(e.Delay, to.Start-at)
		if t := at + e.Delay; !has[e.To] || t > ready[e.To] {
			ready[e.To], has[e.To] = t, true
		}
	}
	for i := range g.Nodes {
		if has[i] {
			g.Nodes[i].Slack = g.Nodes[i].Start - ready[i]
		}
	}
}

// point is the start (end=false) or end of a node, the unit of scheduling.
type point struct {
	at   time.Duration
	node int32
	end  bool
}

type pointHeap []point

func (h pointHeap) Len() int { return len(h) }
func (h pointHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	if h[i].node != h[j].node {
		return h[i].node < h[j].node
	}
	return !h[i].end && h[j].end
}
func (h pointHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pointHeap) Push(x any)   { *h = append(*h, x.(point)) }
func (h *pointHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// sortTopo orders starts and ends of nodes so that every dependency comes
// before what depends on it (earliest measured first among the ready ones),
// renumbers the nodes in the order of their starts, and groups edges by
// target. Dependencies that the trace's clocks made circular are dropped.
func (b *builder) sortTopo() {
	g := b.g
	n := len(g.Nodes)
	// pid: 2*node for a start, 2*node+1 for an end.
	pidOf := func(node int32, end bool) int32 {
		if end {
			return 2*node + 1
		}
		return 2 * node
	}
	indeg := make([]int32, 2*n)
	out := make([][]int32, 2*n) // point -> edge indices leaving it
	for k, e := range b.edges {
		src := pidOf(e.From, !e.FromStart())
		dst := pidOf(e.To, e.ToEnd())
		out[src] = append(out[src], int32(k))
		indeg[dst]++
	}
	for i := 0; i < n; i++ {
		indeg[2*i+1]++ // a node's end follows its start
	}
	dropped := make([]bool, len(b.edges))
	at := func(p int32) time.Duration {
		nd := &g.Nodes[p/2]
		if p%2 == 1 {
			return nd.End()
		}
		return nd.Start
	}
	h := &pointHeap{}
	for p := int32(0); p < int32(2*n); p++ {
		if indeg[p] == 0 {
			heap.Push(h, point{at(p), p / 2, p%2 == 1})
		}
	}
	order := make([]int32, 0, 2*n)
	done := make([]bool, 2*n)
	release := func(p int32) {
		done[p] = true
		order = append(order, p)
		if p%2 == 0 {
			if indeg[p+1]--; indeg[p+1] == 0 {
				heap.Push(h, point{at(p + 1), p / 2, true})
			}
		}
		for _, k := range out[p] {
			if dropped[k] {
				continue
			}
			e := b.edges[k]
			dst := pidOf(e.To, e.ToEnd())
			if indeg[dst]--; indeg[dst] == 0 {
				heap.Push(h, point{at(dst), e.To, e.ToEnd()})
			}
		}
	}
	for len(order) < 2*n {
		if h.Len() == 0 {
			// A cycle: free the earliest pending point by dropping the
			// edges into it that are still unsatisfied.
			best := int32(-1)
			for p := int32(0); p < int32(2*n); p++ {
				if !done[p] && (p%2 == 0 || done[p-1]) && (best < 0 || at(p) < at(best)) {
					best = p
				}
			}
			for k, e := range b.edges {
				src := pidOf(e.From, !e.FromStart())
				if !dropped[k] && pidOf(e.To, e.ToEnd()) == best && !done[src] {
					dropped[k] = true
					g.DroppedEdges++
					indeg[best]--
				}
			}
			if indeg[best] != 0 { // only the start->end link remains: impossible
				indeg[best] = 0
			}
			heap.Push(h, point{at(best), best / 2, best%2 == 1})
			continue
		}
		pt := heap.Pop(h).(point)
		p := pidOf(pt.node, pt.end)
		if done[p] {
			continue
		}
		release(p)
	}
	// Renumber nodes by the position of their start.
	newID := make([]int32, n)
	next := int32(0)
	for _, p := range order {
		if p%2 == 0 {
			newID[p/2] = next
			next++
		}
	}
	nodes := make([]Node, n)
	for i := range g.Nodes {
		nodes[newID[i]] = g.Nodes[i]
	}
	g.Nodes = nodes
	edges := make([]Edge, 0, len(b.edges))
	for k, e := range b.edges {
		if dropped[k] {
			continue
		}
		e.From, e.To = newID[e.From], newID[e.To]
		edges = append(edges, e)
	}
	slices.SortStableFunc(edges, func(x, y Edge) int { return int(x.To - y.To) })
	g.Edges = edges
	lo := 0
	for i := range g.Nodes {
		hi := lo
		for hi < len(edges) && edges[hi].To == int32(i) {
			hi++
		}
		g.Nodes[i].edgeLo, g.Nodes[i].edgeHi = int32(lo), int32(hi)
		lo = hi
	}
	g.schedule = make([]Point, len(order))
	for k, p := range order {
		g.schedule[k] = Point{Node: newID[p/2], End: p%2 == 1}
	}
}

// calibrate replays the graph natively and moves what it does not yet
// reproduce into Slack (a start too early) or Work (an end too early), so
// that the measured times are exactly a fixed point. Clamping makes this a
// no-op except where circular dependencies had to be dropped.
func (b *builder) calibrate() {
	g := b.g
	start := make([]time.Duration, len(g.Nodes))
	end := make([]time.Duration, len(g.Nodes))
	for _, p := range g.schedule {
		i := p.Node
		n := &g.Nodes[i]
		edges := g.Edges[n.edgeLo:n.edgeHi]
		if !p.End {
			ready, has := n.Start, false
			for _, e := range edges {
				if e.ToEnd() {
					continue
				}
				at := end[e.From]
				if e.FromStart() {
					at = start[e.From]
				}
				if at += e.Delay; !has || at > ready {
					ready, has = at, true
				}
			}
			if has && ready+n.Slack < n.Start {
				n.Slack = n.Start - ready
			}
			start[i] = n.Start
			continue
		}
		e := n.Start + n.Work
		for _, ed := range edges {
			if ed.ToEnd() {
				e = max(e, end[ed.From]+ed.Delay)
			}
		}
		if e < n.End() {
			n.Work += n.End() - e
		}
		end[i] = n.End()
	}
}

// assignSteps places calls in the ProfilerStep whose window holds their
// start, and GPU operations in their launching call's step.
func (b *builder) assignSteps() {
	g := b.g
	for _, s := range b.w.Steps {
		g.Steps = append(g.Steps, Step{Num: s.Num, Name: s.Name, Start: time.Duration(s.Start - g.Origin), Dur: time.Duration(s.Dur)})
	}
	slices.SortStableFunc(g.Steps, func(x, y Step) int { return cmpDur(x.Start, y.Start) })
	if len(g.Steps) == 0 {
		return
	}
	stepAt := func(t time.Duration) int32 {
		k := sort.Search(len(g.Steps), func(k int) bool { return g.Steps[k].Start > t }) - 1
		if k >= 0 && t < g.Steps[k].Start+g.Steps[k].Dur {
			return int32(k)
		}
		return -1
	}
	corrStep := map[int64]int32{}
	for i := range g.Nodes {
		if n := &g.Nodes[i]; n.Kind == Call {
			n.Step = stepAt(n.Start)
			if n.Corr != trace.NoID {
				corrStep[n.Corr] = n.Step
			}
		}
	}
	for i := range g.Nodes {
		if n := &g.Nodes[i]; n.Kind.OnGPU() {
			if s, ok := corrStep[n.Corr]; ok && n.Corr != trace.NoID {
				n.Step = s
			} else {
				n.Step = stepAt(n.Start)
			}
		}
	}
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LoadGraph decodes a trace file (Kineto JSON, plain or gzip, or an Nsight
// Systems SQLite export) and builds its graph.
func LoadGraph(path string) (*Graph, error) {
	w, err := trace.DecodeFile(path)
	if err != nil {
		return nil, err
	}
	g, err := Build(w)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}
