package demo

import (
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/topo"
)

// TestRegenerateTestdata writes testdata/emu/mlp-train-emu.json.gz, the
// emulator's own profile of the bundled MLP training loop on a native A100,
// when DXPU_UPDATE_TESTDATA=1. Replay tests use it without ../shared.
func TestRegenerateTestdata(t *testing.T) {
	if os.Getenv("DXPU_UPDATE_TESTDATA") != "1" {
		t.Skip("set DXPU_UPDATE_TESTDATA=1 to regenerate")
	}
	w, err := topo.Build(topo.Options{GPUs: 1, Model: gpu.A100SXM, Enum: host.EnumConfig{TenBitTags: true}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := c.Profile()
	p.AttachGPU(0, w.GPUs[0])
	if err := mlpTrain(c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "..", "testdata", "emu", "mlp-train-emu.json.gz")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	if err := p.WriteTrace(zw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
