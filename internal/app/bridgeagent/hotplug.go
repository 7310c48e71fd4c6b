package bridgeagent

import (
	"context"
	"fmt"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/fabric/manager"
)

// The host role's hot-plug calls. Each is idempotent, as the saga needs.

// HotAdd waits for the pair's link (the handshake with the GPU side across
// the switch, as a real slot trains its link before presence detect), then
// plugs the GPU into the host (the emulated host's downstream port, or the
// guest by QMP device_add) and returns once the host has enumerated it.
func (a *Agent) HotAdd(ctx context.Context, p manager.Pair) error {
	if err := a.hostRole(p); err != nil {
		return err
	}
	pr, err := a.pair(p)
	if err != nil {
		return err
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for pr.runner.State() != bridge.StateUp {
		select {
		case <-pr.linkUp:
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("pair %d: link to the GPU bridge not up (state %v): is the GPU side programmed and the switch forwarding? %w",
				p.ID, pr.runner.State(), ctx.Err())
		}
	}
	pr.plugMu.Lock()
	defer pr.plugMu.Unlock()
	if err := pr.slot.plug(ctx); err != nil {
		return err
	}
	pr.downRemoved = false
	return nil
}

// HotRemove is the orderly removal: the device leaves the host, the pair's
// bridge stays until RemovePair.
func (a *Agent) HotRemove(ctx context.Context, p manager.Pair) error {
	return a.remove(ctx, p, RemovedHotRemove, "hot-remove by the manager")
}

// SurpriseRemove tells the host the GPU is gone without warning.
func (a *Agent) SurpriseRemove(ctx context.Context, p manager.Pair) error {
	return a.remove(ctx, p, RemovedSurprise, "surprise removal by the manager")
}

// remove takes the pair's GPU away from the host; a pair not programmed
// has none there.
func (a *Agent) remove(ctx context.Context, p manager.Pair, kind, reason string) error {
	if err := a.hostRole(p); err != nil {
		return err
	}
	pr, err := a.pair(p)
	if err != nil {
		return nil
	}
	// The manager's removal stands: no link-up plugs the GPU back.
	pr.plugMu.Lock()
	defer pr.plugMu.Unlock()
	pr.downRemoved = false
	return pr.slot.unplug(ctx, kind, reason)
}

// hostRole refuses hot-plug calls on a GPU box's agent, and ports the
// host does not have.
func (a *Agent) hostRole(p manager.Pair) error {
	if a.host == nil {
		return fmt.Errorf("pair %d: hot-plug calls go to the host's agent, this is a GPU box's: %w", p.ID, ErrWrongBridge)
	}
	if p.HostPort < 0 || p.HostPort >= a.o.slots() {
		return fmt.Errorf("pair %d: host_port %d, this host has ports 0..%d: %w", p.ID, p.HostPort, a.o.slots()-1, ErrWrongBridge)
	}
	return nil
}
