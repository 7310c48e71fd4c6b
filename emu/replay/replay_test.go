package replay

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/topo"
	"github.com/dxpu/dxpu/internal/privtest"
	"github.com/dxpu/dxpu/model"
	"github.com/dxpu/dxpu/model/trace"
)

func loadGraph(t testing.TB, name string) *model.Graph {
	t.Helper()
	w, err := trace.DecodeFile(privtest.SharedFile(t, "traces", name))
	if err != nil {
		t.Fatal(err)
	}
	g, err := model.Build(w)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAlexnetNativeWithin5Percent(t *testing.T) {
	t.Parallel()
	g := loadGraph(t, "alexnet-forward-a100.json.gz")
	res, err := Run(context.Background(), g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	diff := math.Abs(float64(res.Span-g.Baseline)) / float64(g.Baseline)
	t.Logf("alexnet: measured span %v, native replay %v (%.3f%%), %d nodes, %d events", g.Baseline, res.Span, 100*diff, res.Nodes, res.Events)
	if diff > 0.05 {
		t.Fatalf("native replay %v vs measured %v: %.2f%% off, want within 5%%", res.Span, g.Baseline, 100*diff)
	}
	if res.Stats[0].ReadRequests == 0 || res.Stats[0].Kernels == 0 {
		t.Fatalf("replay moved no TLPs: %+v", res.Stats[0])
	}
}

func TestAlexnetFabricCostsMore(t *testing.T) {
	t.Parallel()
	g := loadGraph(t, "alexnet-forward-a100.json.gz")
	nat, err := Run(context.Background(), g, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fab, err := Run(context.Background(), g, Options{Fabric: &topo.Fabric{RTT: 20 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("native %v fabric %v (+%.2f%%)", nat.Span, fab.Span, 100*(float64(fab.Span)/float64(nat.Span)-1))
	if fab.Span <= nat.Span {
		t.Fatalf("fabric %v not slower than native %v", fab.Span, nat.Span)
	}
}

// TestSharedTracesNative replays every shared trace natively: each within
// 5% of its measured span.
func TestSharedTracesNative(t *testing.T) {
	t.Parallel()
	privtest.Short(t, "replays every shared trace")
	for _, name := range []string{"cnn-train-v100.json.gz", "event-sync-multistream.json.gz", "recsys-adagrad-a100.json.gz", "recsys-ddp-a100-rank0.json.gz"} {
		g := loadGraph(t, name)
		res, err := Run(context.Background(), g, Options{})
		if err != nil {
			t.Fatal(name, err)
		}
		diff := math.Abs(float64(res.Span-g.Baseline)) / float64(g.Baseline)
		t.Logf("%s: measured %v, native replay %v (%.2f%%), %d nodes, %d events", name, g.Baseline, res.Span, 100*diff, res.Nodes, res.Events)
		if diff > 0.05 {
			t.Errorf("%s: native replay %.2f%% off", name, 100*diff)
		}
	}
}

// TestBundledTestdataTrace replays the emulator's own profile of a training
// loop (testdata/emu, no ../shared needed): natively within 5% of its
// span, and slower over the fabric.
func TestBundledTestdataTrace(t *testing.T) {
	t.Parallel()
	w, err := trace.DecodeFile(filepath.Join("..", "..", "testdata", "emu", "mlp-train-emu.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := model.Build(w)
	if err != nil {
		t.Fatal(err)
	}
	nat, err := Run(context.Background(), g, Options{TenBitTags: true})
	if err != nil {
		t.Fatal(err)
	}
	fab, err := Run(context.Background(), g, Options{TenBitTags: true, Fabric: &topo.Fabric{RTT: 5 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	diff := math.Abs(float64(nat.Span-g.Baseline)) / float64(g.Baseline)
	t.Logf("measured %v native replay %v (%.2f%%) fabric %v", g.Baseline, nat.Span, 100*diff, fab.Span)
	if diff > 0.05 || fab.Span <= nat.Span {
		t.Fatalf("native %v (%.2f%% off) fabric %v", nat.Span, 100*diff, fab.Span)
	}
}
