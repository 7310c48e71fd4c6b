package topo

import (
	"bytes"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
)

// TestBridgePair32GPUs enumerates 32 GPUs, each behind its own pair of real
// dxpu bridges, and reads every config space through them.
func TestBridgePair32GPUs(t *testing.T) {
	t.Parallel()
	f := Fabric{RTT: 4 * time.Microsecond}
	w, err := Build(Options{GPUs: 32, Fabric: &f, Path: BridgePaths(f), Enum: host.EnumConfig{TenBitTags: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range w.Devices {
		got := readConfig(t, w.Host, d.ID)
		if !bytes.Equal(got, w.GPUs[i].ConfigBytes()) {
			t.Fatalf("GPU %d: config space through the bridge pair differs from the model's", i)
		}
	}
	b0, _ := w.Devices[31].BAR(0)
	if v, err := w.Host.MMIORead32(b0.Addr); err != nil || v != w.Opts.Model.Boot0 {
		t.Fatalf("BOOT_0 through the bridge: %#x %v", v, err)
	}
}

// TestBridgePairLossyCopy copies data through a bridge pair that loses 2%
// of its frames: the bridges retransmit, and the GPU and the host see
// every byte exactly once, in order.
func TestBridgePairLossyCopy(t *testing.T) {
	t.Parallel()
	f := Fabric{RTT: 4 * time.Microsecond, Loss: 0.02}
	var paths []*BridgePath
	w, err := Build(Options{GPUs: 1, Fabric: &f, Enum: host.EnumConfig{TenBitTags: true},
		Path: func(s *sim.Sim, i int, g *gpu.GPU) pcie.Path {
			p := BridgePaths(f)(s, i, g).(*BridgePath)
			paths = append(paths, p)
			return p
		}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1 << 20
	src, dst := w.Host.Alloc(n, 4096), w.Host.Alloc(n, 4096)
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*31 + i>>8)
	}
	w.Host.Mem.Write(src, want)
	g := w.GPUs[0]
	done := 0
	// Drive the copy engines directly: host to VRAM, then back.
	g.CopyForTest(gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirH2D, Src: src, Dst: 0, Len: n}, func() {
		g.CopyForTest(gpu.Command{Op: gpu.OpCopy, Dir: gpu.DirD2H, Src: 0, Dst: dst, Len: n}, func() { done++ })
	})
	w.S.RunWhile(func() bool { return done == 0 }, 50_000_000)
	// Posted writes may still be in flight after the engine finished.
	w.S.Run(w.S.Now() + 20*time.Millisecond)
	got := make([]byte, n)
	w.Host.Mem.Read(dst, got)
	if !bytes.Equal(got, want) {
		t.Fatal("data differs after a copy over a lossy bridge pair")
	}
	c := paths[0].Pair.GPU.Bridge.Counters()
	h := paths[0].Pair.Host.Bridge.Counters()
	if c.Retransmits+h.Retransmits == 0 {
		t.Fatal("2% loss caused no retransmission")
	}
	t.Logf("retransmits: host %d gpu %d; lost frames %d+%d", h.Retransmits, c.Retransmits, paths[0].Pair.H2G.Stats.Lost, paths[0].Pair.G2H.Stats.Lost)
}
