package realtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/emu/host"
)

// HostDRAM makes the emulated host's DRAM a nettlp.Memory: the two DRAM
// ranges of the host memory map, [0, host.Mem32Base) and [host.DRAMBase,
// host.Pref64Base); MMIO windows and the MSI range are outside it (a
// NetTLP read there gets UR, a write is dropped). Every access holds the
// clock's world lock, so it lands between two steps of the simulation,
// never inside one. Writes go straight to memory: the host's CPU sees them
// at its next read (a Watch on the word is not woken).
func HostDRAM(h *host.RootComplex, c *Clock) (nettlp.Memory, error) {
	if h == nil || c == nil {
		return nil, fmt.Errorf("%w: HostDRAM needs a root complex and its clock", nettlp.ErrConfig)
	}
	low, err := nettlp.Bounded(h.Mem, 0, host.Mem32Base, c.World())
	if err != nil {
		return nil, err
	}
	high, err := nettlp.Bounded(h.Mem, host.DRAMBase, host.Pref64Base-host.DRAMBase, c.World())
	if err != nil {
		return nil, err
	}
	return hostDRAM{low: low, high: high}, nil
}

type hostDRAM struct{ low, high nettlp.Memory }

func (m hostDRAM) pick(addr uint64) nettlp.Memory {
	if addr < host.Mem32Base {
		return m.low
	}
	return m.high
}

func (m hostDRAM) ReadAt(p []byte, addr uint64) error  { return m.pick(addr).ReadAt(p, addr) }
func (m hostDRAM) WriteAt(p []byte, addr uint64) error { return m.pick(addr).WriteAt(p, addr) }

// NetTLPPort is the emulated host's NetTLP-compatible port: a nettlp.Target
// answering DMA reads and writes into the host's DRAM as a NetTLP adapter
// in that host would, so libtlp and NetTLP devices (or nettlp.Client) can
// read and write the emulated host's memory over UDP.
type NetTLPPort struct {
	// Target is the NetTLP target (its Stats and Transport are live).
	Target *nettlp.Target

	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// ServeNetTLP binds the NetTLP tag ports on cfg.Addr and serves the host's
// DRAM (see HostDRAM) until ctx ends or Close is called. The simulation
// need not be running: accesses take the clock's world lock.
func ServeNetTLP(ctx context.Context, cfg nettlp.TargetConfig, h *host.RootComplex, c *Clock) (*NetTLPPort, error) {
	mem, err := HostDRAM(h, c)
	if err != nil {
		return nil, err
	}
	t, err := nettlp.NewTarget(cfg, mem)
	if err != nil {
		return nil, fmt.Errorf("realtime: host NetTLP port: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &NetTLPPort{Target: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if err := t.Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
			p.mu.Lock()
			p.err = err
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Close stops the port, waits for its sockets to close and returns the
// error that stopped it early, if any.
func (p *NetTLPPort) Close() error {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}
