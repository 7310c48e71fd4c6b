package vm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/realtime"
)

// lendPair starts an emulated H100 behind a GPU-side bridge and returns it
// with the RemoteGPU that reaches it over loopback UDP.
func lendPair(t *testing.T, ctx context.Context, pair uint32, o Options) (*RemoteGPU, *EmulatedGPU) {
	t.Helper()
	ht, gt, err := loopbackPair(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	emu, err := StartEmulatedGPU(ctx, gt, DefaultBridge(pair), realtime.BridgedGPUConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Stop)
	c := emu.Config()
	return &RemoteGPU{Transport: ht, Bridge: DefaultBridge(pair), Device: c.ID, BAR0: c.BAR0, BAR0Size: c.GPU.Model.BAR0Size, Log: o.Log}, emu
}

// TestPairRemovedWhileCopying: the GPU side vanishes while the guest
// copies 64 MiB: the guest's MMIO reads get all ones, the tool reports an
// error, and the guest goes on to power off (no vCPU hangs).
func TestPairRemovedWhileCopying(t *testing.T) {
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	remote, emu := lendPair(t, ctx, 2, o)
	o.GPUs = []GPU{remote}
	o.GuestArgs = []string{"--bytes", "67108864", "--timeout", "30s"}
	v, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, _, err := v.WaitEvent(ctx, 0, "copying"); err != nil {
		t.Fatal(err)
	}
	emu.Stop()
	rep, tm, err := v.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest report after removal (at %.1f s): %s", tm.ResultS, rep.Error)
	if rep.Error == "" || !strings.Contains(rep.Error, "all ones") {
		t.Errorf("the tool reported %q, want an all-ones (device gone) error", rep.Error)
	}
	if rep.D2HOK || rep.LaunchSyncOK {
		t.Errorf("work reported done on a removed GPU: %+v", rep)
	}
	if err := v.Wait(ctx); err != nil {
		t.Fatalf("the guest did not power off after the removal: %v", err)
	}
	ps, _ := remote.Stats()
	if ps.Timeouts.Load()+ps.ErrorCompletions.Load() == 0 {
		t.Error("the host-side port answered no access with all ones")
	}
}

// TestHotAddAndRemove: a GPU lent to a running guest appears in it (QMP
// getfd + device_add), does work, and is removed (device_del,
// DEVICE_DELETED) with the guest seeing it go.
func TestHotAddAndRemove(t *testing.T) {
	o := vmOptions(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	remote, _ := lendPair(t, ctx, 3, o)
	o.GuestArgs = []string{"--bytes", "4194304", "--wait-device", "90s", "--wait-removal", "60s"}
	o.StayUp = true // so that QEMU is still there to confirm the removal
	v, err := Start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	ev, next, err := v.WaitEvent(ctx, 0, "looking")
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
	t.Logf("guest looking at %.1f s; hot-added; found %v %.0f ms after device_add", ev.At.Seconds(), found.Data["bdf"], float64(time.Since(t0).Milliseconds()))
	if _, _, err := v.WaitEvent(ctx, next, "done"); err != nil {
		ps, _ := remote.Stats()
		t.Fatalf("%v (port: %d timeouts, %d error completions)", err, ps.Timeouts.Load(), ps.ErrorCompletions.Load())
	}
	t1 := time.Now()
	if err := v.HotRemove(ctx, "gpu1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("hot-remove took %v", time.Since(t1))
	rep, _, err := v.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Error != "" || !rep.Removed || !rep.H2DOK || !rep.D2HOK || !rep.LaunchSyncOK {
		t.Fatalf("guest report %+v", rep)
	}
	checkGuestSawGPU(t, rep.PCI, rep.GPU)
	if err := v.Shutdown(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestRunWithoutGPU: a guest with nothing lent boots, its tool reports that
// no GPU is there, and Run returns that error after the guest powered off.
func TestRunWithoutGPU(t *testing.T) {
	o := vmOptions(t)
	o.Machine = "pc"
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rep, tm, err := Run(ctx, o, 30*time.Second)
	if err == nil || !strings.Contains(rep.Error, "no such PCI function") || len(rep.PCI) == 0 {
		t.Fatalf("err %v, report %+v", err, rep)
	}
	if tm.BootS <= 0 || tm.ResultS < tm.BootS {
		t.Errorf("timing %+v", tm)
	}
}
