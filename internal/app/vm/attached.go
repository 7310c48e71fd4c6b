package vm

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/vmm"
	"github.com/dxpu/dxpu/bridge/vmm/qemuproxy"
	"github.com/dxpu/dxpu/tlp"
)

// AttachedGPU is a GPU whose host-side bridge runs outside the guest's
// lending: a bridge agent's pair, programmed before the hot-add and kept
// until the manager removes it, on the agent's shared socket and with the
// manager's pair key. Serve joins QEMU's proxy socket to that running
// bridge; the bridge's owner keeps the runner's hooks and passes the
// pair's TLPs and events on with DeliverTLP and LinkEvent.
type AttachedGPU struct {
	// Runner is the pair's host-side bridge, running.
	Runner *driver.Runner
	// Device, BAR0, BAR0Size and CompletionTimeout as in RemoteGPU.
	Device            tlp.ID
	BAR0, BAR0Size    uint64
	CompletionTimeout time.Duration
	Log               *slog.Logger

	srv  atomic.Pointer[qemuproxy.Server]
	port atomic.Pointer[vmm.Port]
}

// Serve serves conn through a vmm.Port into the runner until QEMU closes
// it or ctx ends.
func (g *AttachedGPU) Serve(ctx context.Context, conn *qemuproxy.Conn) error {
	if g.Runner == nil {
		return fmt.Errorf("%w: AttachedGPU needs the pair's runner", vmm.ErrConfig)
	}
	ram := &vmm.GuestRAM{}
	defer ram.Close()
	port, err := guestPort(g.Device, g.BAR0, g.BAR0Size, g.CompletionTimeout, ram)
	if err != nil {
		return err
	}
	srv, err := qemuproxy.NewAttachedServer(conn, port, ram, g.Runner, g.Log)
	if err != nil {
		return err
	}
	g.port.Store(port)
	g.srv.Store(srv)
	defer g.srv.Store(nil)
	if g.Runner.State() != bridge.StateUp {
		// As RemoteGPU: a function whose link is down is not offered (QEMU's
		// device_add fails when the socket closes).
		return fmt.Errorf("%w (state %v)", ErrLinkDown, g.Runner.State())
	}
	return srv.Run(ctx)
}

// DeliverTLP hands a TLP the pair's bridge received to the guest's
// function (the runner's OnTLP; it does not block). Without a guest
// function it is dropped: nothing there asked for it.
func (g *AttachedGPU) DeliverTLP(v tlp.View) {
	if s := g.srv.Load(); s != nil {
		s.HandleTLP(v)
	}
}

// LinkEvent passes a bridge event on (the runner's OnEvent): a link down
// answers the guest's access in flight with all ones.
func (g *AttachedGPU) LinkEvent(e bridge.Event) {
	if s := g.srv.Load(); s != nil {
		s.HandleEvent(e)
	}
}

// Stats returns the port's counters once Serve ran (nil before).
func (g *AttachedGPU) Stats() *vmm.Stats {
	if p := g.port.Load(); p != nil {
		return p.Stats()
	}
	return nil
}
