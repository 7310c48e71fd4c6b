package vm

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/dxpu/dxpu/internal/privtest"
)

// TestDemoNetnsXDP: the demo as `dxpu vm demo` runs it as root: the pair
// crosses the XDP switch between network namespaces (labnet), here with 1%
// of the frames lost in code on the bridges' transports, and the result
// says so (path netns-xdp) with the switch's counts of the copies' bytes.
func TestDemoNetnsXDP(t *testing.T) {
	privtest.Root(t)
	privtest.BPF(t)
	privtest.NetNS(t)
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const size = 16 << 20
	res, err := Demo(ctx, DemoOptions{VM: o, Bytes: size, Loss: 0.01})
	b, _ := json.Marshal(res)
	t.Logf("demo through labnet's XDP switch, 1%% loss in code: %s", b)
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "netns-xdp" {
		t.Errorf("path %q, want netns-xdp (root)", res.Path)
	}
	checkGuestSawGPU(t, res.PCI, res.GPU)
	if !res.H2DOK || !res.D2HOK || !res.LaunchSyncOK || res.Bytes != size || !slices.Equal(res.ConfigDiff, guestConfigDiffers) {
		t.Errorf("h2d %v d2h %v launch %v over %d bytes, config diff %v", res.H2DOK, res.D2HOK, res.LaunchSyncOK, res.Bytes, res.ConfigDiff)
	}
	if s := res.Switch; s == nil || s.ToGPUBytes < size || s.ToHostBytes < size || s.ToGPUFrames == 0 || s.ToHostFrames == 0 {
		t.Errorf("switch counters %+v, want %d bytes or more each way", s, size)
	}
}
