package switchbench

import (
	"fmt"
	"runtime"
	"time"

	switching "github.com/dxpu/dxpu/fabric/switching"
)

// goForward measures Forward on the fixture's frame: nanoseconds and heap
// allocations per frame, over batches that grow until one lasts minTime.
// The frame must be forwarded to the GPU's port, or the figure would be
// of a drop.
func goForward(minTime time.Duration) (nsPerFrame float64, allocsPerFrame int64, err error) {
	f, frame, err := newForwarder()
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, switching.Headroom+len(frame))
	once := func() switching.Result {
		copy(buf[switching.Headroom:], frame)
		return f.Forward(buf, switching.Headroom, hostIndex)
	}
	if r := once(); r.Verdict != switching.VerdictForward || r.Egress != gpuIndex {
		return 0, 0, fmt.Errorf("bench switch: the fixture frame was not forwarded to port %d: %v/%v to %d", gpuIndex, r.Verdict, r.Reason, r.Egress)
	}
	var before, after runtime.MemStats
	for n := 1000; ; n *= 4 {
		runtime.ReadMemStats(&before)
		start := time.Now()
		for range n {
			once()
		}
		elapsed := time.Since(start)
		runtime.ReadMemStats(&after)
		if elapsed >= minTime || n >= 1<<30 {
			return float64(elapsed.Nanoseconds()) / float64(n), int64(after.Mallocs-before.Mallocs) / int64(n), nil
		}
	}
}
