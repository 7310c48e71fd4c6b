package vm

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dxpu/dxpu/internal/guest"
)

// TestDemoWriteText: vm demo's default output is text that names what the
// JSON holds (the GPU it drove, the checks, times in s and us, rates in
// Gbit/s, a differing config DWORD, the switch's counts), not JSON.
func TestDemoWriteText(t *testing.T) {
	t.Parallel()
	r := DemoResult{
		PCI: []guest.Function{{BDF: "0000:00:00.0", Vendor: "8086", Device: "29c0", Class: "060000"},
			{BDF: "0000:01:00.0", Vendor: "10de", Device: "2330", Class: "030200", Resources: []guest.Resource{{BAR: 0, Start: "0xfd000000", Size: 16 << 20}}}},
		GPU: "0000:01:00.0", ConfigDiff: []string{"0x10"}, ConfigSize: 256, H2DOK: true, D2HOK: true,
		Bytes: 64 << 20, SrcCRC32C: "0x1234abcd", VRAMCRC32C: "0x1234abcd", BootS: 1.5, ResultS: 4.25,
		MMIOReadUS: 13.5, H2DGbps: 5.5, D2HGbps: 4.75, Accel: "kvm", Machine: "q35", Path: "loopback UDP",
		Switch: &SwitchFlows{ToGPUFrames: 7, ToGPUBytes: 70000, ToHostFrames: 8, ToHostBytes: 80000},
	}
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Log("\n" + s)
	if strings.Contains(s, "{") {
		t.Errorf("holds JSON")
	}
	for _, want := range []string{"q35 guest under kvm", "0000:01:00.0  10de:2330", "BAR0 0xfd000000 (16M)  <- the GPU it drove",
		"DWORDs at 0x10 differ", "64M", "kernel launch and sync         FAILED", "1.50 s", "13.5 us", "5.50 Gbit/s", "70000 bytes"} {
		if !strings.Contains(s, want) {
			t.Errorf("lacks %q", want)
		}
	}
}

// TestRunWriteText: vm run's text names the GPU the tool drove and its
// figures, and claims no comparison with a GPU model it did not make.
func TestRunWriteText(t *testing.T) {
	t.Parallel()
	rep := guest.Report{GPU: "0000:01:00.0", ConfigSize: 256, Bytes: 1 << 20, H2DOK: true, D2HOK: true, LaunchSyncOK: true,
		MMIOReadUS: guest.Latency{Boot0: 21.5}, H2DGbps: 1.25}
	var out bytes.Buffer
	if err := WriteRunText(&out, rep, Timing{BootS: 2, ResultS: 3}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	t.Log("\n" + s)
	for _, want := range []string{"drove 0000:01:00.0", "the guest reads 256 bytes", "host-to-device copy            ok (1M)", "21.5 us", "1.25 Gbit/s", "2.00 s"} {
		if !strings.Contains(s, want) {
			t.Errorf("lacks %q", want)
		}
	}
	if strings.Contains(s, "model") || strings.Contains(s, "VRAM") {
		t.Errorf("claims a comparison with the GPU model")
	}
}
