// Package model predicts what a GPU disaggregation fabric costs an AI
// workload, from the workload's PyTorch profiler trace.
//
// Build turns a trace (package model/trace) into a dependency Graph;
// Graph.Retime recomputes every operation's start and end behind a Fabric
// (added round trip, link rate, outstanding read tags, MRRS); Predict,
// Budget and Sweep report the overhead, its causes, the largest RTT that
// keeps it under a target, and its course over a range of RTTs; WritePlot
// draws it. A Measurer (the emulator) can replay the same Graph over an
// emulated fabric, and Validate sets its measurement beside the prediction.
//
// # The graph
//
// Nodes are the operations of the trace: runtime or driver calls (Call) on
// CPU threads, and kernels, copies and memsets on GPU streams. Each has its
// measured Start and Dur. Edges say what waits for what:
//
//	Program  call i+1 of a thread starts Delay after call i ends (the CPU
//	         work in between; negative when calls nest)
//	Launch   a GPU operation starts Delay after the start of the call that
//	         launched it (same CUPTI correlation ID)
//	Stream   a GPU operation starts after the previous one on its stream ends
//	Wait     a blocking call (stream, device or event synchronize, a
//	         synchronous or pageable copy) returns no earlier than Delay
//	         after the last GPU operation it waits for ends
//	Event    the first operation a stream issues after cudaStreamWaitEvent
//	         starts after the operation the event recorded ends
//
// The waited-for operations come from the trace's cuda_sync records when it
// has them (stream, event and its recording call); otherwise a blocking call
// waits for the latest-ending operation issued before it that ended by its
// return. Launch delays: when the stream was idle at the call, the measured
// call-to-start latency; when work was queued, at most the device's median
// idle latency, so a later call would not have delayed the operation.
//
// Each node also has a Work (its duration, or for a call that waited, only
// the share after the GPU finished) and a Slack (measured delay after the
// node was ready that no edge explains, such as GPU front-end gaps). Delays
// are clamped so that no edge asks for more than was measured. The measured
// times are then a fixed point: re-timed with Native, every node lands on
// its measured start and end, and the span is reproduced exactly.
//
// # The equations
//
// With R the added round trip and O = R/2 the added one-way latency, a
// node's re-timed start and end are
//
//	start(n) = max over start edges e (at(e.From) + e.Delay + cost(e)) + n.Slack
//	           (its measured start when no edge leads to it)
//	end(n)   = max(start(n) + work(n), max over Wait edges e (end(e.From) + e.Delay + O))
//
// where at(From) is From's start for Launch edges and its end otherwise, and
//
//	cost(Launch) = O + R      the doorbell (a posted MMIO write, one way) and
//	                          the GPU's fetch of the command from host memory
//	                          (a DMA read, one round trip)
//	cost(Wait)   = O          the completion notification: the GPU's
//	                          semaphore release is a posted write to host memory
//	cost(others) = 0
//
//	work(kernel, memset, D2D copy) = Dur
//	work(H2D copy) = max(Dur, bytes / min(link, tags x MRRS / R)) + R
//	work(D2H copy) = max(Dur, bytes / link) + O
//	work(call)     = Work + reads x R   (reads: MMIO reads of GPU registers,
//	                                     see MMIOReads; allocation and stream
//	                                     management calls make one)
//
// A launch therefore costs extra only when its stream is idle, since
// otherwise the Stream edge binds; a synchronization pays the notification
// only when the CPU is actually waiting; H2D copies stream at the rate the
// read window allows (tags x MRRS bytes in flight per round trip) or the
// link, whichever is lower, after a first round trip; D2H copies are posted
// writes, bounded by the link, plus one way for the last write to land.
// A zero link means no limit beyond the measured native one.
//
// Every cost grows with R and max and + are monotone, so the overhead never
// decreases as R grows: Budget finds the largest R under a target by
// bisection.
//
// # Overhead and its causes
//
// The baseline is the measured span (first start to last end over calls and
// GPU operations); the prediction is the re-timed span; the overhead is
// predicted/baseline - 1. Its breakdown walks back from the node that ends
// last along the edges that set each time, adding the fabric's cost on each
// (launch, sync, h2d, d2h, mmio), and scales these so they sum to the
// overhead (parallel work can hide part of what lies on the path). Per-step
// figures use the ProfilerStep marks: a step runs from its first call to
// the next step's first call. A step boundary counts only the delay that
// every later boundary still has: a delay that a later synchronization or
// the GPU's queue absorbs was slack, and counting it would make the step
// that absorbs it look faster than measured.
//
// # Replaying the graph
//
// An emulator replays a Graph by walking Schedule(): each point is a node's
// start or end, in an order where everything a point depends on comes
// first. At a start, the node may begin once its start edges allow (after
// its Launch call's doorbell, its stream predecessor, its event) plus
// Slack; a call then runs Work on its CPU thread (plus its MMIO reads), a
// kernel or memset occupies its stream for Work, a copy moves Bytes in
// direction Copy; a blocking call (Wait != NoWait) returns once its Wait
// edges' sources have completed and notified the host, plus Delay.
package model
