package e2ebench

import (
	"context"
	"fmt"
	"runtime/pprof"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/sim"
)

// pairID is the bridge pair of the measured path; the echo uses echoPair.
const (
	pairID   = 1
	echoPair = 2
)

// world is an emulated host and GPU on the wall clock, joined either by a
// native PCIe link (fabric nil) or by a dxpu bridge pair over the
// transports open returns.
type world struct {
	w   *topo.World
	clk *realtime.Clock
	// gclk is the GPU's clock when the GPU runs on a core of its own (nil:
	// on clk); stopGPU ends its goroutine.
	gclk    *realtime.Clock
	stopGPU func()
	c       *cuda.Context
	d       *cuda.Device
	st      *cuda.Stream
	g       *gpu.GPU
	path    *realtime.UDPPath
	// src and dst are buffers for copies, allocated once at the largest
	// size: host memory and VRAM are never freed.
	src, dst uint64
	bufSize  uint64
}

// newWorld builds and enumerates the world; open nil means native PCIe.
// Behind a fabric the GPU runs on a clock and goroutine of its own, as a
// GPU box is a machine of its own, unless opt.OneClock.
func newWorld(open func() (host, gpu driver.Transport, err error), bcfg bridge.Config, maxCopy uint64, opt Options) (*world, error) {
	newClock := func(seed uint64) *realtime.Clock {
		c := realtime.New(sim.New(seed))
		c.Spin = opt.Spin
		return c
	}
	clk := newClock(1)
	wd := &world{clk: clk}
	o := topo.Options{GPUs: 1, Sim: clk.S, Driver: clk,
		Enum: host.EnumConfig{TenBitTags: true},
		Host: host.Config{CompletionTimeout: 5 * time.Second}}
	if open != nil {
		if !opt.OneClock {
			wd.gclk = newClock(2)
			o.GPUSim = func(int) *sim.Sim { return wd.gclk.S }
			// Enumeration needs the GPU's clock running, which starts
			// once the world is wired (below).
			o.NoEnumerate = true
		}
		o.Fabric = &topo.Fabric{}
		o.Path = func(_ *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			wd.path = &realtime.UDPPath{Clock: clk, GPUClock: wd.gclk, PairID: pairID, Transports: open,
				NoBatch: opt.NoBatch, NoBusyPoll: opt.NoBusyPoll,
				Bridge: bcfg, UpWithin: 10 * time.Second,
				OnFail: func(error) { clk.Post(wd.pathFailed) }}
			return wd.path
		}
	}
	w, err := topo.Build(o)
	if err == nil && wd.path != nil {
		err = wd.path.Err()
	}
	if err == nil && wd.gclk != nil {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Labelled, so that --profile's CPU profiles tell the two
			// sides apart (pprof -tagfocus side=gpu).
			pprof.Do(ctx, pprof.Labels("side", "gpu"), func(ctx context.Context) { wd.gclk.Run(ctx) })
		}()
		wd.stopGPU = func() { cancel(); <-done }
		w.Devices, err = w.Host.Enumerate(o.Enum)
		if err == nil && len(w.Devices) != 1 {
			err = fmt.Errorf("enumeration found %d devices, want 1", len(w.Devices))
		}
	}
	if err != nil {
		wd.close()
		return nil, fmt.Errorf("e2ebench: building the world: %w", err)
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
	if err != nil {
		wd.close()
		return nil, fmt.Errorf("e2ebench: driver: %w", err)
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		wd.close()
		return nil, fmt.Errorf("e2ebench: stream: %w", err)
	}
	wd.w, wd.c, wd.d, wd.st, wd.g = w, c, c.Devices[0], st, w.GPUs[0]
	wd.bufSize = max(maxCopy, 4096)
	wd.src, wd.dst = c.MallocHost(wd.bufSize), wd.d.Malloc(wd.bufSize)
	return wd, nil
}

// pathFailed pulls the GPU when its bridge pair stopped (a socket
// failed), as the host sees a fabric that went away: a surprise removal,
// so that what waits for the GPU ends with cuda.ErrDeviceLost instead of
// waiting forever. It runs in the simulation.
func (wd *world) pathFailed() {
	if wd.w != nil && wd.w.Switch != nil && wd.w.Switch.Occupied(0) {
		wd.w.Switch.Unplug(0)
	}
}

func (wd *world) close() {
	if wd.path != nil {
		wd.path.Close()
	}
	if wd.stopGPU != nil {
		wd.stopGPU()
	}
}

// onGPU runs fn with the GPU's simulation stopped: fn may touch the GPU.
// On one clock the simulation runs only inside the host's calls, so fn
// runs at once.
func (wd *world) onGPU(fn func()) {
	if wd.gclk == nil {
		fn()
		return
	}
	wd.gclk.World().Lock()
	defer wd.gclk.World().Unlock()
	fn()
}

// bridgeConfig is the configuration of both bridges of the measured path
// and of the link-goodput pair: window, queues and credits are the
// library's defaults, as 'dxpu bridge' and 'dxpu bench link' run them,
// with timers that tolerate a loaded machine.
func bridgeConfig(mtu int) bridge.Config {
	return bridge.Config{MTU: mtu, MaxPayload: 512,
		MinRTO: 200 * time.Microsecond, InitialRTO: 2 * time.Millisecond, MaxRTO: time.Second,
		Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second, CompletionTimeout: 5 * time.Second}
}
