package demo

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/replay"
	"github.com/dxpu/dxpu/emu/topo"
)

// TestProfiledWorkloadsReplay closes the loop between the two ways the
// emulator runs work: a bundled workload run through the driver API is
// profiled, the profile is read by the model's trace decoder and graph
// builder, and replaying that graph reproduces the run natively and comes
// close to the direct run over the fabric.
func TestProfiledWorkloadsReplay(t *testing.T) {
	f := topo.Fabric{RTT: 5 * time.Microsecond}
	for _, b := range BundledWorkloads() {
		if b.GPUs > 1 {
			continue // the profiler records one CPU thread; multi-GPU replay is checked elsewhere
		}
		run := func(fab *topo.Fabric, profile bool) (time.Duration, *cuda.Profiler) {
			w, err := topo.Build(topo.Options{GPUs: 1, Model: gpu.A100SXM, Fabric: fab, Enum: host.EnumConfig{TenBitTags: true},
				GPU: gpu.Config{MaxSimBytes: 1 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var p *cuda.Profiler
			if profile {
				p = c.Profile()
				p.AttachGPU(0, w.GPUs[0])
			}
			t0 := c.Now()
			if err := b.Run(c); err != nil {
				t.Fatal(err)
			}
			return c.Now() - t0, p
		}
		native, prof := run(nil, true)
		fabric, _ := run(&f, false)
		g, err := ProfileGraph(prof, b.Name)
		if err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(float64(g.Baseline-native)) / float64(native); d > 0.01 {
			t.Errorf("%s: profile spans %v, the run took %v", b.Name, g.Baseline, native)
		}
		rn, err := replay.Run(context.Background(), g, replay.Options{TenBitTags: true})
		if err != nil {
			t.Fatal(err)
		}
		rf, err := replay.Run(context.Background(), g, replay.Options{TenBitTags: true, Fabric: &f})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: run native %v fabric %v (+%.1f%%); replay of its profile native %v fabric %v (+%.1f%%); %d events",
			b.Name, native, fabric, 100*(float64(fabric)/float64(native)-1), rn.Span, rf.Span, 100*(float64(rf.Span)/float64(rn.Span)-1), prof.Events())
		if d := math.Abs(float64(rn.Span-native)) / float64(native); d > 0.05 {
			t.Errorf("%s: native replay of the profile %v vs the run %v: %.1f%% off", b.Name, rn.Span, native, 100*d)
		}
		runPct := 100 * (float64(fabric)/float64(native) - 1)
		repPct := 100 * (float64(rf.Span)/float64(rn.Span) - 1)
		if math.Abs(runPct-repPct) > 0.25*math.Max(runPct, 4) {
			t.Errorf("%s: fabric overhead %.1f%% when run, %.1f%% when its profile is replayed", b.Name, runPct, repPct)
		}
	}
}
