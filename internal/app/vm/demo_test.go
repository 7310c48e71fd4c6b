package vm

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/dxpu/dxpu/internal/guest"
)

// The VM tests run one after another, not in parallel: each TCG guest
// keeps a CPU core busy, and two of them on a small machine starve the
// bridges they talk through.

// guestConfigDiffers are the config-space DWORDs where the guest's view
// must differ from the GPU model's (see the package doc): the BAR
// registers 0x10-0x20 hold the guest's placement of its one 32-bit BAR0
// window, not the device's own BARs (0x24, BAR5, is zero in both).
var guestConfigDiffers = []string{"0x10", "0x14", "0x18", "0x1c", "0x20"}

// TestDemo: a guest borrows an emulated H100 over a bridge pair on
// loopback UDP: it sees 10de:2330 class 0302 with BAR0 placed, reads the
// config space the GPU model has (apart from the documented differences),
// moves 64 MiB each way byte-identical, and launches and syncs a kernel.
func TestDemo(t *testing.T) {
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := Demo(ctx, DemoOptions{VM: o, Loopback: true})
	b, _ := json.Marshal(res)
	t.Logf("demo: %s", b)
	if err != nil {
		t.Fatal(err)
	}
	checkGuestSawGPU(t, res.PCI, res.GPU)
	if res.Path != "loopback" || res.Switch != nil {
		t.Errorf("path %q with switch counters %+v, want loopback with none", res.Path, res.Switch)
	}
	// QEMU's proxy device is a conventional PCI function: QEMU answers
	// config accesses past 0xff itself (all ones), so Linux reads 256
	// bytes.
	if res.ConfigSize != 256 {
		t.Errorf("the guest read %d bytes of config space, want 256", res.ConfigSize)
	}
	if !slices.Equal(res.ConfigDiff, guestConfigDiffers) {
		t.Errorf("config space differs at %v, want exactly %v", res.ConfigDiff, guestConfigDiffers)
	}
	if !res.H2DOK || !res.D2HOK || !res.LaunchSyncOK || res.Bytes != 64<<20 {
		t.Errorf("h2d %v d2h %v launch %v over %d bytes", res.H2DOK, res.D2HOK, res.LaunchSyncOK, res.Bytes)
	}
	if res.MMIOReadUS <= 0 || res.H2DGbps <= 0 || res.D2HGbps <= 0 || res.BootS <= 0 || res.ResultS < res.BootS {
		t.Errorf("figures missing: %+v", res)
	}
}

// checkGuestSawGPU: the guest lists function bdf as 10de:2330 class 0302
// with a 16 MiB BAR0 its firmware or kernel placed.
func checkGuestSawGPU(t *testing.T, pci []guest.Function, bdf string) {
	t.Helper()
	for _, f := range pci {
		if f.BDF != bdf {
			continue
		}
		if f.Vendor != "10de" || f.Device != "2330" || f.Class != "0302" {
			t.Errorf("the guest sees %s as %s:%s class %s, want 10de:2330 class 0302", bdf, f.Vendor, f.Device, f.Class)
		}
		if len(f.Resources) != 1 || f.Resources[0].BAR != 0 || f.Resources[0].Size != 16<<20 || f.Resources[0].Start == "0x0" || f.Resources[0].IO {
			t.Errorf("resources %+v, want one 16 MiB memory BAR0 placed", f.Resources)
		}
		return
	}
	t.Errorf("the guest lists no %q among %+v", bdf, pci)
}

// TestDemoWithLoss: the same with 1% of the pair's frames lost each way:
// the bridge's retransmission keeps the guest's 64 MiB byte-identical.
func TestDemoWithLoss(t *testing.T) {
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := Demo(ctx, DemoOptions{VM: o, Loss: 0.01, Loopback: true})
	b, _ := json.Marshal(res)
	t.Logf("demo with 1%% loss: %s", b)
	if err != nil {
		t.Fatal(err)
	}
	checkGuestSawGPU(t, res.PCI, res.GPU)
	if !res.H2DOK || !res.D2HOK || !res.LaunchSyncOK || !slices.Equal(res.ConfigDiff, guestConfigDiffers) {
		t.Errorf("h2d %v d2h %v launch %v config diff %v", res.H2DOK, res.D2HOK, res.LaunchSyncOK, res.ConfigDiff)
	}
}
