package e2ebench

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/gpudrv"
)

// mmioReads times n reads of a BAR0 register, each a full round trip.
func (wd *world) mmioReads(n int) ([]time.Duration, error) {
	mm, _, err := wd.mmioReadsBeside(nil, n)
	return mm, err
}

// warmUp is how many untimed turns of reads (and echoes) come before a
// timed series.
const warmUp = 200

// mmioReadsBeside times n reads of a BAR0 register, each a full round
// trip, and, when et is set, n echoes of its path, taken in turns: an echo,
// then a read. Both series then see the same machine: on a shared one the
// tail of any round trip moves with what else runs, from one second to
// the next, and a baseline timed before the reads would hold their tail
// against another moment's.
func (wd *world) mmioReadsBeside(et *echoTimer, n int) (mmio, echo []time.Duration, err error) {
	mmio = make([]time.Duration, 0, n)
	if et != nil {
		echo = make([]time.Duration, 0, n)
	}
	freshHeap()
	// Untimed turns first: the first few hundred round trips after a
	// collection, on sockets just opened, run slower on both paths alike.
	// The turns allocate nothing, so no collection falls due in the series.
	for i := 0; i < warmUp; i++ {
		if et != nil {
			if _, err := et.once(); err != nil {
				return nil, nil, err
			}
		}
		if _, err := wd.c.ReadRegister(wd.d, gpu.RegScratch); err != nil {
			return nil, nil, fmt.Errorf("e2ebench: warm-up MMIO read %d: %w", i, err)
		}
	}
	for i := 0; i < n; i++ {
		if et != nil {
			d, err := et.once()
			if err != nil {
				return nil, nil, err
			}
			echo = append(echo, d)
		}
		t0 := time.Now()
		if _, err := wd.c.ReadRegister(wd.d, gpu.RegScratch); err != nil {
			return nil, nil, fmt.Errorf("e2ebench: MMIO read %d: %w", i, err)
		}
		mmio = append(mmio, time.Since(t0))
	}
	return mmio, echo, nil
}

// dmaReads times n copies of one read request's worth (MRRS, 512 bytes)
// from host to device on the copy engine: request to last completion, as
// the GPU's copy engine reports it on the clock that runs the world.
func (wd *world) dmaReads(n int) ([]time.Duration, error) {
	const size = 512
	out := make([]time.Duration, 0, n)
	// The copy engine reports on the GPU's clock, which may run on a
	// goroutine of its own.
	var dur atomic.Int64
	var prev func(gpu.Command, time.Duration, time.Duration)
	wd.onGPU(func() {
		prev = wd.g.OnOp
		wd.g.OnOp = func(c gpu.Command, s, t time.Duration) { dur.Store(int64(t - s)) }
	})
	defer wd.onGPU(func() { wd.g.OnOp = prev })
	freshHeap()
	for i := 0; i < n; i++ {
		dur.Store(-1)
		if err := wd.c.MemcpyHtoD(wd.st, wd.dst, wd.src, size); err != nil {
			return nil, fmt.Errorf("e2ebench: DMA read %d: %w", i, err)
		}
		// The GPU reports the copy (gpu.GPU.OnOp) before it releases the
		// semaphore the host waits on: the report is in.
		d := time.Duration(dur.Load())
		if d < 0 {
			return nil, fmt.Errorf("e2ebench: DMA read %d: the copy engine reported no operation", i)
		}
		out = append(out, d)
	}
	return out, nil
}

// launchSyncs times n empty-kernel launches each followed by a stream
// synchronization, as the CPU sees them, on a new stream per placement:
// out[i] holds the times with the commands placed as placements[i]. The
// placements take turns launch by launch, so each sees the same machine.
func (wd *world) launchSyncs(n int, placements ...gpudrv.Placement) ([][]time.Duration, error) {
	sts := make([]*cuda.Stream, len(placements))
	out := make([][]time.Duration, len(placements))
	for i, p := range placements {
		st, err := wd.d.NewStreamPlaced(p)
		if err != nil {
			return nil, fmt.Errorf("e2ebench: stream with commands in %v memory: %w", p, err)
		}
		sts[i], out[i] = st, make([]time.Duration, 0, n)
	}
	for k := 0; k < n; k++ {
		for i, st := range sts {
			t0 := time.Now()
			if err := wd.c.Launch(st, 0); err != nil {
				return nil, fmt.Errorf("e2ebench: launch %d, commands in %v memory: %w", k, placements[i], err)
			}
			if err := wd.c.StreamSynchronize(st); err != nil {
				return nil, fmt.Errorf("e2ebench: synchronize %d, commands in %v memory: %w", k, placements[i], err)
			}
			out[i] = append(out[i], time.Since(t0))
		}
	}
	return out, nil
}

// freshHeap collects garbage before a latency series, as testing.B does
// before a benchmark: the requests themselves allocate nothing
// (emu/realtime TestWorldAllocatesNothingPerRequest), but setting up the
// world and the previous phase do, and a collection they left due would
// otherwise start inside the series, its pauses and write barriers
// landing in the tail.
func freshHeap() { runtime.GC() }

// Direction of a copy.
type direction int

const (
	h2d direction = iota
	d2h
)

func (d direction) String() string {
	if d == h2d {
		return "h2d"
	}
	return "d2h"
}

// copyTime moves size bytes in one synchronous copy and returns the wall
// time from the call to its return: every byte crosses as TLPs.
func (wd *world) copyTime(dir direction, size uint64) (time.Duration, error) {
	if size > wd.bufSize {
		return 0, fmt.Errorf("e2ebench: copy of %d bytes: buffers hold %d", size, wd.bufSize)
	}
	t0 := time.Now()
	var err error
	if dir == h2d {
		err = wd.c.MemcpyHtoD(wd.st, wd.dst, wd.src, size)
	} else {
		err = wd.c.MemcpyDtoH(wd.st, wd.src, wd.dst, size)
	}
	if err != nil {
		return 0, fmt.Errorf("e2ebench: %v copy of %d bytes: %w", dir, size, err)
	}
	return time.Since(t0), nil
}
