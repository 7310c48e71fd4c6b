package trace

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/dxpu/dxpu/internal/privtest"
)

// writeSynthetic writes a Kineto-like trace of about n events in groups of
// five: an operator with the argument lists real traces carry, its
// cudaLaunchKernel, the ac2g flow start, the kernel, the flow finish. Every
// 50th group is a copy with a stream synchronization instead of a kernel.
func writeSynthetic(w io.Writer, n int) error { return writeTrace(w, n, false) }

// writeTrace writes n events as writeSynthetic does, or, with cpuOnly, only
// operator events that the decoder reads and drops.
func writeTrace(w io.Writer, n int, cpuOnly bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprint(bw, `{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "synthetic"}], "traceEvents": [`+"\n")
	ts := int64(1_700_000_000_000_000)
	corr := int64(1)
	for i := 0; i < n; i += 5 {
		if i > 0 {
			bw.WriteString(",\n")
		}
		g := i / 5
		fmt.Fprintf(bw, `{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 100, "tid": 100, "ts": %d.250, "dur": 12.5, "args": {"External id": %d, "Sequence number": %d, "Input Dims": [[64, 1024], [1024, 1024], [1024]], "Input type": ["float", "float", "float"]}}`, ts, corr, g)
		if cpuOnly {
			ts += 20
			i -= 4
			continue
		}
		bw.WriteString(",\n")
		if g%50 == 49 {
			fmt.Fprintf(bw, `{"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 100, "tid": 100, "ts": %d.500, "dur": 6, "args": {"External id": %d, "cbid": 41, "correlation": %d}},`+"\n", ts+1, corr, corr)
			fmt.Fprintf(bw, `{"ph": "s", "id": %d, "pid": 100, "tid": 100, "ts": %d.500, "cat": "ac2g", "name": "ac2g"},`+"\n", corr, ts+1)
			fmt.Fprintf(bw, `{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7, "ts": %d, "dur": 20, "args": {"External id": %d, "device": 0, "context": 1, "stream": 7, "correlation": %d, "bytes": 262144, "memory bandwidth (GB/s)": 13.1}},`+"\n", ts+8, corr, corr)
			fmt.Fprintf(bw, `{"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 100, "tid": 100, "ts": %d, "dur": 25, "args": {"External id": %d, "cbid": 131, "correlation": %d}}`, ts+9, corr+1, corr+1)
			corr += 2
		} else {
			fmt.Fprintf(bw, `{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100, "ts": %d.500, "dur": 4.75, "args": {"External id": %d, "cbid": 211, "correlation": %d}},`+"\n", ts+1, corr, corr)
			fmt.Fprintf(bw, `{"ph": "s", "id": %d, "pid": 100, "tid": 100, "ts": %d.500, "cat": "ac2g", "name": "ac2g"},`+"\n", corr, ts+1)
			fmt.Fprintf(bw, `{"ph": "X", "cat": "kernel", "name": "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)", "pid": 0, "tid": 7, "ts": %d, "dur": 9, "args": {"External id": %d, "queued": 0, "device": 0, "context": 1, "stream": 7, "correlation": %d, "registers per thread": 168, "shared memory": 49152, "blocks per SM": 0.59, "warps per SM": 2.37, "grid": [8, 8, 1], "block": [128, 1, 1], "est. achieved occupancy %%": 4}},`+"\n", ts+8, corr, corr)
			fmt.Fprintf(bw, `{"ph": "f", "id": %d, "pid": 0, "tid": 7, "ts": %d, "cat": "ac2g", "name": "ac2g", "bp": "e"}`, corr, ts+8)
			corr++
		}
		ts += 20
	}
	fmt.Fprint(bw, "\n], \"traceName\": \"synthetic\"}\n")
	return bw.Flush()
}

// countingWriter counts bytes passing through.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// decodeMeasured decodes n generated events streamed through a pipe and
// returns the workload, the live-heap growth it left, and the peak heap
// growth seen while decoding.
func decodeMeasured(t *testing.T, n int, cpuOnly bool) (w *Workload, live, peak int64) {
	t.Helper()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTrace(pw, n, cpuOnly)) }()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	peakc := make(chan uint64)
	go func() {
		var m runtime.MemStats
		var hi uint64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				peakc <- hi
				return
			case <-tick.C:
				runtime.ReadMemStats(&m)
				hi = max(hi, m.HeapAlloc)
			}
		}
	}()
	w, err := Decode(pr)
	close(stop)
	hi := <-peakc
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return w, int64(after.HeapAlloc) - int64(before.HeapAlloc), int64(hi) - int64(before.HeapAlloc)
}

// TestBoundedMemory streams generated traces of over 100 MB through a pipe:
// one of operator events only, which must leave the heap as it was (the
// per-event state is bounded), and one where two in five events are kept,
// whose heap must grow with the operations kept, not the bytes read.
func TestBoundedMemory(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	privtest.Short(t, "streams 2 x 100 MB")
	const opSize = 128 // bytes of one Op, rounded up
	w, live, peak := decodeMeasured(t, 500_000, true)
	t.Logf("operators only: read %d MB, %d events, kept %d ops; heap +%.2f MB after, peak +%.1f MB (includes the generator's garbage)",
		w.Bytes>>20, w.Events, len(w.Ops), float64(live)/(1<<20), float64(peak)/(1<<20))
	if w.Bytes < 100<<20 || len(w.Ops) != 0 {
		t.Fatalf("generated %d bytes, kept %d ops", w.Bytes, len(w.Ops))
	}
	if live > 1<<20 {
		t.Errorf("heap grew %d bytes over %d bytes of dropped events", live, w.Bytes)
	}
	w, live, peak = decodeMeasured(t, 440_000, false)
	kept := int64(len(w.Ops))
	t.Logf("mixed: read %d MB, %d events, kept %d ops; heap +%.1f MB after (%.0f B per op), peak +%.1f MB",
		w.Bytes>>20, w.Events, kept, float64(live)/(1<<20), float64(live)/float64(kept), float64(peak)/(1<<20))
	if w.Bytes < 100<<20 {
		t.Fatalf("generated only %d bytes", w.Bytes)
	}
	if limit := 2*kept*opSize + 4<<20; live > limit {
		t.Errorf("live heap grew %d bytes for %d ops, more than %d", live, kept, limit)
	}
}

func TestSyntheticDecodes(t *testing.T) {
	t.Parallel()
	var cw countingWriter
	if err := writeSynthetic(&cw, 1000); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeSynthetic(pw, 1000)) }()
	w, err := Decode(pr)
	if err != nil {
		t.Fatal(err)
	}
	if w.Events != 1000 || w.Bytes != cw.n {
		t.Fatalf("events %d bytes %d, want 1000 and %d", w.Events, w.Bytes, cw.n)
	}
	if got := w.Count(Kernel) + w.Count(Memcpy); got != 200 {
		t.Fatalf("%d GPU ops, want 200", got)
	}
}
