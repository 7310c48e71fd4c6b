package topo

import (
	"bytes"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/host"
)

// TestBridgePair32GPUs enumerates 32 GPUs, each behind its own pair of real
// dxpu bridges, and reads every config space through them.
func TestBridgePair32GPUs(t *testing.T) {
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
