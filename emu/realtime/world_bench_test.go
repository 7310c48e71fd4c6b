package realtime

import (
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/gpudrv"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/sim"
)

// benchWorld is the wall-clock world bench e2e measures, on loopback: the
// emulated host, its switch, a bridge pair over UDP (busy-polled by the
// clock, batched), the emulated GPU, and the driver.
type benchWorld struct {
	clk  *Clock
	w    *topo.World
	c    *cuda.Context
	d    *cuda.Device
	g    *gpu.GPU
	path *UDPPath
}

func newBenchWorld(b testing.TB) *benchWorld {
	b.Helper()
	privtest.Loopback(b)
	s := sim.New(1)
	bw := &benchWorld{clk: New(s)}
	w, err := topo.Build(topo.Options{Sim: s, Driver: bw.clk, GPUs: 1, Fabric: &topo.Fabric{},
		Enum: host.EnumConfig{TenBitTags: true},
		Host: host.Config{CompletionTimeout: 5 * time.Second},
		Path: func(_ *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			bw.path = &UDPPath{Clock: bw.clk, PairID: uint32(i + 1), UpWithin: 10 * time.Second}
			return bw.path
		}})
	if bw.path != nil {
		b.Cleanup(bw.path.Close)
	}
	if err == nil && bw.path != nil {
		err = bw.path.Err()
	}
	if err != nil {
		b.Fatal(err)
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
	if err != nil {
		b.Fatal(err)
	}
	bw.w, bw.c, bw.d, bw.g = w, c, c.Devices[0], w.GPUs[0]
	return bw
}

// BenchmarkWorldMMIORead is one 4-byte MMIO read of a GPU register by the
// emulated CPU: MRd down through the switch and the bridge pair, CplD back,
// the CPU released. allocs/op counts everything the process allocated
// meanwhile (host, GPU, clock, both bridges and their runners).
func BenchmarkWorldMMIORead(b *testing.B) {
	bw := newBenchWorld(b)
	read := func() {
		if _, err := bw.c.ReadRegister(bw.d, gpu.RegScratch); err != nil {
			b.Fatal(err)
		}
	}
	for range 1000 {
		read() // warm the free lists and queues
	}
	b.ReportAllocs()
	for b.Loop() {
		read()
	}
}

// BenchmarkWorldDMA is one 4 KiB copy on the GPU's copy engine, started in
// the simulation (no command fetch, no semaphore): read, 8 MRd of 512
// bytes answered by 16 CplD of 256; write, 16 MWr of 256 bytes.
func BenchmarkWorldDMA(b *testing.B) {
	for _, dir := range []struct {
		name string
		dir  uint32
	}{{"read", gpu.DirH2D}, {"write", gpu.DirD2H}} {
		b.Run(dir.name, func(b *testing.B) {
			bw := newBenchWorld(b)
			const n = 4096
			hostBuf, vram := bw.c.MallocHost(n), bw.d.Malloc(n)
			cmd := gpu.Command{Op: gpu.OpCopy, Dir: dir.dir, Src: hostBuf, Dst: vram, Len: n}
			if dir.dir == gpu.DirD2H {
				cmd.Src, cmd.Dst = vram, hostBuf
			}
			var done bool
			finished := func() { done = true }
			start := func() { bw.g.CopyForTest(cmd, finished) }
			waiting := func() bool { return !done }
			copy4K := func() {
				done = false
				bw.clk.Post(start)
				if !bw.w.Host.RunWhile(waiting) {
					b.Fatal("copy did not finish: the world stalled")
				}
			}
			for range 200 {
				copy4K()
			}
			b.ReportAllocs()
			for b.Loop() {
				copy4K()
			}
		})
	}
}

// BenchmarkWorldLaunchSync is an empty kernel launch and a stream
// synchronization, the commands in device memory (posted writes through
// BAR1, a doorbell, the semaphore written back) and in host memory (the
// GPU fetches them by DMA reads).
func BenchmarkWorldLaunchSync(b *testing.B) {
	for _, pl := range []gpudrv.Placement{gpudrv.DeviceMemory, gpudrv.HostMemory} {
		b.Run(pl.String(), func(b *testing.B) {
			bw := newBenchWorld(b)
			st, err := bw.d.NewStreamPlaced(pl)
			if err != nil {
				b.Fatal(err)
			}
			launch := func() {
				if err := bw.c.Launch(st, 0); err != nil {
					b.Fatal(err)
				}
				if err := bw.c.StreamSynchronize(st); err != nil {
					b.Fatal(err)
				}
			}
			for range 200 {
				launch()
			}
			b.ReportAllocs()
			for b.Loop() {
				launch()
			}
		})
	}
}

// TestWorldAllocatesNothingPerRequest: an MMIO read, a 4 KiB DMA read and
// write, and a launch+sync allocate nothing in steady state, through the
// whole wall-clock world (host, switch, bridge pair over UDP, GPU,
// driver). Not parallel: the allocation count is the process's, and
// parallel tests wait until this one is done. Under the race detector
// the operations run but their count is not judged.
func TestWorldAllocatesNothingPerRequest(t *testing.T) {
	privtest.Loopback(t)
	bw := newBenchWorld(t)
	st, err := bw.d.NewStreamPlaced(gpudrv.HostMemory)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4096
	hostBuf, vram := bw.c.MallocHost(n), bw.d.Malloc(n)
	var done bool
	finished := func() { done = true }
	waiting := func() bool { return !done }
	copyOn := func(c gpu.Command) func() {
		start := func() { bw.g.CopyForTest(c, finished) }
		return func() {
			done = false
			bw.clk.Post(start)
			if !bw.w.Host.RunWhile(waiting) {
				t.Fatal("copy did not finish: the world stalled")
			}
		}
	}
	for _, op := range []struct {
		name string
		run  func()
	}{
		{"MMIO read", func() {
			if _, err := bw.c.ReadRegister(bw.d, gpu.RegScratch); err != nil {
				t.Fatal(err)
			}
		}},
		{"4 KiB DMA read", copyOn(gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirH2D, Src: hostBuf, Dst: vram, Len: n})},
		{"4 KiB DMA write", copyOn(gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirD2H, Src: vram, Dst: hostBuf, Len: n})},
		{"launch+sync", func() {
			if err := bw.c.Launch(st, 0); err != nil {
				t.Fatal(err)
			}
			if err := bw.c.StreamSynchronize(st); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for range 100 {
			op.run() // grow the free lists and queues
		}
		// A loaded machine can hold TLPs back and deliver hundreds at
		// once, more than the warm-up ever had in flight: the emulator's
		// free lists (pcie.Link's buffers, the simulator's events) grow
		// once more, about 800 allocations, and the run after that
		// allocates nothing again. What a request allocates shows in
		// every run, so the least of three is judged.
		a := testing.AllocsPerRun(200, op.run)
		for try := 1; try < 3 && a != 0; try++ {
			a = min(a, testing.AllocsPerRun(200, op.run))
		}
		if raceEnabled {
			continue // the operations still ran; their count is the detector's
		}
		if a != 0 {
			t.Errorf("%s: %v allocations per operation, want 0", op.name, a)
		}
	}
}
