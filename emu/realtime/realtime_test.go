package realtime

import (
	"bytes"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/sim"
)

// TestWallClockOverUDP runs the same host, GPU and driver code on the wall
// clock with the fabric a pair of real bridges over UDP loopback: the GPU
// enumerates with its config space intact, data copied in and out comes
// back equal, and a kernel launch completes.
func TestWallClockOverUDP(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		tune     func(*UDPPath)
		wantPoll bool
	}{
		{"defaults", func(*UDPPath) {}, true},
		{"no-busy-poll", func(p *UDPPath) { p.NoBusyPoll = true }, false},
		{"no-batch", func(p *UDPPath) { p.NoBatch = true }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p := wallClockOverUDP(t, c.tune)
			polled := p.Runner(bridge.RoleHost).Polled() + p.Runner(bridge.RoleGPU).Polled()
			if c.wantPoll && polled == 0 {
				t.Error("busy polling on, but the clock took no frame")
			}
			if !c.wantPoll && polled != 0 {
				t.Errorf("busy polling off, but the clock took %d frames", polled)
			}
		})
	}
}

func wallClockOverUDP(t *testing.T, tune func(*UDPPath)) *UDPPath {
	s := sim.New(1)
	clk := New(s)
	var paths []*UDPPath
	w, err := topo.Build(topo.Options{Sim: s, Driver: clk, GPUs: 1, Fabric: &topo.Fabric{},
		Enum: host.EnumConfig{TenBitTags: true},
		// Wall time on a loaded machine: allow slow answers.
		Host: host.Config{CompletionTimeout: 5 * time.Second},
		Path: func(s *sim.Sim, i int, _ *gpu.GPU) pcie.Path {
			p := &UDPPath{Clock: clk, PairID: uint32(i + 1)}
			tune(p)
			paths = append(paths, p)
			return p
		}})
	t.Cleanup(func() {
		for _, p := range paths {
			p.Close()
		}
	})
	if err != nil {
		for _, p := range paths {
			t.Logf("path error: %v", p.Err())
		}
		t.Fatal(err)
	}
	if !paths[0].Up() {
		t.Fatal("bridges not up after enumeration")
	}
	d := w.Devices[0]
	for off := uint16(0); off < 0x100; off += 4 {
		v, err := w.Host.CfgRead32(d.ID, off)
		if err != nil {
			t.Fatal(err)
		}
		if want := w.GPUs[0].Cfg.Read32(off); v != want {
			t.Fatalf("config %#x over UDP: %#x, model %#x", off, v, want)
		}
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		t.Fatal(err)
	}
	const n = 256 << 10
	src, dst := c.MallocHost(n), c.MallocHost(n)
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*13 + 7)
	}
	w.Host.Mem.Write(src, want)
	v := c.Devices[0].Malloc(n)
	t0 := time.Now()
	if err := c.MemcpyHtoD(st, v, src, n); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(st, dst, v, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	w.Host.Mem.Read(dst, got)
	if !bytes.Equal(got, want) {
		t.Fatal("data differs after a round trip over UDP")
	}
	t1 := time.Now()
	if err := c.Launch(st, 100*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(st); err != nil {
		t.Fatal(err)
	}
	mmioStart := time.Now()
	if _, err := c.ReadRegister(c.Devices[0], gpu.RegScratch); err != nil {
		t.Fatal(err)
	}
	t.Logf("wall clock over UDP loopback: 2x256 KiB copies %v, launch+sync of a 100us kernel %v, MMIO read %v",
		t1.Sub(t0), mmioStart.Sub(t1), time.Since(mmioStart))
	return paths[0]
}
