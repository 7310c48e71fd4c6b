package switchbench

import (
	"fmt"
	"math"
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
	for n := 1000; ; n *= 4 {
		start := time.Now()
		for range n {
			once()
		}
		if elapsed := time.Since(start); elapsed >= minTime || n >= 1<<30 {
			return float64(elapsed.Nanoseconds()) / float64(n), allocsPerCall(once), nil
		}
	}
}

// allocsPerCall counts the heap allocations of one call of f, as
// testing.AllocsPerRun does: on one processor, and the fewest of a few
// runs. The count is the process's, and anything else allocating
// meanwhile (tests in parallel, a progress bar) added to it: 1 allocation
// a frame from 500 frames on a loaded machine.
func allocsPerCall(f func() switching.Result) int64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const runs, calls = 3, 10000
	f() // warm
	var before, after runtime.MemStats
	fewest := uint64(math.MaxUint64)
	for range runs {
		runtime.ReadMemStats(&before)
		for range calls {
			f()
		}
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	return int64(fewest / calls)
}
