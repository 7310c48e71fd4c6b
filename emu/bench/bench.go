// Package bench runs the microbenchmarks a GPU disaggregation paper reports
// on the emulated path, in virtual time: MMIO read latency, host-to-device
// and device-to-host bandwidth by copy size (as CUDA's bandwidthTest
// measures it, between two events on the copy's stream), and the latency of
// an empty kernel launch followed by a stream synchronization. Every figure
// comes for the native topology and for the fabric.
package bench

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/topo"
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
}

// Env is a built world with one GPU, its driver and one stream.
type Env struct {
	W   *topo.World
	C   *cuda.Context
	D   *cuda.Device
	St  *cuda.Stream
	GPU *gpu.GPU
}

// NewEnv builds a world for s.
func NewEnv(s Setup) (*Env, error) {
	var path topo.PathFactory
	if s.Bridge && s.Fabric != nil {
		path = topo.BridgePaths(*s.Fabric)
	}
	w, err := topo.Build(topo.Options{GPUs: 1, Model: s.Model, Fabric: s.Fabric, Path: path,
		Enum: host.EnumConfig{TenBitTags: s.TenBitTags, MRRS: s.MRRS},
		GPU:  gpu.Config{MaxOutstanding: s.MaxOutstanding, MaxSimBytes: s.MaxSimBytes}})
	if err != nil {
		return nil, err
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{Sync: s.Sync})
	if err != nil {
		return nil, err
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		return nil, err
	}
	return &Env{W: w, C: c, D: c.Devices[0], St: st, GPU: w.GPUs[0]}, nil
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
