package trace

import (
	"os"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

func TestSharedTraces(t *testing.T) {
	t.Parallel()
	for _, p := range privtest.Traces(t) {
		t.Run(TraceName(p), func(t *testing.T) {
			w, err := DecodeFile(p)
			if err != nil {
				t.Fatal(err)
			}
			first, last, ok := w.Span()
			if !ok {
				t.Fatal("no runtime or GPU ops")
			}
			gpu := w.Count(Kernel) + w.Count(Memcpy) + w.Count(Memset)
			t.Logf("events=%d bytes=%d runtime=%d kernel=%d memcpy=%d memset=%d sync=%d steps=%d span=%.3fms",
				w.Events, w.Bytes, w.Count(Runtime), w.Count(Kernel), w.Count(Memcpy), w.Count(Memset), w.Count(Sync), len(w.Steps), float64(last-first)/1e6)
			if gpu == 0 || w.Count(Runtime) == 0 {
				t.Fatalf("want runtime and GPU ops, got %d and %d", w.Count(Runtime), gpu)
			}
			// GPU ops carry a correlation ID that names a runtime call
			// (recsys-ddp has ops launched before profiling started).
			calls := map[int64]bool{}
			for _, o := range w.Ops {
				if o.Kind == Runtime {
					calls[o.Corr] = true
				}
			}
			orphans := 0
			for _, o := range w.Ops {
				if o.Kind.IsGPU() && !calls[o.Corr] {
					orphans++
				}
				if o.Kind.IsGPU() && o.Stream < 0 {
					t.Errorf("%s %q has no stream", o.Kind, o.Name)
					break
				}
			}
			if orphans*5 > gpu {
				t.Errorf("%d of %d GPU ops have no runtime call", orphans, gpu)
			}
			if st, err := os.Stat(p); err == nil && w.Bytes <= st.Size() {
				t.Errorf("decompressed %d bytes from a %d-byte gzip file", w.Bytes, st.Size())
			}
		})
	}
}
