package bridgeagent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/internal/app/vm"
	"github.com/dxpu/dxpu/tlp"
)

// Guest limits of the VM host.
const (
	// maxGuestSlots: on q35 each hot-plug slot is a pcie-root-port that
	// reserves 64 MiB of the 32-bit MMIO window (about 1 GiB below 4 GiB),
	// so a guest takes GPUs on host ports 0..7 of its registered ports.
	maxGuestSlots = 8
	// guestBootTimeout bounds the boot, up to the guest tool watching (a
	// TCG boot takes about 10 s on a loaded 2-core machine).
	guestBootTimeout = 3 * time.Minute
	// guestShutdownGrace is how long QEMU may take to quit before it is
	// killed.
	guestShutdownGrace = 10 * time.Second
)

// vmHost is the host role's PCIe side when the host is a QEMU guest: the
// agent boots it with no GPU and keeps it up; a pair's hot-add lends its
// GPU as a proxy device on the pair's running bridge (vm.AttachedGPU), and
// returns once the guest's tool has the function enumerated and has read
// its BOOT_0 through the fabric.
type vmHost struct {
	h       *vm.Host
	log     *slog.Logger
	timeout time.Duration // of a guest access

	mu    sync.Mutex
	slots []Slot
}

// GuestStatus is the guest in the agent's status (VM host only).
type GuestStatus struct {
	Accel     string  `json:"accel"`
	BootS     float64 `json:"boot_s"` // QEMU start to the guest's tool watching the bus
	SerialLog string  `json:"serial_log"`
}

func newVMHost(ctx context.Context, o Options) (*vmHost, error) {
	vo := *o.VM
	if vo.Log == nil {
		vo.Log = o.Log
	}
	if vo.Machine == "" || vo.Machine == "q35" {
		vo.HotplugSlots = o.slots()
	}
	h, err := vm.StartHost(ctx, vo, guestBootTimeout)
	if err != nil {
		return nil, fmt.Errorf("host guest: %w", err)
	}
	v := &vmHost{h: h, log: o.Log, timeout: o.CompletionTimeout + time.Second, slots: make([]Slot, o.slots())}
	for i := range v.slots {
		v.slots[i].Port = i
	}
	g := v.guest()
	o.Log.Info("host guest up", "accel", g.Accel, "boot_s", g.BootS, "serial_log", g.SerialLog, "slots", o.slots())
	return v, nil
}

func (v *vmHost) guest() GuestStatus {
	return GuestStatus{Accel: v.h.VM().Accel(), BootS: v.h.BootTime().Seconds(), SerialLog: v.h.VM().SerialLog()}
}

func (v *vmHost) attach(p manager.Pair, r *driver.Runner) (hostSlot, error) {
	m, err := modelOf(p.Model)
	if err != nil {
		return nil, fmt.Errorf("the guest's BAR0 window is sized from the GPU's model: %w", err)
	}
	return &vmSlot{v: v, p: p, id: fmt.Sprintf("pair%d", p.ID),
		gpu: &vm.AttachedGPU{Runner: r, BAR0Size: m.BAR0Size, CompletionTimeout: v.timeout, Log: v.log}}, nil
}

// Slots returns the slots as the guest sees them.
func (v *vmHost) Slots() []Slot {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]Slot(nil), v.slots...)
}

func (v *vmHost) setSlot(s Slot) {
	v.mu.Lock()
	v.slots[s.Port] = s
	v.mu.Unlock()
}

// close powers the guest off: QEMU quits (killed after a grace), every
// proxy server stops, nothing is left running.
func (v *vmHost) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*guestShutdownGrace)
	defer cancel()
	if err := v.h.Shutdown(ctx, guestShutdownGrace); err != nil {
		v.log.Warn("host guest shutdown", "err", err)
		return
	}
	v.log.Info("host guest powered off")
}

// vmSlot is a pair's function in the guest. Its calls run one at a time,
// so a removal never overtakes the hot-add it follows.
type vmSlot struct {
	v   *vmHost
	p   manager.Pair
	id  string // the QEMU device ID
	gpu *vm.AttachedGPU

	mu      sync.Mutex
	present bool
}

func (s *vmSlot) deliver(t tlp.View)   { s.gpu.DeliverTLP(t) }
func (s *vmSlot) event(e bridge.Event) { s.gpu.LinkEvent(e) }
func (s *vmSlot) plug(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.present {
		return nil
	}
	f, err := s.v.h.Lend(ctx, s.id, s.gpu)
	if err != nil {
		return fmt.Errorf("hot-add of pair %d into the guest: %w", s.p.ID, err)
	}
	s.present = true
	sl := Slot{Port: s.p.HostPort, Pair: s.p.ID, GPU: s.p.GPU, Present: true, BDF: f.BDF,
		Vendor: "0x" + f.Vendor, Device: "0x" + f.Device, BAR0: f.BAR0, Boot0: f.Boot0}
	s.v.setSlot(sl)
	s.v.log.Info("gpu enumerated", "pair", s.p.ID, "gpu", s.p.GPU, "host_port", sl.Port, "bdf", sl.BDF,
		"vendor", sl.Vendor, "device", sl.Device, "bar0", sl.BAR0, "boot0", sl.Boot0, "in_guest", "true",
		"seen_ms", f.SeenAfter.Milliseconds())
	return nil
}

func (s *vmSlot) unplug(ctx context.Context, kind, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.present {
		return nil
	}
	t0 := time.Now()
	if err := s.v.h.Take(ctx, s.id); err != nil {
		return fmt.Errorf("removing pair %d from the guest: %w", s.p.ID, err)
	}
	s.present = false
	sl := s.v.Slots()[s.p.HostPort]
	sl.Present, sl.Removed, sl.Reason = false, kind, reason
	s.v.setSlot(sl)
	s.v.log.Info("gpu removed", "pair", s.p.ID, "gpu", s.p.GPU, "host_port", sl.Port, "bdf", sl.BDF, "how", kind,
		"reason", reason, "in_guest", "true", "gone_ms", time.Since(t0).Milliseconds())
	return nil
}
