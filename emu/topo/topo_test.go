package topo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

func TestNativeEnumeration(t *testing.T) {
	t.Parallel()
	w, err := Build(Options{GPUs: 2, Model: gpu.A100SXM})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range w.Devices {
		if d.Vendor != 0x10de || d.DeviceID != 0x20b0 || d.Class != 0x030200 {
			t.Fatalf("device %d: %04x:%04x class %06x", i, d.Vendor, d.DeviceID, d.Class)
		}
		b1, _ := d.BAR(1)
		if b1.Size != 64<<30 || !b1.Is64 || !b1.Prefetch {
			t.Fatalf("device %d BAR1 %+v", i, b1)
		}
		b0, _ := d.BAR(0)
		if b0.Size != 16<<20 || b0.Addr == 0 {
			t.Fatalf("device %d BAR0 %+v", i, b0)
		}
		boot, err := w.Host.MMIORead32(b0.Addr)
		if err != nil || boot != gpu.A100SXM.Boot0 {
			t.Fatalf("device %d BOOT_0 = %#x, %v", i, boot, err)
		}
		if w.GPUs[i].ID() != d.ID {
			t.Fatalf("GPU %d captured ID %v, host says %v", i, w.GPUs[i].ID(), d.ID)
		}
	}
}

// readConfig reads a function's whole 4 KiB config space DW by DW.
func readConfig(t *testing.T, rc *host.RootComplex, id tlp.ID) []byte {
	t.Helper()
	out := make([]byte, 4096)
	for off := 0; off < 4096; off += 4 {
		v, err := rc.CfgRead32(id, uint16(off))
		if err != nil {
			t.Fatalf("config read %v+%#x: %v", id, off, err)
		}
		binary.LittleEndian.PutUint32(out[off:], v)
	}
	return out
}

func TestFabric32GPUsConfigIdentical(t *testing.T) {
	t.Parallel()
	w, err := Build(Options{GPUs: 32, Fabric: &Fabric{RTT: 5 * time.Microsecond}, Enum: host.EnumConfig{TenBitTags: true}})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Devices) != 32 {
		t.Fatalf("found %d GPUs", len(w.Devices))
	}
	seen := map[tlp.ID]bool{}
	for i, d := range w.Devices {
		if seen[d.ID] {
			t.Fatalf("duplicate ID %v", d.ID)
		}
		seen[d.ID] = true
		got := readConfig(t, w.Host, d.ID)
		want := w.GPUs[i].ConfigBytes()
		if !bytes.Equal(got, want) {
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("GPU %d (%v): config byte %#x: fabric %#02x, model %#02x", i, d.ID, j, got[j], want[j])
				}
			}
		}
		// BARs do not overlap and sit in the slot windows.
		b1, _ := d.BAR(1)
		if !w.Switch.DSPs[i].ClaimsAddress(b1.Addr) || !w.Switch.DSPs[i].ClaimsAddress(b1.Addr+b1.Size-1) {
			t.Fatalf("GPU %d BAR1 %#x+%#x outside its port's window", i, b1.Addr, b1.Size)
		}
		if d.Slot != i+1 {
			t.Fatalf("GPU %d in slot %d", i, d.Slot)
		}
	}
	// MPS, MRRS and 10-bit tags were programmed in the GPU's own config.
	ctl := w.GPUs[0].Cfg.Get16(gpu.CapPCIeOff + gpu.PCIeDevCtl)
	if mps := 128 << (ctl >> 5 & 7); mps != 256 {
		t.Fatalf("MPS %d", mps)
	}
	if w.GPUs[0].Cfg.Get16(gpu.CapPCIeOff+gpu.PCIeDevCtl2)&gpu.DevCtl2TenBitTagEn == 0 {
		t.Fatal("10-bit tags not enabled")
	}
}

func TestHotAddAndSurpriseRemove(t *testing.T) {
	t.Parallel()
	w, err := Build(Options{GPUs: 2, Fabric: &Fabric{RTT: 2 * time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	var removed []*host.Device
	w.Host.OnRemove = func(d *host.Device) { removed = append(removed, d) }
	g, d, err := w.HotAdd(5)
	if err != nil {
		t.Fatal(err)
	}
	b0, _ := d.BAR(0)
	if v, err := w.Host.MMIORead32(b0.Addr); err != nil || v != g.Model().Boot0 {
		t.Fatalf("hot-added GPU BOOT_0 %#x %v", v, err)
	}
	if _, _, err := w.HotAdd(5); err == nil {
		t.Fatal("hot-add into an occupied port succeeded")
	}
	if err := w.SurpriseRemove(5); err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 || removed[0] != d || d.Present {
		t.Fatalf("removal not reported: %v", removed)
	}
	if _, err := w.Host.MMIORead32(b0.Addr); !errors.Is(err, host.ErrUR) {
		t.Fatalf("read of removed GPU: %v, want UR", err)
	}
	if v, err := w.Host.CfgRead32(d.ID, 0); err == nil {
		t.Fatalf("config read of removed GPU returned %#x", v)
	}
	// The others are untouched.
	b0, _ = w.Devices[0].BAR(0)
	if _, err := w.Host.MMIORead32(b0.Addr); err != nil {
		t.Fatal(err)
	}
}

// TestGPUSimNeedsAPath: GPUs on a simulator of their own are joined to the
// host only by a path the caller gives; without one (or without a fabric)
// Build refuses, instead of wiring a link between two simulators.
func TestGPUSimNeedsAPath(t *testing.T) {
	other := func(int) *sim.Sim { return sim.New(2) }
	for name, o := range map[string]Options{
		"native":         {GPUs: 1, GPUSim: other},
		"no fabric path": {GPUs: 1, GPUSim: other, Fabric: &Fabric{}},
	} {
		if _, err := Build(o); err == nil || !strings.Contains(err.Error(), "Options.Path") {
			t.Errorf("%s: %v, want a refusal naming Options.Path", name, err)
		}
	}
}
