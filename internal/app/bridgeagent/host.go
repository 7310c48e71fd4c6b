package bridgeagent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/realtime"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Removal kinds a slot records.
const (
	RemovedHotRemove = "hot-remove" // the manager's orderly removal
	RemovedSurprise  = "surprise"   // link down, or the manager's surprise removal
)

// Slot is one downstream port of the host's virtual switch as the status
// shows it.
type Slot struct {
	Port    int    `json:"port"`
	Pair    uint32 `json:"pair,omitempty"`
	GPU     string `json:"gpu,omitempty"`     // the pool's GPU ID
	Present bool   `json:"present"`           // the host has the device enumerated
	BDF     string `json:"bdf,omitempty"`     // in the host's numbering
	Vendor  string `json:"vendor,omitempty"`  // e.g. "0x10de"
	Device  string `json:"device,omitempty"`  // e.g. "0x2330"
	BAR0    string `json:"bar0,omitempty"`    // where enumeration put it
	Boot0   string `json:"boot0,omitempty"`   // PMC_BOOT_0 read through the fabric (GPUs)
	Removed string `json:"removed,omitempty"` // RemovedHotRemove or RemovedSurprise, once gone
	Reason  string `json:"reason,omitempty"`  // why it was removed
}

// emuHost is the host role's PCIe side: an emulated root complex (emu/host)
// on the wall clock, with the host-side bridge's virtual switch below a
// root port. Each pair's GPU is hot-added on the pair's downstream port.
// One goroutine (loop) is the host CPU: every operation on the emulated
// world runs there, in order.
type emuHost struct {
	clk  *realtime.Clock
	rc   *host.RootComplex
	sw   *host.Switch
	cmds chan func()
	log  *slog.Logger

	mu    sync.Mutex
	slots []Slot // the status; written by the loop
	// bar1 is where enumeration put each port's GPU's VRAM aperture
	// (copycheck.go); written by the loop.
	bar1 map[int]uint64
}

// emuSlot is a pair's downstream port on the emulated host.
type emuSlot struct {
	h *emuHost
	p manager.Pair
	r *driver.Runner
	// to is where the bridge's TLPs go once the GPU is plugged.
	to atomic.Pointer[pcie.Receiver]
}

func (h *emuHost) attach(p manager.Pair, r *driver.Runner) (hostSlot, error) {
	return &emuSlot{h: h, p: p, r: r}, nil
}

func (h *emuHost) close() {} // the host CPU's loop ends with the agent's context

func (s *emuSlot) deliver(v tlp.View) { s.h.post(&s.to, v) }
func (s *emuSlot) event(bridge.Event) {} // a link down unplugs, a link up re-plugs (Agent.linkDown, linkUp)
func (s *emuSlot) plug(ctx context.Context) error {
	return s.h.plug(ctx, s.p.HostPort, s.p.ID, s.p.GPU, s.r, &s.to)
}
func (s *emuSlot) unplug(ctx context.Context, kind, reason string) error {
	return s.h.unplug(ctx, s.p.HostPort, s.p.ID, kind, reason)
}

// newEmuHost builds the emulated host; its root complex waits a second
// longer than the bridges' completionTimeout, so that a request the
// fabric loses ends with the bridge's CA, which says why, not with the
// host's own timeout.
func newEmuHost(ports int, completionTimeout time.Duration, log *slog.Logger) *emuHost {
	s := sim.New(1)
	clk := realtime.New(s)
	rc := host.New(s, host.Config{CompletionTimeout: completionTimeout + time.Second})
	rc.SetDriver(clk)
	h := &emuHost{clk: clk, rc: rc, sw: host.NewSwitch(s, ports), cmds: make(chan func()), log: log, slots: make([]Slot, ports), bar1: map[int]uint64{}}
	for i := range h.slots {
		h.slots[i].Port = i
	}
	return h
}

// start wires the root port and the virtual switch and enumerates the
// empty hierarchy, reserving every slot's windows for later hot-adds.
func (h *emuHost) start(ctx context.Context) error {
	return h.do(ctx, func() error {
		native := pcie.LinkConfig{Latency: 150 * time.Nanosecond, BytesPerSec: pcie.Gen5x16BytesPerSec}
		up, err := h.rc.AddRootPort(&pcie.LinkPath{S: h.rc.Sim(), Down: native, Up: native}, h.sw)
		if err != nil {
			return err
		}
		h.sw.AttachUp(up)
		h.sw.OnHotplug = func(i int, present bool) {
			h.rc.HotplugEvent(host.PortID(h.sw.USP.Secondary(), i), present)
		}
		if _, err := h.rc.Enumerate(host.EnumConfig{}); err != nil {
			return fmt.Errorf("emulated host: enumeration: %w", err)
		}
		return nil
	})
}

// loop runs the host CPU until ctx ends.
func (h *emuHost) loop(ctx context.Context) {
	for {
		select {
		case fn := <-h.cmds:
			fn()
		case <-ctx.Done():
			return
		}
	}
}

// do runs fn on the host CPU and returns its error.
func (h *emuHost) do(ctx context.Context, fn func() error) error {
	res := make(chan error, 1)
	select {
	case h.cmds <- func() { res <- fn() }:
	case <-ctx.Done():
		return fmt.Errorf("emulated host busy: %w", ctx.Err())
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return fmt.Errorf("emulated host: %w", ctx.Err())
	}
}

// Slots returns the virtual switch's ports as the host sees them.
func (h *emuHost) Slots() []Slot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Slot(nil), h.slots...)
}

func (h *emuHost) setSlot(s Slot) {
	h.mu.Lock()
	h.slots[s.Port] = s
	h.mu.Unlock()
}

// plug hot-adds the device at the far end of r (pair, pool GPU gpuID) on
// port and lets the host configure it. Plugging a port that holds this
// pair's device already does nothing.
func (h *emuHost) plug(ctx context.Context, port int, pair uint32, gpuID string, r *driver.Runner, to *atomic.Pointer[pcie.Receiver]) error {
	return h.do(ctx, func() error {
		cur := h.Slots()[port]
		if h.sw.Occupied(port) {
			if cur.Pair == pair {
				return nil
			}
			return fmt.Errorf("host port %d holds pair %d", port, cur.Pair)
		}
		h.sw.Plug(port, &runnerPath{s: h.rc.Sim(), r: r, to: to}, nil)
		added, err := h.rc.ServiceHotplug()
		if err == nil && len(added) != 1 {
			err = fmt.Errorf("enumeration found %d devices", len(added))
		}
		if err != nil {
			h.sw.Unplug(port) // leave the slot empty, as before
			return fmt.Errorf("hot-add of pair %d on host port %d: %w", pair, port, err)
		}
		d := added[0]
		s := Slot{Port: port, Pair: pair, GPU: gpuID, Present: true, BDF: d.ID.String(),
			Vendor: fmt.Sprintf("%#04x", d.Vendor), Device: fmt.Sprintf("%#04x", d.DeviceID)}
		if b, ok := d.BAR(1); ok {
			h.mu.Lock()
			h.bar1[port] = b.Addr
			h.mu.Unlock()
		}
		if b, ok := d.BAR(0); ok {
			s.BAR0 = fmt.Sprintf("%#x", b.Addr)
			if d.Vendor == vendorNVIDIA {
				// The first MMIO read through the fabric: the GPU answers
				// from its registers, so data flows, not only config.
				v, err := h.rc.MMIORead32(b.Addr + gpu.RegBoot0)
				if err != nil {
					h.sw.Unplug(port)
					return fmt.Errorf("hot-add of pair %d: reading BOOT_0 at %#x: %w", pair, b.Addr, err)
				}
				s.Boot0 = fmt.Sprintf("%#08x", v)
			}
		}
		h.setSlot(s)
		h.log.Info("gpu enumerated", "pair", pair, "gpu", gpuID, "host_port", port, "bdf", s.BDF,
			"vendor", s.Vendor, "device", s.Device, "bar0", s.BAR0, "boot0", s.Boot0)
		return nil
	})
}

// unplug removes pair's device from port (kind says how). It does nothing
// when the port holds no device of pair.
func (h *emuHost) unplug(ctx context.Context, port int, pair uint32, kind, reason string) error {
	return h.do(ctx, func() error {
		cur := h.Slots()[port]
		if !h.sw.Occupied(port) || cur.Pair != pair {
			return nil
		}
		h.sw.Unplug(port)
		cur.Present, cur.Removed, cur.Reason = false, kind, reason
		h.setSlot(cur)
		h.log.Info("gpu removed", "pair", pair, "gpu", cur.GPU, "host_port", port, "bdf", cur.BDF, "how", kind, "reason", reason)
		return nil
	})
}

// runnerPath is the fabric path of one pair as the virtual switch sees it:
// TLPs down go into the pair's host-side bridge; what the bridge delivers
// goes up to the downstream port (through the pair's OnTLP, which reads to).
type runnerPath struct {
	s  *sim.Sim
	r  *driver.Runner
	to *atomic.Pointer[pcie.Receiver]
}

func (p *runnerPath) Connect(upstream, _ pcie.Receiver) (down, up pcie.Sender) {
	p.to.Store(&upstream)
	return driver.NewQueuedSender(p.s, p.r), dropSender{}
}

// dropSender stands for the device's own link, which lives on the GPU box.
type dropSender struct{}

func (dropSender) SendTLP(tlp.View)       {}
func (dropSender) Backlog() time.Duration { return 0 }

// post hands a TLP the bridge delivered to the emulated host.
func (h *emuHost) post(to *atomic.Pointer[pcie.Receiver], v tlp.View) {
	dst := to.Load()
	if dst == nil {
		return // not plugged yet: the host has not asked for anything
	}
	b := append([]byte(nil), v...)
	h.clk.Post(func() { (*dst).ReceiveTLP(b) })
}

// vendorNVIDIA is the PCI vendor ID of the emulated GPUs.
const vendorNVIDIA = 0x10de
