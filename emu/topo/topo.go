package topo

import (
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Native PCIe: the root port, the link and the GPU's own port, one way.
const NativeHop = 150 * time.Nanosecond

// Fabric describes the path between the host-side and the GPU-side bridge.
type Fabric struct {
	// RTT is the round trip the network adds between the two bridges
	// (switches, cables, NIC pipelines).
	RTT time.Duration
	// BytesPerSec is the network rate of one pair (default 100 Gbit/s).
	BytesPerSec float64
	// BridgeLatency is what each bridge adds one way (encapsulation,
	// ordering queues); default 250 ns.
	BridgeLatency time.Duration
	// OverheadBytes is the Ethernet and dxpu framing share of each TLP
	// (default 32: several TLPs share one frame).
	OverheadBytes int
	// Loss is the probability that the network drops a frame. Only a
	// path through real bridges (BridgePaths) can recover from loss; the
	// pipe ignores it.
	Loss float64
}

func (f *Fabric) defaults() {
	if f.BytesPerSec == 0 {
		f.BytesPerSec = 100e9 / 8
	}
	if f.BridgeLatency == 0 {
		f.BridgeLatency = 250 * time.Nanosecond
	}
	if f.OverheadBytes == 0 {
		f.OverheadBytes = 32
	}
}

// PathFactory returns the path between downstream port i and its GPU. It is
// the seam where a real bridge pair (package bridge) replaces the pipe.
type PathFactory func(s *sim.Sim, i int, g *gpu.GPU) pcie.Path

// Options describe a world.
type Options struct {
	Seed   uint64
	GPUs   int
	Model  gpu.Model
	Fabric *Fabric // nil: native
	// Ports is the number of downstream ports of the host bridge's switch
	// (fabric only; default 32, at least GPUs).
	Ports int
	Enum  host.EnumConfig
	GPU   gpu.Config // Model, HostMemory filled in
	Host  host.Config
	// Path overrides the fabric path (nil: a latency and bandwidth pipe).
	Path PathFactory
	// NoEnumerate leaves enumeration to the caller.
	NoEnumerate bool
	// Sim, when set, is used instead of a new simulator.
	Sim *sim.Sim
	// GPUSim, when set, returns the simulator GPU i runs in (fabric
	// only; default the world's): a GPU box is another machine, with a
	// clock of its own (package emu/realtime runs each on a core). Its
	// path must then carry every TLP between the two simulators.
	GPUSim func(i int) *sim.Sim
	// Driver, when set, runs the host CPU's blocking calls (enumeration
	// included): package emu/realtime paces the simulation to the wall
	// clock.
	Driver host.Driver
}

// World is a host with its GPUs on one simulator.
type World struct {
	S       *sim.Sim
	Host    *host.RootComplex
	Switch  *host.Switch // nil in the native topology
	GPUs    []*gpu.GPU
	Devices []*host.Device
	Opts    Options
}

// Build wires a world and, unless NoEnumerate, enumerates it.
func Build(o Options) (*World, error) {
	if o.GPUs < 0 || o.GPUs > 255 {
		return nil, fmt.Errorf("topo: %d GPUs, want 0..255", o.GPUs)
	}
	if o.GPUSim != nil && (o.Fabric == nil || o.Path == nil) {
		return nil, fmt.Errorf("topo: GPUs on simulators of their own need a fabric path that joins the two (Options.Path)")
	}
	if o.Model.DeviceID == 0 {
		o.Model = gpu.H100SXM
	}
	s := o.Sim
	if s == nil {
		s = sim.New(o.Seed)
	}
	if o.Fabric != nil && o.Host.CompletionTimeout == 0 {
		// A CPU request across a slow fabric may rightly wait longer than
		// the host's default: twice the bridges' timeout, whose CA ends a
		// request that is truly lost. (With the host's 50 ms, a config
		// read over a 30 ms round trip timed out, and hot-add found no
		// device.) Fabrics the defaults suffice for keep them.
		if c := o.Fabric.CompletionTimeout(); c > (bridge.Config{}).Defaults().CompletionTimeout {
			o.Host.CompletionTimeout = 2 * c
		}
	}
	w := &World{S: s, Host: host.New(s, o.Host), Opts: o}
	if o.Driver != nil {
		w.Host.SetDriver(o.Driver)
	}
	gcfg := o.GPU
	gcfg.Model = o.Model
	gcfg.HostMemory = w.Host.Mem
	pcieBW := pcie.Gen5x16BytesPerSec
	if o.Model.LinkGen == 4 {
		pcieBW = pcie.Gen4x16BytesPerSec
	}
	native := pcie.LinkConfig{Latency: NativeHop, BytesPerSec: pcieBW, OverheadBytes: pcie.PCIeOverheadBytes}
	if o.Fabric == nil {
		if o.GPUs > 31 {
			return nil, fmt.Errorf("topo: native topology holds at most 31 GPUs (one per root port), got %d", o.GPUs)
		}
		for i := 0; i < o.GPUs; i++ {
			g := gpu.New(s, gcfg)
			up, err := w.Host.AddRootPort(&pcie.LinkPath{S: s, Down: native, Up: native}, g)
			if err != nil {
				return nil, err
			}
			g.Attach(up)
			w.GPUs = append(w.GPUs, g)
		}
	} else {
		f := *o.Fabric
		f.defaults()
		ports := o.Ports
		if ports == 0 {
			ports = 32
		}
		if ports < o.GPUs {
			ports = o.GPUs
		}
		sw := host.NewSwitch(s, ports)
		w.Switch = sw
		up, err := w.Host.AddRootPort(&pcie.LinkPath{S: s, Down: native, Up: native}, sw)
		if err != nil {
			return nil, err
		}
		sw.AttachUp(up)
		sw.OnHotplug = func(i int, present bool) {
			w.Host.HotplugEvent(w.DSPID(i), present)
		}
		for i := 0; i < o.GPUs; i++ {
			g := gpu.New(w.gpuSim(i), gcfg)
			w.GPUs = append(w.GPUs, g)
			g.Attach(sw.Plug(i, w.fabricPath(f, i, g), g))
		}
	}
	if !o.NoEnumerate {
		devs, err := w.Host.Enumerate(o.Enum)
		if err != nil {
			return nil, err
		}
		w.Devices = devs
		if len(devs) != o.GPUs {
			return nil, fmt.Errorf("topo: enumeration found %d devices, want %d", len(devs), o.GPUs)
		}
	}
	return w, nil
}

// gpuSim is the simulator GPU i runs in.
func (w *World) gpuSim(i int) *sim.Sim {
	if w.Opts.GPUSim != nil {
		return w.Opts.GPUSim(i)
	}
	return w.S
}

// FabricLink returns the one-way link configuration of a fabric path.
func FabricLink(f Fabric, m gpu.Model) pcie.LinkConfig {
	f.defaults()
	pcieBW := pcie.Gen5x16BytesPerSec
	if m.LinkGen == 4 {
		pcieBW = pcie.Gen4x16BytesPerSec
	}
	return pcie.LinkConfig{
		// Host bridge, network one way, GPU bridge, the GPU box's PCIe hop.
		Latency:       f.BridgeLatency + f.RTT/2 + f.BridgeLatency + NativeHop,
		BytesPerSec:   min(f.BytesPerSec, pcieBW),
		OverheadBytes: f.OverheadBytes,
	}
}

func (w *World) fabricPath(f Fabric, i int, g *gpu.GPU) pcie.Path {
	if w.Opts.Path != nil {
		return w.Opts.Path(w.S, i, g)
	}
	lc := FabricLink(f, w.Opts.Model)
	return &pcie.LinkPath{S: w.S, Down: lc, Up: lc}
}

// DSPID returns the routing ID of downstream port i of the host bridge's
// switch (valid after enumeration).
func (w *World) DSPID(i int) tlp.ID {
	return host.PortID(w.Switch.USP.Secondary(), i)
}

// HotAdd plugs a new GPU into free downstream port i of the host bridge and
// lets the host configure it.
func (w *World) HotAdd(i int) (*gpu.GPU, *host.Device, error) {
	return w.HotAddModel(i, w.Opts.Model)
}

// HotAddModel hot-adds a GPU of model m into free downstream port i.
func (w *World) HotAddModel(i int, m gpu.Model) (*gpu.GPU, *host.Device, error) {
	if w.Switch == nil {
		return nil, nil, fmt.Errorf("topo: hot-add needs the fabric topology")
	}
	if i < 0 || i >= len(w.Switch.DSPs) || w.Switch.Occupied(i) {
		return nil, nil, fmt.Errorf("topo: downstream port %d is not free", i)
	}
	gcfg := w.Opts.GPU
	gcfg.Model = m
	gcfg.HostMemory = w.Host.Mem
	g := gpu.New(w.gpuSim(i), gcfg)
	f := *w.Opts.Fabric
	f.defaults()
	g.Attach(w.Switch.Plug(i, w.fabricPath(f, i, g), g))
	added, err := w.Host.ServiceHotplug()
	if err != nil {
		return nil, nil, err
	}
	if len(added) != 1 {
		return nil, nil, fmt.Errorf("topo: hot-add on port %d configured %d devices", i, len(added))
	}
	w.GPUs = append(w.GPUs, g)
	w.Devices = append(w.Devices, added[0])
	return g, added[0], nil
}

// SurpriseRemove pulls the GPU behind downstream port i.
func (w *World) SurpriseRemove(i int) error {
	if w.Switch == nil || i < 0 || i >= len(w.Switch.DSPs) || !w.Switch.Occupied(i) {
		return fmt.Errorf("topo: no GPU behind downstream port %d", i)
	}
	w.Switch.Unplug(i)
	return nil
}

// minBridge stands for "no bridge latency" (0 selects the default).
const minBridge = time.Nanosecond

// AddedRTT returns a fabric whose round trip, compared with the native
// topology, is longer by rtt: the network, both bridges and the host
// bridge's own PCIe hop together. bytesPerSec 0 keeps the default rate.
func AddedRTT(rtt time.Duration, bytesPerSec float64) Fabric {
	fixed := 2*NativeHop + 4*minBridge
	return Fabric{RTT: max(0, rtt-fixed), BytesPerSec: bytesPerSec, BridgeLatency: minBridge}
}

// AddedRoundTrip returns what f adds to a round trip over the native
// topology.
func (f Fabric) AddedRoundTrip() time.Duration {
	f.defaults()
	return f.RTT + 4*f.BridgeLatency + 2*NativeHop
}

// PayloadRate is the data rate of the fabric path for TLPs carrying mps
// bytes each: the link rate less each TLP's 3-DW header and framing share.
func (f Fabric) PayloadRate(mps int) float64 {
	f.defaults()
	return f.BytesPerSec * float64(mps) / float64(mps+12+f.OverheadBytes)
}
