package fabricbench

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/sim"
)

// Setup describes the world a benchmark runs in.
type Setup struct {
	Fabric     *topo.Fabric // nil: native
	Model      gpu.Model
	TenBitTags bool
	MRRS       int
	// MaxOutstanding caps DMA reads in flight (0: the tag space decides).
	MaxOutstanding int
	// MaxSimBytes bounds the TLP-level part of each copy (0: all of it).
	MaxSimBytes uint64
	Sync        cuda.SyncMode
	// Bridge puts a real dxpu bridge pair on the fabric path instead of
	// the latency and bandwidth pipe.
	Bridge bool
	// Wall runs on the wall clock (package realtime); the fabric is then a
	// real bridge pair exchanging frames over UDP on loopback, and Fabric
	// only selects it (its RTT and rate are those of the loopback).
	Wall bool
}

// Env is a built world with one GPU, its driver and one stream.
type Env struct {
	W     *topo.World
	C     *cuda.Context
	D     *cuda.Device
	St    *cuda.Stream
	GPU   *gpu.GPU
	paths []*realtime.UDPPath
}

// Close releases the sockets and goroutines of a wall-clock world.
func (e *Env) Close() {
	for _, p := range e.paths {
		p.Close()
	}
}

// NewEnv builds a world for s.
func NewEnv(s Setup) (*Env, error) {
	var path topo.PathFactory
	if s.Bridge && s.Fabric != nil {
		path = topo.BridgePaths(*s.Fabric)
	}
	env := &Env{}
	o := topo.Options{GPUs: 1, Model: s.Model, Fabric: s.Fabric, Path: path,
		Enum: host.EnumConfig{TenBitTags: s.TenBitTags, MRRS: s.MRRS},
		GPU:  gpu.Config{MaxOutstanding: s.MaxOutstanding, MaxSimBytes: s.MaxSimBytes}}
	if s.Fabric != nil && !s.Wall {
		// The default 50 ms is shorter than a config read takes over a
		// long round trip or a slow link: enumeration would find no GPU.
		// Twice the bridges': their CA ends a request that is truly lost.
		o.Host.CompletionTimeout = 2 * s.Fabric.CompletionTimeout()
	}
	if s.Wall {
		o.Sim = sim.New(1)
		clk := realtime.New(o.Sim)
		o.Driver = clk
		o.Host.CompletionTimeout = 5 * time.Second
		o.Path = func(_ *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			p := &realtime.UDPPath{Clock: clk, PairID: uint32(i + 1)}
			env.paths = append(env.paths, p)
			return p
		}
	}
	w, err := topo.Build(o)
	if err != nil {
		env.Close()
		return nil, err
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{Sync: s.Sync})
	if err != nil {
		env.Close()
		return nil, err
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		env.Close()
		return nil, err
	}
	env.W, env.C, env.D, env.St, env.GPU = w, c, c.Devices[0], st, w.GPUs[0]
	return env, nil
}

// MMIOReadLatency returns the mean time of n reads of a BAR0 register.
func (e *Env) MMIOReadLatency(n int) (time.Duration, error) {
	t0 := e.C.Now()
	for i := 0; i < n; i++ {
		if _, err := e.C.ReadRegister(e.D, gpu.RegScratch); err != nil {
			return 0, err
		}
	}
	return (e.C.Now() - t0) / time.Duration(n), nil
}

// Direction of a copy benchmark.
type Direction int

const (
	H2D Direction = iota
	D2H
)

func (d Direction) String() string {
	if d == H2D {
		return "h2d"
	}
	return "d2h"
}

// CopyBandwidth copies size bytes between pinned host memory and VRAM and
// returns bytes per second, timed by GPU events around the copy.
func (e *Env) CopyBandwidth(dir Direction, size uint64) (float64, time.Duration, error) {
	hostBuf := e.C.MallocHost(size)
	dev := e.D.Malloc(size)
	start, end := e.D.NewEvent(), e.D.NewEvent()
	if err := e.C.EventRecord(start, e.St); err != nil {
		return 0, 0, err
	}
	var err error
	if dir == H2D {
		err = e.C.MemcpyHtoDAsync(e.St, dev, hostBuf, size)
	} else {
		err = e.C.MemcpyDtoHAsync(e.St, hostBuf, dev, size)
	}
	if err != nil {
		return 0, 0, err
	}
	if err := e.C.EventRecord(end, e.St); err != nil {
		return 0, 0, err
	}
	if err := e.C.EventSynchronize(end); err != nil {
		return 0, 0, err
	}
	el, err := e.C.EventElapsed(start, end)
	if err != nil {
		return 0, 0, err
	}
	if el <= 0 {
		return 0, 0, fmt.Errorf("bench: copy of %d bytes took no time", size)
	}
	return float64(size) / el.Seconds(), el, nil
}

// DMAReadRTT returns how long one DMA read of n bytes takes from request to
// last completion, measured on the copy engine (no launch overheads).
func (e *Env) DMAReadRTT(n uint64) (time.Duration, error) {
	var dur time.Duration
	prev := e.GPU.OnOp
	e.GPU.OnOp = func(c gpu.Command, s, t time.Duration) { dur = t - s }
	defer func() { e.GPU.OnOp = prev }()
	src, dst := e.C.MallocHost(n), e.D.Malloc(n)
	if err := e.C.MemcpyHtoD(e.St, dst, src, n); err != nil {
		return 0, err
	}
	return dur, nil
}

// LaunchLatency returns the mean time of n empty-kernel launches each
// followed by a stream synchronization, as the CPU sees it.
func (e *Env) LaunchLatency(n int) (time.Duration, error) {
	t0 := e.C.Now()
	for i := 0; i < n; i++ {
		if err := e.C.Launch(e.St, 0); err != nil {
			return 0, err
		}
		if err := e.C.StreamSynchronize(e.St); err != nil {
			return 0, err
		}
	}
	return (e.C.Now() - t0) / time.Duration(n), nil
}
