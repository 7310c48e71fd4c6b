package trace

import "strings"

// Kind says what a trace operation is.
type Kind uint8

const (
	// Runtime is a CUDA runtime or driver API call on a CPU thread
	// (categories cuda_runtime, cuda_driver; Runtime and Driver in old traces).
	Runtime Kind = iota + 1
	// Kernel is a kernel execution on a GPU stream.
	Kernel
	// Memcpy is a copy executed by the GPU (category gpu_memcpy, old Memcpy).
	Memcpy
	// Memset is a memset executed by the GPU (gpu_memset, old Memset).
	Memset
	// Sync is the GPU-side record of a synchronization (category cuda_sync):
	// which stream, event or context a runtime call waited for.
	Sync
)

func (k Kind) String() string {
	switch k {
	case Runtime:
		return "runtime"
	case Kernel:
		return "kernel"
	case Memcpy:
		return "memcpy"
	case Memset:
		return "memset"
	case Sync:
		return "sync"
	}
	return "unknown"
}

// IsGPU reports whether the operation executes on a GPU stream.
func (k Kind) IsGPU() bool { return k == Kernel || k == Memcpy || k == Memset }

// CopyKind is the direction of a memcpy.
type CopyKind uint8

const (
	CopyUnknown CopyKind = iota
	HtoD                 // host to device: the GPU reads host memory
	DtoH                 // device to host: the GPU writes host memory
	DtoD                 // within one device
	PtoP                 // device to another device
	HtoH                 // host to host (pinned staging)
)

func (c CopyKind) String() string {
	switch c {
	case HtoD:
		return "HtoD"
	case DtoH:
		return "DtoH"
	case DtoD:
		return "DtoD"
	case PtoP:
		return "PtoP"
	case HtoH:
		return "HtoH"
	}
	return "unknown"
}

// ParseCopy reads direction and host-memory kind from a memcpy event name
// such as "Memcpy HtoD (Pageable -> Device)" or "Memcpy DtoH (Device -> Pinned)".
func ParseCopy(name string) (dir CopyKind, pageable bool) {
	switch {
	case strings.Contains(name, "HtoD"):
		dir = HtoD
	case strings.Contains(name, "DtoH"):
		dir = DtoH
	case strings.Contains(name, "DtoD"):
		dir = DtoD
	case strings.Contains(name, "PtoP"):
		dir = PtoP
	case strings.Contains(name, "HtoH"):
		dir = HtoH
	}
	return dir, strings.Contains(name, "Pageable")
}

// SyncKind is the kind of a cuda_sync record (args.cuda_sync_kind).
type SyncKind uint8

const (
	SyncUnknown         SyncKind = iota
	SyncStream                   // "Stream Sync": cudaStreamSynchronize
	SyncContext                  // "Context Sync": cudaDeviceSynchronize
	SyncEvent                    // "Event Sync": cudaEventSynchronize (or a query)
	SyncStreamWaitEvent          // "Stream Wait Event": cudaStreamWaitEvent, GPU side
)

func (k SyncKind) String() string {
	switch k {
	case SyncStream:
		return "stream"
	case SyncContext:
		return "context"
	case SyncEvent:
		return "event"
	case SyncStreamWaitEvent:
		return "stream-wait-event"
	}
	return "unknown"
}

func parseSyncKind(b []byte) SyncKind {
	switch string(b) {
	case "Stream Sync":
		return SyncStream
	case "Context Sync":
		return SyncContext
	case "Event Sync":
		return SyncEvent
	case "Stream Wait Event":
		return SyncStreamWaitEvent
	}
	return SyncUnknown
}

// NoID marks an absent correlation, stream or event identifier.
const NoID int64 = -1

// Op is one operation of the trace, normalized: times in nanoseconds as in
// the trace's clock (ts and dur are microseconds in the file), identifiers
// as integers. Fields that do not apply to a kind are zero or NoID.
type Op struct {
	Name string // interned; shared between ops of the same name
	// Start and Dur in nanoseconds (trace clock).
	Start, Dur int64
	// PID and TID identify the CPU thread of a Runtime op; for GPU ops they
	// are the trace's process and thread fields (device and stream).
	PID, TID int64
	// Device and Stream place GPU ops and Sync records.
	Device int64
	Stream int64
	// Corr is the CUPTI correlation ID linking a runtime call to the GPU
	// work it launched (or to its Sync record); NoID when absent.
	Corr int64
	// Bytes moved by a memcpy or set by a memset.
	Bytes int64
	// WaitStream and WaitEventCorr describe a Sync record: WaitEventCorr is
	// the correlation ID of the cudaEventRecord call whose event was waited
	// for, WaitStream the stream it was recorded on.
	WaitStream    int64
	WaitEventCorr int64
	Kind          Kind
	// Copy and Pageable describe a memcpy.
	Copy     CopyKind
	Pageable bool
	SyncKind SyncKind
}

// End is Start+Dur.
func (o *Op) End() int64 { return o.Start + o.Dur }

// Step is a ProfilerStep#N annotation: one training or inference iteration.
type Step struct {
	Num        int64
	Name       string
	Start, Dur int64 // nanoseconds
	PID, TID   int64
}

// Workload is a trace reduced to what the performance model needs: runtime
// calls, GPU operations, synchronization records and steps, in file order.
// It holds no raw JSON.
type Workload struct {
	Name          string // trace name (file base name or traceName)
	SchemaVersion int64
	Ops           []Op
	Steps         []Step
	// Events counts every trace event read, kept or not; Bytes the JSON
	// bytes read (after decompression).
	Events int64
	Bytes  int64
	// FlowsLinked counts correlations recovered from ac2g or
	// async_cpu_to_gpu flow events for ops whose args lacked one.
	FlowsLinked int
}

// Span returns the first start and last end over runtime calls and GPU
// operations: the trace's measured span.
func (w *Workload) Span() (first, last int64, ok bool) {
	for i := range w.Ops {
		o := &w.Ops[i]
		if o.Kind == Sync {
			continue
		}
		if !ok || o.Start < first {
			first = o.Start
		}
		if !ok || o.End() > last {
			last = o.End()
		}
		ok = true
	}
	return first, last, ok
}

// Count returns how many ops of kind k the workload holds.
func (w *Workload) Count(k Kind) int {
	n := 0
	for i := range w.Ops {
		if w.Ops[i].Kind == k {
			n++
		}
	}
	return n
}
