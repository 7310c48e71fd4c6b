package bridgeagent

import (
	"context"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/fabric/manager"
	"github.com/dxpu/dxpu/tlp"
)

// hostSide is a host agent's PCIe side, where lent GPUs appear: the
// emulated host (emuHost) or a QEMU guest (vmHost). The saga's calls go
// through it and do not care which.
type hostSide interface {
	// attach gives pair p, whose host-side bridge is r (not running yet),
	// its place on the host; the GPU is not plugged.
	attach(p manager.Pair, r *driver.Runner) (hostSlot, error)
	// Slots returns the ports as the host sees them.
	Slots() []Slot
	// close ends the host once every pair stopped.
	close()
}

// hostSlot is one pair's place on the host.
type hostSlot interface {
	// deliver and event are the pair runner's OnTLP and OnEvent: they run
	// with the runner's lock held and must not block.
	deliver(v tlp.View)
	event(e bridge.Event)
	// plug makes the GPU appear and returns once the host has it
	// enumerated and has read its BOOT_0 through the fabric; plugging a
	// plugged pair does nothing.
	plug(ctx context.Context) error
	// unplug takes the GPU away (kind RemovedHotRemove or
	// RemovedSurprise, reason for the status); nothing when it is not
	// there.
	unplug(ctx context.Context, kind, reason string) error
}
