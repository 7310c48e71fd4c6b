package vm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/vmm"
	"github.com/dxpu/dxpu/bridge/vmm/qemuproxy"
	"github.com/dxpu/dxpu/internal/app/bridged"
	"github.com/dxpu/dxpu/internal/app/units"
	"github.com/dxpu/dxpu/tlp"
)

// ErrLinkDown is a bridge pair that did not come up in time: the function
// is not offered to QEMU (its device_add fails) rather than reading as
// all ones.
var ErrLinkDown = errors.New("vm: bridge link to the GPU side not up")

// RemoteGPU is a GPU behind a GPU-side bridge, lent to the guest through a
// host-side bridge this process runs for it: QEMU's proxy socket goes
// through a qemuproxy.Server and a vmm.Port into the host-side bridge,
// and the bridge's frames go over Transport to the GPU side.
type RemoteGPU struct {
	// Transport carries the pair's frames (UDP, AF_PACKET, fault-injected
	// for tests); Serve closes it when it returns.
	Transport driver.Transport
	// Bridge configures the host-side bridge (Role is set by Serve). The
	// zero value gets timeouts suited to a VMM front (DefaultBridge).
	Bridge bridge.Config
	// Device is the GPU's routing ID (default 03:00.0); BAR0 where its
	// BAR0 is programmed on the GPU side (default 0x9000_0000) and
	// BAR0Size its size (default 16 MiB): the guest sees one 32-bit BAR0
	// window onto it (QEMU's proxy device sizes 32-bit BARs only).
	Device         tlp.ID
	BAR0, BAR0Size uint64
	// CompletionTimeout bounds a guest access (default 2 s); then the
	// guest reads all ones. A read waits behind the device's posted writes
	// (PCIe ordering), so during a long device-to-host copy on a slow path
	// it takes as long as they do; a link that goes down answers at once.
	CompletionTimeout time.Duration
	// LinkUpTimeout bounds the wait for the pair's handshake (default 10 s).
	LinkUpTimeout time.Duration
	Log           *slog.Logger

	mu     sync.Mutex
	port   *vmm.Port
	server *qemuproxy.Server
	// linkDowns counts the pair's link going down while Serve ran.
	linkDowns atomic.Uint64
}

// LinkDowns is how many times the pair's link went down while Serve ran:
// each time the guest's accesses in flight were answered with all ones
// and the device's writes in flight were lost, as a surprise removal
// loses them.
func (g *RemoteGPU) LinkDowns() uint64 { return g.linkDowns.Load() }

// DefaultBridge is the host-side bridge configuration a RemoteGPU uses
// when given none: a link declared dead only after a second of silence
// and completion timeouts long enough for a loaded machine, since a QEMU
// guest on a shared CPU pauses far longer than a NIC.
func DefaultBridge(pair uint32) bridge.Config {
	return bridge.Config{PairID: pair, Keepalive: 20 * time.Millisecond, DeadAfter: time.Second,
		CompletionTimeout: 2 * time.Second, MaxRTO: 200 * time.Millisecond}
}

// guestPort is the vmm.Port that QEMU's proxy device is served through:
// BAR0 at bar0 (default 0x9000_0000) of size bytes (default 16 MiB), a
// guest access bounded by timeout (default 2 s). RemoteGPU and AttachedGPU
// take the same defaults.
func guestPort(dev tlp.ID, bar0, size uint64, timeout time.Duration, ram *vmm.GuestRAM) (*vmm.Port, error) {
	if bar0 == 0 {
		bar0 = 0x9000_0000
	}
	if size == 0 {
		size = 16 << 20
	}
	if timeout == 0 {
		timeout = 2 * time.Second
	}
	return vmm.NewPort(vmm.Config{Device: dev, BARs: [6]vmm.BAR{0: {Size: size, Device: bar0}}, CompletionTimeout: timeout}, ram)
}

// Stats returns the port's and the server's counters once Serve runs.
func (g *RemoteGPU) Stats() (*vmm.Stats, *qemuproxy.ServerStats) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.port == nil {
		return nil, nil
	}
	return g.port.Stats(), g.server.Stats()
}

// Serve runs the host-side bridge and serves conn until QEMU closes it or
// ctx ends; when ctx was cancelled with a cause (the VM saw QEMU die:
// ErrGuestDied) it returns that cause, wrapped.
func (g *RemoteGPU) Serve(ctx context.Context, conn *qemuproxy.Conn) error {
	if g.Transport == nil {
		return fmt.Errorf("%w: RemoteGPU needs a transport", vmm.ErrConfig)
	}
	defer g.Transport.Close()
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := g.Bridge
	if cfg.PairID == 0 {
		return fmt.Errorf("%w: RemoteGPU needs a bridge pair ID", vmm.ErrConfig)
	}
	if cfg.DeadAfter == 0 {
		cfg = DefaultBridge(cfg.PairID)
	}
	cfg.Role = bridge.RoleHost
	b, err := bridge.New(cfg)
	if err != nil {
		return err
	}
	r := driver.New(b, g.Transport)
	ram := &vmm.GuestRAM{}
	defer ram.Close()
	port, err := guestPort(g.Device, g.BAR0, g.BAR0Size, g.CompletionTimeout, ram)
	if err != nil {
		return err
	}
	srv, err := qemuproxy.NewServer(conn, port, ram, r, log)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.port, g.server = port, srv
	g.mu.Unlock()
	up := make(chan struct{}, 1)
	r.OnLate = bridged.NewLateLog(log).For("pair", cfg.PairID)
	serverEvent := r.OnEvent
	r.OnEvent = func(e bridge.Event) {
		serverEvent(e)
		log.Info("vm: bridge event", "pair", cfg.PairID, "event", e)
		if e.Kind == bridge.EventLinkDown {
			g.linkDowns.Add(1)
		}
		if e.Kind == bridge.EventLinkUp {
			select {
			case up <- struct{}{}:
			default:
			}
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	go func() { runDone <- r.Run(ctx) }()
	// A peer sealing under another key generation is logged (the link
	// would just never come up otherwise).
	watched := make(chan struct{})
	go func() {
		bridged.NewKeyGenerationWatch(log.With("pair", cfg.PairID, "role", bridge.RoleHost), nil).Run(ctx, r)
		close(watched)
	}()
	defer func() { cancel(); <-runDone; <-watched }()
	wait := g.LinkUpTimeout
	if wait == 0 {
		wait = 10 * time.Second
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
		s, _ := r.KeyState()
		if why := bridged.Mismatch(r.Counters(), s); why != "" {
			return units.Errorf("%w within %v (pair %d): %s", ErrLinkDown, wait, cfg.PairID, why)
		}
		return units.Errorf("%w within %v (pair %d)", ErrLinkDown, wait, cfg.PairID)
	case <-ctx.Done():
		return nil
	case err := <-runDone:
		runDone <- err
		return fmt.Errorf("vm: host-side bridge stopped: %w", err)
	}
	return srv.Run(ctx)
}
