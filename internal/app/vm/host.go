package vm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNotSeen is a hot-added function the guest did not report, or
// reported without being able to read it.
var ErrNotSeen = errors.New("vm: the guest did not see the hot-added function")

// ErrHostLost is a host guest that can no longer take GPUs: its tool
// stopped watching the bus, or QEMU ended.
var ErrHostLost = errors.New("vm: the host guest is lost")

// Host is a guest that stays up as a host under the manager: it boots
// with no GPU, its tool watching the PCI bus (dxpu-guest run --watch), and
// GPUs are lent to it and taken away by hot-plug. Lend returns once the
// guest has the function enumerated and has read its BOOT_0 through the
// fabric, Take once the guest saw it go. Hot-plugs run one at a time, so
// the guest's next event after a device_add or device_del is about that
// device.
type Host struct {
	v      *VM
	life   context.Context // the guest's: its GPU servers run under it
	cancel context.CancelFunc
	boot   time.Duration

	mu   sync.Mutex // one hot-plug at a time
	seen map[string]Function
}

// Function is a lent function as the guest reported it.
type Function struct {
	BDF    string `json:"bdf"`
	Vendor string `json:"vendor"` // hex without 0x, as lspci -nn
	Device string `json:"device"`
	Class  string `json:"class"`
	BAR0   string `json:"bar0,omitempty"`  // where the guest placed it
	Boot0  string `json:"boot0,omitempty"` // read by the guest (vendor 10de)
	// SeenAfter is the time from device_add to the guest's report.
	SeenAfter time.Duration `json:"-"`
}

// StartHost boots the guest described by o (its GPUs and guest arguments
// are replaced: none at boot, the tool watching) and waits up to boot for
// its tool to watch the bus; ctx bounds only that. The guest then runs
// until Shutdown: a host outlives the request that started it, and its
// owner powers it off in order (QEMU dies with this process regardless:
// its parent-death signal).
func StartHost(ctx context.Context, o Options, boot time.Duration) (*Host, error) {
	o.GPUs, o.GuestArgs, o.StayUp = nil, []string{"--watch"}, true
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	v, err := Start(life, o)
	if err != nil {
		cancel()
		return nil, err
	}
	bctx, bcancel := context.WithTimeout(ctx, boot)
	defer bcancel()
	ev, _, err := watchEvent(bctx, v, 0, "watching")
	if err != nil {
		v.Close()
		cancel()
		return nil, fmt.Errorf("vm: the guest's tool never watched the bus: %w %s", err, v.logRef())
	}
	return &Host{v: v, life: life, cancel: cancel, boot: ev.At, seen: map[string]Function{}}, nil
}

// BootTime is the time from QEMU's start to the guest's tool watching.
func (h *Host) BootTime() time.Duration { return h.boot }

// VM is the running guest.
func (h *Host) VM() *VM { return h.v }

// Lend hot-adds g as function id and waits for the guest to report it.
// Lending an id the guest has already seen returns what it saw.
func (h *Host) Lend(ctx context.Context, id string, g GPU) (Function, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f, ok := h.seen[id]; ok {
		return f, nil
	}
	from := h.v.eventCount()
	t0 := time.Now()
	// The function's server runs under the guest's life, not the
	// request's; device_add itself returns once QEMU has realized the
	// device, which the server answers at once or refuses (link down).
	if err := h.v.HotAdd(h.life, id, g); err != nil {
		return Function{}, err
	}
	ev, _, err := watchEvent(ctx, h.v, from, "added")
	f := Function{SeenAfter: time.Since(t0)}
	if err == nil {
		for k, dst := range map[string]*string{"bdf": &f.BDF, "vendor": &f.Vendor, "device": &f.Device, "class": &f.Class, "bar0": &f.BAR0, "boot0": &f.Boot0} {
			*dst, _ = ev.Data[k].(string)
		}
		if msg, _ := ev.Data["error"].(string); msg != "" {
			err = fmt.Errorf("%w: %s: %s", ErrNotSeen, f.BDF, msg)
		}
	}
	if err != nil {
		// Take it back: a function the guest cannot use is not lent.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if rerr := h.v.HotRemove(rctx, id); rerr != nil {
			err = fmt.Errorf("%w (and removing it again: %v)", err, rerr)
		}
		return Function{}, fmt.Errorf("vm: %s: %w", id, err)
	}
	h.seen[id] = f
	return f, nil
}

// Take hot-removes function id (device_del) and waits for the guest to
// see it go. Taking an id that is not lent does nothing.
func (h *Host) Take(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.v.mu.Lock()
	_, lent := h.v.lent[id]
	h.v.mu.Unlock()
	if !lent {
		delete(h.seen, id)
		return nil
	}
	f, seen := h.seen[id]
	from := h.v.eventCount()
	if err := h.v.HotRemove(ctx, id); err != nil {
		return err
	}
	delete(h.seen, id)
	for seen {
		ev, next, err := watchEvent(ctx, h.v, from, "removed")
		if err != nil {
			return fmt.Errorf("vm: %s deleted; the guest did not report %s gone: %w", id, f.BDF, err)
		}
		if ev.Data["bdf"] == f.BDF {
			break
		}
		from = next
	}
	return nil
}

// Shutdown ends the guest: QMP quit (QEMU stops the guest and exits),
// killed after grace; every GPU server stops and the files go.
func (h *Host) Shutdown(ctx context.Context, grace time.Duration) error {
	err := h.v.Shutdown(ctx, grace)
	h.v.Close()
	h.cancel()
	return err
}

// Lost waits until the guest can no longer take GPUs and says why (an
// error wrapping ErrHostLost, with the serial log's path): its tool exited
// (it prints DXPU-EXIT), QEMU ended on its own, or QEMU reported an error
// after which the guest runs no more. It returns ctx's error when ctx ends
// first; a Shutdown also ends it.
func (h *Host) Lost(ctx context.Context) error {
	exit := -1
	err := h.v.con.waitFor(ctx, "the guest's tool exited", func() bool {
		exit = h.v.con.exit
		return exit >= 0
	})
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case h.life.Err() != nil:
		return fmt.Errorf("%w: shut down", ErrHostLost)
	case err == nil:
		return fmt.Errorf("%w: its tool exited with status %d %s", ErrHostLost, exit, h.v.logRef())
	}
	// The console closes as QEMU exits; its Wait says how.
	select {
	case <-h.v.exited:
		if h.v.died != nil {
			err = h.v.died
		}
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Second):
	}
	return fmt.Errorf("%w: %w %s", ErrHostLost, err, h.v.logRef())
}

// watchEvent waits for the watcher's event named name from index from on,
// as VM.WaitEvent does for the run mode, and fails once the watcher exited
// (it prints no report).
func watchEvent(ctx context.Context, v *VM, from int, name string) (GuestEvent, int, error) {
	var ev GuestEvent
	next, exit := from, -1
	err := v.con.waitFor(ctx, "guest event "+name, func() bool {
		for i := from; i < len(v.con.events); i++ {
			if v.con.events[i].Name == name {
				ev, next = v.con.events[i], i+1
				return true
			}
		}
		exit = v.con.exit
		return exit >= 0
	})
	if err == nil && exit >= 0 {
		err = fmt.Errorf("vm: the guest's watcher exited (status %d) before event %s %s", exit, name, v.logRef())
	}
	return ev, next, err
}

// eventCount is the number of guest tool events so far: a later wait from
// there sees only what comes next.
func (v *VM) eventCount() int {
	v.con.mu.Lock()
	defer v.con.mu.Unlock()
	return len(v.con.events)
}
