package e2ebench

import (
	"fmt"
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
	w    *topo.World
	clk  *realtime.Clock
	c    *cuda.Context
	d    *cuda.Device
	st   *cuda.Stream
	g    *gpu.GPU
	path *realtime.UDPPath
	// src and dst are buffers for copies, allocated once at the largest
	// size: host memory and VRAM are never freed.
	src, dst uint64
	bufSize  uint64
}

// newWorld builds and enumerates the world; open nil means native PCIe.
func newWorld(open func() (host, gpu driver.Transport, err error), bcfg bridge.Config, maxCopy uint64, opt Options) (*world, error) {
	s := sim.New(1)
	clk := realtime.New(s)
	if opt.Spin > 0 {
		clk.Spin = opt.Spin
	}
	wd := &world{clk: clk}
	o := topo.Options{GPUs: 1, Sim: s, Driver: clk,
		Enum: host.EnumConfig{TenBitTags: true},
		Host: host.Config{CompletionTimeout: 5 * time.Second}}
	if open != nil {
		o.Fabric = &topo.Fabric{}
		o.Path = func(_ *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			wd.path = &realtime.UDPPath{Clock: clk, PairID: pairID, Transports: open,
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
}

// bridgeConfig is the configuration of both bridges of the measured path
// and of the link-goodput pair: sized for throughput as `dxpu bench link`
// sizes it (credits for 512 TLPs of each class, a 1024-frame window), with
// timers that tolerate a loaded machine.
func bridgeConfig(mtu int) bridge.Config {
	cfg := bridge.Config{MTU: mtu, MaxPayload: 512, Window: 1024, TxQueue: 256,
		MinRTO: 200 * time.Microsecond, InitialRTO: 2 * time.Millisecond, MaxRTO: time.Second,
		Keepalive: 100 * time.Millisecond, DeadAfter: 5 * time.Second, CompletionTimeout: 5 * time.Second}
	for i := range cfg.Credits {
		cfg.Credits[i] = bridge.ClassCredits{Headers: 512, Data: 512 * cfg.MaxPayload / 16}
	}
	return cfg
}
