package vm

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/realtime"
)

// EmulatedGPU is the far end of a RemoteGPU on this machine: an emulated
// GPU (realtime.BridgedGPU) behind a GPU-side bridge runner, on the wall
// clock.
type EmulatedGPU struct {
	g      *realtime.BridgedGPU
	r      *driver.Runner
	t      driver.Transport
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// StartEmulatedGPU starts the GPU side of pair cfg.PairID on t (closed by
// Stop). A zero gcfg is an H100 with BridgedGPU's default BARs.
func StartEmulatedGPU(ctx context.Context, t driver.Transport, cfg bridge.Config, gcfg realtime.BridgedGPUConfig) (*EmulatedGPU, error) {
	if t == nil {
		return nil, errors.New("vm: StartEmulatedGPU needs a transport")
	}
	if cfg.DeadAfter == 0 {
		cfg = DefaultBridge(cfg.PairID)
	}
	cfg.Role = bridge.RoleGPU
	b, err := bridge.New(cfg)
	if err != nil {
		return nil, err
	}
	r := driver.New(b, t)
	g, err := realtime.NewBridgedGPU(r, gcfg)
	if err != nil {
		return nil, fmt.Errorf("vm: emulated GPU: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &EmulatedGPU{g: g, r: r, t: t, cancel: cancel}
	for _, fn := range []func(context.Context) error{r.Run, g.Run} {
		e.wg.Add(1)
		go func() { defer e.wg.Done(); _ = fn(ctx) }()
	}
	return e, nil
}

// Config returns the GPU's configuration (its BAR addresses, ID).
func (e *EmulatedGPU) Config() realtime.BridgedGPUConfig { return e.g.Config() }

// Do runs fn with the GPU's simulation stopped.
func (e *EmulatedGPU) Do(fn func(g *gpu.GPU)) { e.g.Do(fn) }

// Stop ends the GPU side at once, as a removed or failed GPU: the host side
// sees its completions stop and the link go down.
func (e *EmulatedGPU) Stop() {
	e.once.Do(func() {
		e.cancel()
		e.wg.Wait()
		_ = e.t.Close()
	})
}
