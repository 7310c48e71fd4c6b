package model

import (
	"time"

	"github.com/dxpu/dxpu/model/trace"
)

// CopyDir is the direction of a copy.
type CopyDir = trace.CopyKind

// Copy directions.
const (
	H2D = trace.HtoD
	D2H = trace.DtoH
	D2D = trace.DtoD
	P2P = trace.PtoP
)

// NodeKind says what a node of the graph is.
type NodeKind uint8

const (
	// Call is a CUDA runtime or driver call on a CPU thread.
	Call NodeKind = iota + 1
	// Kernel runs on a GPU stream for a fixed time.
	Kernel
	// Memcpy moves Bytes in direction Copy on a GPU stream.
	Memcpy
	// Memset sets Bytes of device memory on a GPU stream.
	Memset
)

func (k NodeKind) String() string {
	switch k {
	case Call:
		return "call"
	case Kernel:
		return "kernel"
	case Memcpy:
		return "memcpy"
	case Memset:
		return "memset"
	}
	return "unknown"
}

// OnGPU reports whether nodes of this kind run on a GPU stream.
func (k NodeKind) OnGPU() bool { return k == Kernel || k == Memcpy || k == Memset }

// WaitKind says what a blocking call waits for.
type WaitKind uint8

const (
	NoWait     WaitKind = iota
	WaitStream          // cudaStreamSynchronize
	WaitDevice          // cudaDeviceSynchronize, cuCtxSynchronize
	WaitEvent           // cudaEventSynchronize
	WaitCopy            // a synchronous copy or memset (cudaMemcpy, pageable cudaMemcpyAsync)
	WaitPoll            // the last cudaEventQuery or cudaStreamQuery of a polling loop
)

func (k WaitKind) String() string {
	switch k {
	case WaitStream:
		return "stream"
	case WaitDevice:
		return "device"
	case WaitEvent:
		return "event"
	case WaitCopy:
		return "copy"
	case WaitPoll:
		return "poll"
	}
	return "none"
}

// EdgeKind says why one node waits for another.
type EdgeKind uint8

const (
	// Program orders the calls of one CPU thread: To starts Delay after
	// From ends (the CPU work between the two calls).
	Program EdgeKind = iota + 1
	// Launch links a call to the GPU operation it launched: the operation
	// can start Delay after the call starts. The fabric adds LaunchCost.
	Launch
	// Stream orders the operations of one GPU stream.
	Stream
	// Wait links the last GPU operation a blocking call waits for to the
	// call's return: the call ends no earlier than Delay after From ends.
	// The fabric adds SyncCost.
	Wait
	// Event links the operation recorded by a CUDA event to the first
	// operation of another stream that waits for it (cudaStreamWaitEvent).
	Event
)

func (k EdgeKind) String() string {
	switch k {
	case Program:
		return "program"
	case Launch:
		return "launch"
	case Stream:
		return "stream"
	case Wait:
		return "wait"
	case Event:
		return "event"
	}
	return "unknown"
}

// Edge is a dependency: a point of To (its start, or its end for Wait) is
// no earlier than a point of From (its start for Launch, its end otherwise)
// plus Delay plus what the fabric adds for the edge's kind. Delay may be
// negative where the trace's clocks overlap two operations slightly.
type Edge struct {
	From, To int32
	Kind     EdgeKind
	Delay    time.Duration
}

// FromStart reports whether the edge leaves from the start of From.
func (e Edge) FromStart() bool { return e.Kind == Launch }

// ToEnd reports whether the edge constrains the end of To.
func (e Edge) ToEnd() bool { return e.Kind == Wait }

// Node is one operation of the workload. Times are measured ones, relative
// to Graph.Origin.
type Node struct {
	Kind NodeKind
	Name string
	// Start and Dur as measured.
	Start, Dur time.Duration
	// Work is the time the node takes once started, without the fabric: Dur,
	// except for a blocking call that waited, whose own share (the return
	// after the GPU finished) is kept and whose wait comes from its Wait edge.
	Work time.Duration
	// Slack is measured delay after the node was ready that no dependency
	// explains (GPU front-end gaps); replay adds it to the ready time.
	Slack time.Duration
	// Thread indexes Graph.Threads for calls; Stream indexes Graph.Streams
	// for GPU operations; -1 otherwise.
	Thread, Stream int32
	// Corr is the CUPTI correlation ID shared by a call and what it launched.
	Corr int64
	// Bytes, Copy and Pageable describe copies and memsets.
	Bytes    int64
	Copy     CopyDir
	Pageable bool
	// Wait says what a blocking call waits for; MMIOReads how many MMIO
	// reads of GPU registers the call makes (see MMIOReads).
	Wait      WaitKind
	MMIOReads int32
	// Step is the index into Graph.Steps of the step the node belongs to, -1
	// when the trace marks no step around it.
	Step int32

	edgeLo, edgeHi int32
}

// End is Start+Dur.
func (n *Node) End() time.Duration { return n.Start + n.Dur }

// Thread is a CPU thread of the traced process.
type Thread struct {
	PID, TID int64
}

// StreamInfo is a GPU stream.
type StreamInfo struct {
	Device, Stream int64
}

// Step is a ProfilerStep of the trace, relative to Graph.Origin.
type Step struct {
	Num        int64
	Name       string
	Start, Dur time.Duration
}

// Graph is a trace's dependency graph, ready to be re-timed under a fabric
// or replayed op by op by an emulator.
//
// Nodes are in a topological order: every edge goes from a lower to a
// higher index, so a replay can walk Nodes once, front to back. Edges are
// grouped by their To node; InEdges returns a node's group.
type Graph struct {
	Name    string
	Origin  int64 // trace clock of time 0, in nanoseconds
	Nodes   []Node
	Edges   []Edge
	Threads []Thread
	Streams []StreamInfo
	Steps   []Step
	// Baseline is the measured span: first start to last end over all nodes.
	Baseline time.Duration
	// DroppedEdges counts dependencies left out because the trace's clocks
	// made them circular.
	DroppedEdges int
	// Stats of the build, for reports.
	Stats BuildStats

	schedule []Point
	workload *trace.Workload // kept by tests only
}

// BuildStats counts what the builder linked and what it had to guess.
type BuildStats struct {
	Launches    int // GPU operations linked to the call that launched them
	Orphans     int // GPU operations with no launching call in the trace
	Waits       int // blocking calls linked to the GPU work they waited for
	WaitGuesses int // of which the waited stream had to be inferred from times
	EventEdges  int // cross-stream event dependencies
}

// OutEdges returns, for each node, the indices into Edges of the edges that
// leave it: what an event-driven replay wakes when a node starts or ends.
func (g *Graph) OutEdges() [][]int32 {
	out := make([][]int32, len(g.Nodes))
	for k, e := range g.Edges {
		out[e.From] = append(out[e.From], int32(k))
	}
	return out
}

// InEdges returns the edges into node i.
func (g *Graph) InEdges(i int) []Edge {
	n := &g.Nodes[i]
	return g.Edges[n.edgeLo:n.edgeHi]
}

// Point is the start or the end of a node: the unit of replay.
type Point struct {
	Node int32
	End  bool
}

// Schedule returns every node's start and end in an order that respects all
// edges (the order of the measured times where they leave a choice). A
// replay that computes each point when it reaches it finds all it depends on
// already computed.
func (g *Graph) Schedule() []Point { return g.schedule }
