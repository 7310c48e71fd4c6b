package realtime_test

import (
	"context"
	"github.com/dxpu/dxpu/bridge/nettlpside"
	"github.com/dxpu/dxpu/emu/realtime"
	"testing"

	"github.com/dxpu/dxpu/bridge/driver"
	"github.com/dxpu/dxpu/bridge/nettlp"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/tlp"
)

// BenchmarkMMIORead measures a libtlp-style 4-byte read, one at a time, on
// loopback: straight to a NetTLP target (the baseline: one UDP round
// trip), and through the bridge pair to a memory device and to the
// emulated GPU's SCRATCH register (NetTLP in, two bridges, UDP fabric, and
// back). The ratio is what the pair adds.
func BenchmarkMMIORead(b *testing.B) {
	privtest.Loopback(b)
	const base = 0x20_0000_0000
	read := func(b *testing.B, c *nettlp.Client, addr uint64) {
		var w [4]byte
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := c.Read(addr, w[:]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("target", func(b *testing.B) {
		n := testNet("127.0.47")
		mem, _ := nettlp.NewSparseMemory(base, 1<<20, nil)
		tg, err := nettlp.NewTarget(nettlp.TargetConfig{Addr: n.addr(1)}, mem)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- tg.Serve(ctx) }()
		defer func() { cancel(); <-done }()
		read(b, dial(b, n, 0), base)
	})
	b.Run("pair-memory", func(b *testing.B) {
		n := testNet("127.0.48")
		mem, _ := nettlp.NewSparseMemory(base, 1<<20, nil)
		startPair(b, n, false, func(r *driver.Runner) (func(context.Context) error, error) {
			d, err := nettlpside.NewMemoryDevice(r, mem, nettlp.CompleterConfig{CompleterID: tlp.NewID(3, 0, 0)})
			if err != nil {
				return nil, err
			}
			return d.Run, nil
		})
		read(b, dial(b, n, 0), base)
	})
	b.Run("pair-emu-gpu", func(b *testing.B) {
		n := testNet("127.0.49")
		var g *realtime.BridgedGPU
		startPair(b, n, false, func(r *driver.Runner) (func(context.Context) error, error) {
			var err error
			g, err = realtime.NewBridgedGPU(r, realtime.BridgedGPUConfig{})
			if err != nil {
				return nil, err
			}
			return g.Run, nil
		})
		read(b, dial(b, n, 0), g.Config().BAR0+gpu.RegScratch)
	})
}
