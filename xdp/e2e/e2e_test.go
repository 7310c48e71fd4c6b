package e2e

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dxpu/dxpu/bridge"
	"github.com/dxpu/dxpu/emu/cuda"
	"github.com/dxpu/dxpu/emu/gpu"
	"github.com/dxpu/dxpu/emu/host"
	"github.com/dxpu/dxpu/emu/pcie"
	switching "github.com/dxpu/dxpu/fabric/switching"
	"github.com/dxpu/dxpu/fabric/table"
	"github.com/dxpu/dxpu/internal/waitfor"
)

// copyBytes is the size of each copy: 256 KiB needs at least
// copyBytes/1472 frames each way (the bridge MTU bounds a frame's payload).
const copyBytes = 256 << 10

// minDataFrames is the fewest frames that can carry copyBytes.
const minDataFrames = (copyBytes + 1471) / 1472

// TestRemoteGPUThroughXDP: the host enumerates the GPU across the XDP
// switch (config space identical to the model's, BAR0 sized by writing
// ones through the fabric), copies 256 KiB in and out and gets the same
// bytes back, launches a kernel and synchronizes; the data crossed in the
// XDP program (its pair counters), the slow path only carried CONTROL
// messages.
func TestRemoteGPUThroughXDP(t *testing.T) {
	f := newFabric(t, fabricOptions{deadAfter: 5 * time.Second, hostTimeout: 5 * time.Second})
	w := f.world
	if !f.path.Up() {
		t.Fatal("bridges not up after enumeration")
	}
	d, g := w.Devices[0], w.GPUs[0]
	model := gpu.H100SXM
	if d.Vendor != 0x10de || d.DeviceID != model.DeviceID {
		t.Fatalf("enumerated %04x:%04x, want 10de:%04x", d.Vendor, d.DeviceID, model.DeviceID)
	}
	for _, b := range []struct {
		i    int
		size uint64
	}{{0, model.BAR0Size}, {1, model.BAR1Size}, {3, model.BAR3Size}} {
		bar, ok := d.BAR(b.i)
		if !ok || bar.Size != b.size || bar.Addr == 0 {
			t.Fatalf("BAR%d: %+v (found %v), want size %#x at a non-zero address", b.i, bar, ok, b.size)
		}
	}

	// Every config DW read through the fabric equals the model's.
	for off := uint16(0); off < 0x100; off += 4 {
		v, err := w.Host.CfgRead32(d.ID, off)
		if err != nil {
			t.Fatalf("config read %#x through the switch: %v", off, err)
		}
		if want := g.Cfg.Read32(off); v != want {
			t.Fatalf("config %#x through the switch: %#x, model %#x", off, v, want)
		}
	}
	// BAR sizing again, by hand: decode off, all ones, read the mask,
	// restore.
	cmd, err := w.Host.CfgRead32(d.ID, pcie.CfgCommand)
	if err != nil {
		t.Fatal(err)
	}
	bar0, err := w.Host.CfgRead32(d.ID, pcie.CfgBAR0)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		off uint16
		v   uint32
	}{{pcie.CfgCommand, cmd &^ 0x2}, {pcie.CfgBAR0, 0xffffffff}} {
		if err := w.Host.CfgWrite32(d.ID, step.off, step.v); err != nil {
			t.Fatal(err)
		}
	}
	mask, err := w.Host.CfgRead32(d.ID, pcie.CfgBAR0)
	if err != nil {
		t.Fatal(err)
	}
	if size := uint64(^(mask &^ 0xf)) + 1; size != model.BAR0Size {
		t.Fatalf("BAR0 sized through the switch: mask %#x gives %#x bytes, want %#x", mask, size, model.BAR0Size)
	}
	for _, step := range []struct {
		off uint16
		v   uint32
	}{{pcie.CfgBAR0, bar0}, {pcie.CfgCommand, cmd}} {
		if err := w.Host.CfgWrite32(d.ID, step.off, step.v); err != nil {
			t.Fatal(err)
		}
	}

	// Data through the GPU's copy engine, both ways.
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		t.Fatal(err)
	}
	src, dst := c.MallocHost(copyBytes), c.MallocHost(copyBytes)
	want := make([]byte, copyBytes)
	for i := range want {
		want[i] = byte(i*31 + i>>9 + 5)
	}
	w.Host.Mem.Write(src, want)
	v := c.Devices[0].Malloc(copyBytes)
	if err := c.MemcpyHtoD(st, v, src, copyBytes); err != nil {
		t.Fatalf("host to device: %v", err)
	}
	if err := c.MemcpyDtoH(st, dst, v, copyBytes); err != nil {
		t.Fatalf("device to host: %v", err)
	}
	got := make([]byte, copyBytes)
	w.Host.Mem.Read(dst, got)
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("data differs after a round trip through the XDP switch, first at byte %d: %#x, want %#x", i, got[i], want[i])
	}
	if err := c.Launch(st, 100*time.Microsecond); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(st); err != nil {
		t.Fatalf("kernel launch+sync: %v", err)
	}
	if n := st.Completed(); n != st.Submitted() {
		t.Fatalf("stream completed %d of %d submissions", n, st.Submitted())
	}
	if boot, err := c.ReadRegister(c.Devices[0], gpu.RegBoot0); err != nil || boot != model.Boot0 {
		t.Fatalf("BOOT_0 over MMIO: %#x, %v; want %#x", boot, err, model.Boot0)
	}
	if err := f.path.Err(); err != nil {
		t.Fatalf("bridge pair: %v", err)
	}

	// Stop the bridges, then account for their frames at the switch.
	hr, gr := f.path.Runner(bridge.RoleHost), f.path.Runner(bridge.RoleGPU)
	f.path.Close()
	hc, gc := hr.Counters(), gr.Counters()
	if hc.LinkDowns != 0 || gc.LinkDowns != 0 || hc.SynthesizedUR+hc.SynthesizedCA+gc.SynthesizedUR+gc.SynthesizedCA != 0 {
		t.Fatalf("the link flapped or requests failed: host %+v, GPU %+v", hc, gc)
	}
	// Every frame a bridge put on its veth reached the XDP program, which
	// forwarded it or (CONTROL) passed it to the slow path: exactly, unless
	// the veth dropped some on the way in (its tx_dropped, which also
	// counts other traffic, bounds that).
	hostDrops, gpuDrops := f.txDropped(t, f.net.Host, f.net.HostIf.Name), f.txDropped(t, f.net.GPU, f.net.GPUIf.Name)
	type direction struct {
		name                 string
		xdp, ctl, slow       uint64
		sent, sendErr, drops uint64
		reasonFwd            switching.Reason
		ingress              string
	}
	dirs := []*direction{
		{name: "host->GPU", sent: hc.FramesSent, sendErr: hr.SendErrors(), drops: hostDrops,
			reasonFwd: switching.ReasonToGPU, ingress: f.net.SwitchHost.Name},
		{name: "GPU->host", sent: gc.FramesSent, sendErr: gr.SendErrors(), drops: gpuDrops,
			reasonFwd: switching.ReasonToHost, ingress: f.net.SwitchGPU.Name},
	}
	read := func() (bool, uint64) {
		pair, ok := f.xdpPair(t)
		if !ok {
			t.Fatal("pair missing from the XDP switch")
		}
		slow := f.slowPair(t)
		settled, counted := true, uint64(0)
		for _, dir := range dirs {
			dir.xdp, dir.ctl = pair.Packets[dir.reasonFwd], f.xdpPort(t, dir.ingress).Packets[switching.ReasonControl]
			dir.slow = slow.Packets[dir.reasonFwd]
			settled = settled && dir.xdp+dir.ctl+dir.drops >= dir.sent-dir.sendErr
			counted += dir.xdp + dir.ctl + dir.drops + dir.slow
		}
		return settled, counted
	}
	// Frames still in a veth's ring when the bridges stopped are counted
	// when the switch's NAPI poll runs: wait for them while the counts
	// move; the checks below say what did not settle.
	waitfor.Settle(read)
	for _, dir := range dirs {
		t.Logf("%s: bridge sent %d frames (%d send errors, veth tx_dropped %d); XDP forwarded %d, passed %d CONTROL up; slow path forwarded %d",
			dir.name, dir.sent, dir.sendErr, dir.drops, dir.xdp, dir.ctl, dir.slow)
		// The data needed at least minDataFrames frames, all of them
		// forwarded by the XDP program.
		if dir.xdp < minDataFrames {
			t.Errorf("%s: XDP forwarded %d frames; 256 KiB of data needs at least %d", dir.name, dir.xdp, minDataFrames)
		}
		if got, sent := dir.xdp+dir.ctl, dir.sent-dir.sendErr; got > sent || got+dir.drops < sent {
			t.Errorf("%s: XDP forwarded %d and passed %d CONTROL up: %d frames, but the bridge sent %d (veth dropped up to %d)",
				dir.name, dir.xdp, dir.ctl, got, sent, dir.drops)
		}
		// The slow path carried the handshake and keepalives, and nothing
		// but what XDP passed up as CONTROL.
		if dir.slow == 0 || dir.slow > dir.ctl {
			t.Errorf("%s: slow path forwarded %d frames; want 1..%d (the CONTROL messages XDP passed up)", dir.name, dir.slow, dir.ctl)
		}
		if dir.slow >= dir.xdp {
			t.Errorf("%s: slow path forwarded %d frames, XDP only %d: data took the slow path", dir.name, dir.slow, dir.xdp)
		}
	}
	hostPort, gpuPort := f.xdpPort(t, f.net.SwitchHost.Name), f.xdpPort(t, f.net.SwitchGPU.Name)
	for _, p := range []switching.Counters{hostPort, gpuPort} {
		if n := p.Packets[switching.ReasonSpoofed] + p.Packets[switching.ReasonUnknownPair] + p.Packets[switching.ReasonMalformed]; n != 0 {
			t.Errorf("switch dropped or mis-classified %d frames of the bridges: %+v", n, p)
		}
	}
}

// TestPairRemovedMidRun removes the pair from the switch's table while the
// host has requests outstanding: the frames stop at the switch, the
// bridges declare the link dead, the host bridge answers every
// outstanding request with UR (not the host's own completion timeout) and
// reports a surprise removal, the host's downstream port shows the link
// and presence down, the driver fails the outstanding synchronize with
// ErrDeviceLost, and later requests get UR at once.
func TestPairRemovedMidRun(t *testing.T) {
	// The host's timeout is far beyond the bridges' silence limit: a
	// request that only the host's timer ends shows up as ErrTimeout.
	f := newFabric(t, fabricOptions{deadAfter: 2 * time.Second, hostTimeout: 25 * time.Second})
	w := f.world
	d := w.Devices[0]
	// Blocking sync: the removal wakes threads waiting for an MSI. (A
	// spinning synchronize already in progress is not woken by a removal
	// in emu/cuda: it stalls instead of returning ErrDeviceLost.)
	c, err := cuda.New(w.Host, w.Devices, cuda.Config{Sync: cuda.SyncBlocking})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.Devices[0].NewStream()
	if err != nil {
		t.Fatal(err)
	}
	// The pair works before the removal.
	const n = 64 << 10
	src, dst := c.MallocHost(n), c.MallocHost(n)
	want := bytes.Repeat([]byte{0xa5, 0x5a, 0x3c}, n/3+1)[:n]
	w.Host.Mem.Write(src, want)
	v := c.Devices[0].Malloc(n)
	if err := c.MemcpyHtoD(st, v, src, n); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(st, dst, v, n); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	w.Host.Mem.Read(dst, got)
	if !bytes.Equal(got, want) {
		t.Fatal("data differs before the removal")
	}
	before, _ := f.xdpPair(t)
	if before.Packets[switching.ReasonToGPU] == 0 || before.Packets[switching.ReasonToHost] == 0 {
		t.Fatalf("XDP pair counters before the removal: %+v", before)
	}

	// The control plane takes the GPU away: no window in which the pair
	// still forwards.
	if err := f.sw.Reconcile(&table.Table{Version: 2}); err != nil {
		t.Fatalf("reconciling without the pair: %v", err)
	}
	if _, ok := f.xdpPair(t); ok {
		t.Fatal("pair still installed in the XDP switch after reconcile")
	}

	// Outstanding work: MMIO and config reads, and a kernel whose doorbell
	// will never arrive, then a blocking synchronize.
	type result struct {
		what string
		err  error
		done bool
	}
	results := make([]*result, 0, 5)
	b0, _ := d.BAR(0)
	for _, off := range []uint64{gpu.RegBoot0, gpu.RegScratch, gpu.RegBoot0 + 4, gpu.RegScratch} {
		r := &result{what: "MMIO read"}
		results = append(results, r)
		w.Host.MMIOReadAsync(b0.Addr+off, 4, func(_ []byte, err error) { r.err, r.done = err, true })
	}
	cfgRead := &result{what: "config read"}
	results = append(results, cfgRead)
	w.Host.CfgReadAsync(d.ID, 0, func(_ uint32, err error) { cfgRead.err, cfgRead.done = err, true })
	if err := c.Launch(st, 100*time.Microsecond); err != nil {
		t.Fatalf("launch after removal (posted, must not fail yet): %v", err)
	}
	if err := c.StreamSynchronize(st); !errors.Is(err, cuda.ErrDeviceLost) {
		t.Fatalf("synchronize across the removal: %v, want ErrDeviceLost", err)
	}
	// The synchronize returned at the removal; the requests' completions
	// were posted before it.
	if !w.Host.RunWhile(func() bool {
		for _, r := range results {
			if !r.done {
				return true
			}
		}
		return false
	}) {
		t.Fatal("simulation stalled with requests outstanding")
	}
	for i, r := range results {
		if !errors.Is(r.err, host.ErrUR) && !errors.Is(r.err, host.ErrCA) {
			t.Errorf("outstanding %s %d ended with %v, want a UR or CA completion from the bridge", r.what, i, r.err)
		}
	}

	// The host sees the slot empty and its link down.
	if d.Present {
		t.Error("device still present after the surprise removal")
	}
	if !c.Devices[0].Lost() {
		t.Error("driver did not mark the device lost")
	}
	dsp := w.DSPID(0)
	ls, err := w.Host.CfgRead32(dsp, (host.PortCapPCIe+host.PCIeLinkSta)&^3)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := w.Host.CfgRead32(dsp, (host.PortCapPCIe+host.PCIeSlotSta)&^3)
	if err != nil {
		t.Fatal(err)
	}
	if uint16(ls>>16)&host.LinkStaDLLActive != 0 || uint16(ss>>16)&host.SlotStaPresence != 0 {
		t.Errorf("downstream port: link status %#x, slot status %#x; want DLL Link Active and Presence Detect clear", ls>>16, ss>>16)
	}
	if uint16(ss>>16)&(host.SlotStaPDC|host.SlotStaDLLSC) != host.SlotStaPDC|host.SlotStaDLLSC {
		t.Errorf("downstream port: slot status %#x; want Presence Detect Changed and DLL State Changed latched", ss>>16)
	}
	// New requests are answered at once by the empty slot.
	if _, err := w.Host.CfgRead32(d.ID, 0); !errors.Is(err, host.ErrUR) {
		t.Errorf("config read after the removal: %v, want UR", err)
	}

	// Both bridges saw the link die; the host's raised the removal.
	hr, gr := f.path.Runner(bridge.RoleHost), f.path.Runner(bridge.RoleGPU)
	if s := hr.State(); s == bridge.StateUp {
		t.Errorf("host bridge still up")
	}
	hc, gc := hr.Counters(), gr.Counters()
	if hc.LinkDowns == 0 || hc.SynthesizedUR+hc.SynthesizedCA < uint64(len(results)) {
		t.Errorf("host bridge: %d link downs, %d UR and %d CA synthesized; want >= 1 and >= %d completions",
			hc.LinkDowns, hc.SynthesizedUR, hc.SynthesizedCA, len(results))
	}
	ev := f.hostEvents()
	for _, k := range []bridge.EventKind{bridge.EventLinkDown, bridge.EventSurpriseRemoval} {
		if !slices.Contains(ev, k) {
			t.Errorf("host bridge events %v lack %v", ev, k)
		}
	}
	// The GPU side has no keepalive answer either; wait for it without a
	// timing assertion (its silence limit is the same).
	waitfor.Settle(func() (bool, uint64) { return gr.Counters().LinkDowns != 0, 0 })
	if gc = gr.Counters(); gc.LinkDowns == 0 {
		t.Errorf("GPU bridge never declared the link down: %+v", gc)
	}
	// The frames of the removed pair reached the XDP program and were not
	// forwarded.
	if p := f.xdpPort(t, f.net.SwitchHost.Name); p.Packets[switching.ReasonUnknownPair] == 0 {
		t.Errorf("host port counters after the removal: %+v; want frames of the unknown pair", p)
	}
	t.Logf("host bridge: %d link downs, %d UR synthesized, %d posted lost; events %v", hc.LinkDowns, hc.SynthesizedUR, hc.PostedLost, ev)
}
