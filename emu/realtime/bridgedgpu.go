package realtime

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// BridgedGPUConfig configures an emulated GPU behind a GPU-side bridge.
type BridgedGPUConfig struct {
	// GPU is the model's configuration (default: H100 SXM5).
	GPU gpu.Config
	// ID is the routing ID the GPU takes (the host's numbering, as the
	// wire carries it); default 03:00.0. Its DMA requests carry it.
	ID tlp.ID
	// BAR0, BAR1, BAR3 are the addresses the GPU's BARs are programmed
	// with, each aligned to its size; defaults 0x9000_0000 (BAR0, 16 MiB),
	// 0x20_0000_0000 (BAR1) and 0x40_0000_0000 (BAR3).
	BAR0, BAR1, BAR3 uint64
	// MPS and MRRS in bytes (defaults 256 and 512, what host enumeration
	// programs). MPS must not exceed the bridge's MaxPayload.
	MPS, MRRS int
	// NoBusyPoll leaves receiving to the runner's goroutine; by default
	// the GPU's clock polls the runner while it spins (Clock.AddPoller).
	NoBusyPoll bool
}

func (c *BridgedGPUConfig) fill() error {
	if c.ID == 0 {
		c.ID = tlp.NewID(3, 0, 0)
	}
	if c.BAR0 == 0 {
		c.BAR0 = 0x9000_0000
	}
	if c.BAR1 == 0 {
		c.BAR1 = 0x20_0000_0000
	}
	if c.BAR3 == 0 {
		c.BAR3 = 0x40_0000_0000
	}
	if c.MPS == 0 {
		c.MPS = 256
	}
	if c.MRRS == 0 {
		c.MRRS = 512
	}
	if c.GPU.Model.DeviceID == 0 {
		c.GPU.Model = gpu.H100SXM
	}
	m := c.GPU.Model
	for _, b := range []struct {
		name       string
		addr, size uint64
		below4G    bool
	}{{"BAR0", c.BAR0, m.BAR0Size, true}, {"BAR1", c.BAR1, m.BAR1Size, false}, {"BAR3", c.BAR3, m.BAR3Size, false}} {
		if b.addr%b.size != 0 {
			return fmt.Errorf("%w: %s at %#x: want a multiple of its size %#x", nettlp.ErrConfig, b.name, b.addr, b.size)
		}
		if b.below4G && b.addr+b.size > 1<<32 {
			return fmt.Errorf("%w: %s at %#x: a 32-bit BAR must lie below 4 GiB", nettlp.ErrConfig, b.name, b.addr)
		}
	}
	if c.BAR1 < c.BAR3+m.BAR3Size && c.BAR3 < c.BAR1+m.BAR1Size {
		return fmt.Errorf("%w: BAR1 [%#x, +%#x) and BAR3 [%#x, +%#x) overlap", nettlp.ErrConfig, c.BAR1, m.BAR1Size, c.BAR3, m.BAR3Size)
	}
	code := func(name string, n int) (uint16, error) {
		for k := uint16(0); k <= 5; k++ {
			if 128<<k == n {
				return k, nil
			}
		}
		return 0, fmt.Errorf("%w: %s %d: want 128, 256, ... 4096", nettlp.ErrConfig, name, n)
	}
	if _, err := code("MPS", c.MPS); err != nil {
		return err
	}
	_, err := code("MRRS", c.MRRS)
	return err
}

// BridgedGPU is an emulated GPU (package emu/gpu) behind a GPU-side bridge, on
// the wall clock: the GPU model runs in a simulator paced by a
// Clock, TLPs from the bridge are posted into it, and what the
// GPU sends (completions of MMIO reads, DMA reads and writes, MSIs) goes
// into the bridge. With no host to enumerate it (a NetTLP host does not
// send config requests), it is configured at NewBridgedGPU as enumeration would
// configure it: BARs assigned, MPS and MRRS set, Memory Space and Bus
// Master on, its routing ID captured from those config writes.
type BridgedGPU struct {
	clk *Clock
	g   *gpu.GPU
	cfg BridgedGPUConfig
}

// NewBridgedGPU builds the GPU and joins it to the GPU-side bridge runner r. It
// sets r.OnTLP, so call it before r.Run.
func NewBridgedGPU(r *driver.Runner, cfg BridgedGPUConfig) (*BridgedGPU, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: NewBridgedGPU needs a runner", nettlp.ErrConfig)
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := sim.New(1)
	g := gpu.New(s, cfg.GPU)
	configureBridgedGPU(g, cfg)
	// The config writes' completions have no requester to go to: let
	// them go nowhere before the GPU is attached.
	s.RunWhile(func() bool { return true }, 0)
	clk := New(s)
	g.Attach(driver.NewQueuedSender(s, r))
	r.OnTLP = func(v tlp.View) { clk.PostTLP(g, v) }
	if !cfg.NoBusyPoll {
		clk.AddPoller(r.Poll, r.PollIdle)
	}
	return &BridgedGPU{clk: clk, g: g, cfg: cfg}, nil
}

// configure writes the GPU's config space through its own config port, as
// the host's enumeration would.
func configureBridgedGPU(g *gpu.GPU, c BridgedGPUConfig) {
	wr := func(reg uint16, v uint32) {
		var d [4]byte
		binary.LittleEndian.PutUint32(d[:], v)
		g.ReceiveTLP(pcie.AppendCfg(nil, false, 0, 0, c.ID, reg, 0xf, d[:]))
	}
	wr(pcie.CfgBAR0, uint32(c.BAR0))
	wr(pcie.CfgBAR0+4, uint32(c.BAR1))
	wr(pcie.CfgBAR0+8, uint32(c.BAR1>>32))
	wr(pcie.CfgBAR0+12, uint32(c.BAR3))
	wr(pcie.CfgBAR0+16, uint32(c.BAR3>>32))
	enc := func(n int) uint32 {
		k := uint32(0)
		for 128<<k < n {
			k++
		}
		return k
	}
	devctl := g.Cfg.Get32(gpu.CapPCIeOff + gpu.PCIeDevCtl)
	devctl = devctl&^(7<<5|7<<12) | enc(c.MPS)<<5 | enc(c.MRRS)<<12 | gpu.DevCtlExtTag
	wr(gpu.CapPCIeOff+gpu.PCIeDevCtl, devctl)
	cmd := g.Cfg.Get32(pcie.CfgCommand)
	wr(pcie.CfgCommand, cmd|pcie.CmdMemory|pcie.CmdBusMaster)
}

// Config returns the configuration in use (defaults filled in).
func (e *BridgedGPU) Config() BridgedGPUConfig { return e.cfg }

// Do runs fn with the simulation stopped (between two of its steps), so
// fn may read or change the GPU (its VRAM, registers, Stats).
func (e *BridgedGPU) Do(fn func(g *gpu.GPU)) {
	e.clk.World().Lock()
	defer e.clk.World().Unlock()
	fn(e.g)
}

// Run drives the GPU on the wall clock until ctx ends.
func (e *BridgedGPU) Run(ctx context.Context) error {
	e.clk.Run(ctx)
	return nil
}
