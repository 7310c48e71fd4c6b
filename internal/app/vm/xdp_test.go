package vm

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/realtime"
	switching "github.com/dxpu/dxpu/fabric/switching"
)

// demoPair is the pair ID Demo uses.
const demoPair = 1

// TestThroughXDPSwitch runs the guest's checks with the pair's frames
// crossing the XDP switch between network namespaces (switchNet): the
// demo lossless and again with the switch dropping 1% of the pair's frames,
// then a GPU hot-added into a running guest whose pair the switch drops
// while the guest copies, and its hot-removal. The namespaces and the
// switch are built once; the guests run one after another.
func TestThroughXDPSwitch(t *testing.T) {
	n := newSwitchNet(t)
	t.Run("lossless", func(t *testing.T) { testDemoThroughSwitch(t, n, 0) })
	t.Run("loss1pct", func(t *testing.T) { testDemoThroughSwitch(t, n, 0.01) })
	t.Run("HotAddPairRemovedWhileCopying", func(t *testing.T) { testHotAddThroughSwitch(t, n) })
}

// testDemoThroughSwitch: the demo's checks (10de:2330 class 0302 with
// BAR0 placed, config space as the model's apart from the documented
// differences, 64 MiB each way byte-identical, launch and sync), the 64
// MiB each way counted by the XDP program on the pair, and with loss its
// fault drops near the asked rate.
func testDemoThroughSwitch(t *testing.T, n *switchNet, loss float64) {
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := Demo(ctx, DemoOptions{VM: o, Loss: loss, Link: n})
	b, _ := json.Marshal(res)
	t.Logf("demo through the XDP switch, loss %v: %s", loss, b)
	c := n.pairCounters(t, demoPair)
	ctlToGPU, ctlToHost := n.slowControl(t, demoPair)
	if err := n.remove(demoPair); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "netns-xdp" {
		t.Errorf("path %q, want netns-xdp", res.Path)
	}
	checkGuestSawGPU(t, res.PCI, res.GPU)
	if res.ConfigSize != 256 || !slices.Equal(res.ConfigDiff, guestConfigDiffers) {
		t.Errorf("config space: %d bytes, differs at %v, want 256 bytes differing at exactly %v", res.ConfigSize, res.ConfigDiff, guestConfigDiffers)
	}
	if !res.H2DOK || !res.D2HOK || !res.LaunchSyncOK || res.Bytes != 64<<20 {
		t.Errorf("h2d %v d2h %v launch %v over %d bytes", res.H2DOK, res.D2HOK, res.LaunchSyncOK, res.Bytes)
	}
	if res.MMIOReadUS <= 0 || res.H2DGbps <= 0 || res.D2HGbps <= 0 || res.BootS <= 0 || res.ResultS < res.BootS {
		t.Errorf("figures missing: %+v", res)
	}

	// The copies' data crossed the XDP fast path: host-to-device data
	// rides completions to the GPU, device-to-host data its writes to the
	// host. The handshake and keepalives took the slow path.
	toGPU, toHost := c.Bytes[switching.ReasonToGPU], c.Bytes[switching.ReasonToHost]
	t.Logf("XDP pair %d: to GPU %d frames %d bytes, to host %d frames %d bytes, fault drops %d; slow path CONTROL %d/%d",
		demoPair, c.Packets[switching.ReasonToGPU], toGPU, c.Packets[switching.ReasonToHost], toHost,
		c.Packets[switching.ReasonFault], ctlToGPU, ctlToHost)
	if toGPU < 64<<20 || toHost < 64<<20 {
		t.Errorf("the XDP switch forwarded %d bytes to the GPU and %d to the host, want 64 MiB or more each way", toGPU, toHost)
	}
	if ctlToGPU == 0 || ctlToHost == 0 {
		t.Errorf("the slow path forwarded %d/%d CONTROL messages, want some each way", ctlToGPU, ctlToHost)
	}
	faults := c.Packets[switching.ReasonFault]
	seen := faults + c.Packets[switching.ReasonToGPU] + c.Packets[switching.ReasonToHost]
	rate := float64(faults) / float64(max(seen, 1))
	switch {
	case loss == 0 && faults != 0:
		t.Errorf("the switch dropped %d frames with no loss asked", faults)
	case loss > 0 && (rate < loss*0.7 || rate > loss*1.3):
		t.Errorf("the switch dropped %d of %d frames (%.3f%%), want about %.1f%%", faults, seen, 100*rate, 100*loss)
	}
}

// testHotAddThroughSwitch: a GPU whose pair crosses the switch is
// hot-added into a running guest; while the guest copies 64 MiB the pair
// leaves the switch's table. The guest's reads turn all ones, its tool
// reports the error and the guest runs on; the switch counts the host
// bridge's frames as an unknown pair; device_del then removes the
// function (the guest acknowledges it: DEVICE_DELETED).
func testHotAddThroughSwitch(t *testing.T, n *switchNet) {
	const pair = 3
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ht, gt, err := n.Open(pair, 0)
	if err != nil {
		t.Fatal(err)
	}
	emu, err := StartEmulatedGPU(ctx, gt, DefaultBridge(pair), realtime.BridgedGPUConfig{})
	if err != nil {
		ht.Close()
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	ec := emu.Config()
	remote := &RemoteGPU{Transport: ht, Bridge: DefaultBridge(pair), Device: ec.ID, BAR0: ec.BAR0, BAR0Size: ec.GPU.Model.BAR0Size, Log: o.Log}
	o.GuestArgs = []string{"--bytes", "67108864", "--timeout", "30s", "--wait-device", "90s"}
	o.StayUp = true // QEMU stays to confirm the removal
	v, err := Start(ctx, o)
	if err != nil {
		ht.Close()
		t.Fatal(err)
	}
	defer v.Close()
	_, next, err := v.WaitEvent(ctx, 0, "looking")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := v.HotAdd(ctx, "gpu1", remote); err != nil {
		t.Fatal(err)
	}
	found, next, err := v.WaitEvent(ctx, next, "found")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hot-added through the switch: the guest found %v %d ms after device_add", found.Data["bdf"], time.Since(t0).Milliseconds())
	if _, _, err := v.WaitEvent(ctx, next, "copying"); err != nil {
		t.Fatal(err)
	}
	before := n.pairCounters(t, pair)
	if before.Packets[switching.ReasonToGPU] == 0 || before.Packets[switching.ReasonToHost] == 0 {
		t.Errorf("the guest copies but the XDP switch forwarded %d/%d frames of the pair", before.Packets[switching.ReasonToGPU], before.Packets[switching.ReasonToHost])
	}
	unknownBefore := n.portCounters(t, n.topo.SwitchHost.Name).Packets[switching.ReasonUnknownPair]
	if err := n.remove(pair); err != nil {
		t.Fatal(err)
	}
	rep, tm, err := v.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest report after the pair left the switch (at %.1f s): %s", tm.ResultS, rep.Error)
	if !strings.Contains(rep.Error, "all ones") {
		t.Errorf("the tool reported %q, want an all-ones (device gone) error", rep.Error)
	}
	if rep.D2HOK || rep.LaunchSyncOK {
		t.Errorf("work reported done on a GPU whose pair was removed: %+v", rep)
	}
	ps, _ := remote.Stats()
	if ps.Timeouts.Load()+ps.ErrorCompletions.Load() == 0 {
		t.Error("the host-side port answered no access with all ones")
	}
	if u := n.portCounters(t, n.topo.SwitchHost.Name).Packets[switching.ReasonUnknownPair]; u <= unknownBefore {
		t.Errorf("the switch saw no frames of the removed pair on %s (unknown_pair %d, before %d)", n.topo.SwitchHost.Name, u, unknownBefore)
	}
	t1 := time.Now()
	if err := v.HotRemove(ctx, "gpu1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("hot-remove took %v", time.Since(t1))
	if err := v.Shutdown(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}
