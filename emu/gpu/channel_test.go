package gpu

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// upstream records what the GPU sends, with the time it sent it.
type upstream struct {
	s    *sim.Sim
	tlps [][]byte
	at   []time.Duration
}

func (u *upstream) SendTLP(v tlp.View) {
	u.tlps = append(u.tlps, append([]byte(nil), v...))
	u.at = append(u.at, u.s.Now())
}

func (u *upstream) Backlog() time.Duration { return 0 }

// busMasterGPU is a GPU with memory decoding and the bus master bit set,
// sending up to the returned recorder.
func busMasterGPU() (*sim.Sim, *GPU, *upstream) {
	s := sim.New(1)
	g := New(s, Config{})
	u := &upstream{s: s}
	g.Attach(u)
	g.Cfg.Set16(pcie.CfgCommand, pcie.CmdMemory|pcie.CmdBusMaster)
	return s, g, u
}

// vramChannel is a GPU whose channel 0 has its ring at VRAM offset 0x1000
// (8 entries) and the bus master bit set, so releases reach up.
func vramChannel(t *testing.T) (*sim.Sim, *GPU, *upstream) {
	t.Helper()
	s, g, u := busMasterGPU()
	g.writeReg(ChannelReg(0, ChGPBaseLo), 0x1000)
	g.writeReg(ChannelReg(0, ChGPBaseHi), 0)
	g.writeReg(ChannelReg(0, ChGPEntries), 8)
	g.writeReg(ChannelReg(0, ChGPAperture), ApertureVRAM)
	return s, g, u
}

// TestVRAMCommandsFetchLocally places a ring entry and a pushbuffer in
// VRAM: the doorbell runs the kernel and the host semaphore release after
// two local fetches, and the only TLP the GPU sends is the release.
func TestVRAMCommandsFetchLocally(t *testing.T) {
	t.Parallel()
	s, g, u := vramChannel(t)
	var pb []byte
	pb = AppendCommand(pb, Command{Op: OpKernel, Duration: 1000})
	pb = AppendCommand(pb, Command{Op: OpSemRelease, Addr: 0x1_0000_2000, Value: 9, Flags: SemHost})
	g.VRAM.Write(0x8000, pb)
	g.VRAM.Write(0x1000, AppendGPEntryFlags(nil, 0x8000, uint32(len(pb)), GPEntryVRAM))
	g.writeReg(ChannelReg(0, ChGPPut), 1)
	pcie.RunUntil(s, time.Millisecond)

	if len(u.tlps) != 1 {
		t.Fatalf("GPU sent %d TLPs, want only the semaphore release", len(u.tlps))
	}
	v := tlp.View(u.tlps[0])
	if v.Kind() != tlp.MWr || v.Address() != 0x1_0000_2000 || binary.LittleEndian.Uint64(v.Payload()) != 9 {
		t.Fatalf("release TLP %v at %#x payload %x", v.Kind(), v.Address(), v.Payload())
	}
	want := 2*g.cfg.LocalFetchLatency + g.cfg.KernelOverhead + 1000
	if u.at[0] != want {
		t.Errorf("release at %v, want two local fetches, the kernel overhead and the kernel: %v", u.at[0], want)
	}
	if g.Stats.ReadRequests != 0 || g.Stats.LocalFetches != 2 || g.Stats.Kernels != 1 || g.Stats.Errors != 0 {
		t.Errorf("stats %+v: want 2 local fetches, no DMA read, one kernel, no error", g.Stats)
	}
	if g.readReg(ChannelReg(0, ChGPGet)) != 1 || !g.Idle() {
		t.Errorf("GP_GET %d, idle %v: want 1, idle", g.readReg(ChannelReg(0, ChGPGet)), g.Idle())
	}
}

// TestVRAMCommandsBadEntries: a segment outside VRAM or over the size
// limit, and a ring that does not fit in VRAM, count as channel errors and
// stop the channel at the first of them: no panic, no DMA read, and the
// entries behind the fault never run (a release after a skipped segment
// would tell the host that the skipped work was done).
func TestVRAMCommandsBadEntries(t *testing.T) {
	t.Parallel()
	s, g, u := vramChannel(t)
	mem := g.cfg.Model.MemBytes
	rel := AppendCommand(nil, Command{Op: OpSemRelease, Addr: 0x2000, Value: 1, Flags: SemHost})
	g.VRAM.Write(0x8000, rel)
	var ring []byte
	ring = AppendGPEntryFlags(ring, mem-8, 64, GPEntryVRAM)        // runs past the end of VRAM
	ring = AppendGPEntryFlags(ring, ^uint64(0)-4, 64, GPEntryVRAM) // wraps the address space
	ring = AppendGPEntryFlags(ring, 0x8000, MaxSegmentBytes+1, GPEntryVRAM)
	ring = AppendGPEntryFlags(ring, 0x8000, uint32(len(rel)), GPEntryVRAM)
	g.VRAM.Write(0x1000, ring)
	g.writeReg(ChannelReg(0, ChGPPut), 4)
	pcie.RunUntil(s, time.Millisecond)
	if got := g.readReg(ChannelReg(0, ChErrors)); got != 3 {
		t.Errorf("channel errors %d, want 3", got)
	}
	if len(u.tlps) != 0 || g.Stats.ReadRequests != 0 || !g.Idle() {
		t.Errorf("sent %d TLPs, %d DMA reads, idle %v: want no release behind the fault, no read, idle", len(u.tlps), g.Stats.ReadRequests, g.Idle())
	}
	want := ChannelFault{Reason: FaultSegmentFetch, Status: tlp.StatusUR, VRAM: true, Addr: mem - 8}
	if got := channelFault(g, 0); got != want {
		t.Errorf("fault %v, want %v", got, want)
	}

	// A ring base past the end of VRAM: the fetch fails once and the
	// channel counts it and stops; it does not retry.
	g.writeReg(ChannelReg(1, ChGPBaseLo), 0xffff_f000)
	g.writeReg(ChannelReg(1, ChGPBaseHi), uint32(mem>>32))
	g.writeReg(ChannelReg(1, ChGPEntries), 8)
	g.writeReg(ChannelReg(1, ChGPAperture), ApertureVRAM)
	g.writeReg(ChannelReg(1, ChGPPut), 1)
	pcie.RunUntil(s, 2*time.Millisecond)
	fetches := g.Stats.LocalFetches
	if got := g.readReg(ChannelReg(1, ChErrors)); got != 1 || g.readReg(ChannelReg(1, ChGPGet)) != 0 {
		t.Errorf("ring outside VRAM: errors %d, GP_GET %d; want 1, 0", got, g.readReg(ChannelReg(1, ChGPGet)))
	}
	if n := pcie.RunUntil(s, 3*time.Millisecond); n != 0 || g.Stats.LocalFetches != fetches {
		t.Errorf("after the failed ring fetch %d more events ran and %d more fetches: want none", n, g.Stats.LocalFetches-fetches)
	}
	want = ChannelFault{Reason: FaultRingFetch, Status: tlp.StatusUR, VRAM: true, Addr: mem&^0xffffffff | 0xffff_f000}
	if got := channelFault(g, 1); got != want {
		t.Errorf("ring fault %v, want %v", got, want)
	}
}

// channelFault reads channel ch's fault registers.
func channelFault(g *GPU, ch int) ChannelFault {
	return FaultFromWord(g.readReg(ChannelReg(ch, ChFault)),
		uint64(g.readReg(ChannelReg(ch, ChFaultAddrLo)))|uint64(g.readReg(ChannelReg(ch, ChFaultAddrHi)))<<32)
}

// TestApertureResetByBase: GP_APERTURE reads back what was written, and a
// driver that programs GP_BASE without it gets the ring in host memory
// (fetched by a DMA read), whatever the channel held before.
func TestApertureResetByBase(t *testing.T) {
	t.Parallel()
	s, g, u := vramChannel(t)
	if got := g.readReg(ChannelReg(0, ChGPAperture)); got != ApertureVRAM {
		t.Fatalf("GP_APERTURE reads %d, want %d", got, ApertureVRAM)
	}
	g.writeReg(ChannelReg(0, ChGPBaseLo), 0x4000)
	if got := g.readReg(ChannelReg(0, ChGPAperture)); got != ApertureHost {
		t.Fatalf("GP_APERTURE after GP_BASE_LO reads %d, want %d", got, ApertureHost)
	}
	g.writeReg(ChannelReg(0, ChGPPut), 1)
	pcie.RunUntil(s, time.Millisecond)
	if len(u.tlps) != 1 || tlp.View(u.tlps[0]).Kind() != tlp.MRd || tlp.View(u.tlps[0]).Address() != 0x4000 {
		t.Fatalf("after the reset the ring fetch sent %d TLPs, want one MRd of host address 0x4000", len(u.tlps))
	}
}

// TestCopyAbortStopsChannel: a host-to-device copy whose DMA read is
// answered with an error status (a bridge answers a completion timeout
// with CA) left its destination unwritten. The channel stops there: the
// semaphore after the copy is never released (the host would take it for
// the copy's completion), ERRORS counts the failed copy, and the fault
// registers say what failed where.
func TestCopyAbortStopsChannel(t *testing.T) {
	t.Parallel()
	s, g, u := vramChannel(t)
	var pb []byte
	pb = AppendCommand(pb, Command{Op: OpCopy, Dir: DirH2D, Src: 0x1_0000_0000, Dst: 0x20000, Len: 64})
	pb = AppendCommand(pb, Command{Op: OpSemRelease, Addr: 0x1_0000_2000, Value: 1, Flags: SemHost})
	g.VRAM.Write(0x8000, pb)
	g.VRAM.Write(0x1000, AppendGPEntryFlags(nil, 0x8000, uint32(len(pb)), GPEntryVRAM))
	g.writeReg(ChannelReg(0, ChGPPut), 1)
	pcie.RunUntil(s, time.Millisecond)
	if len(u.tlps) != 1 || tlp.View(u.tlps[0]).Kind() != tlp.MRd {
		t.Fatalf("GPU sent %d TLPs, want the copy's one read", len(u.tlps))
	}
	rd := tlp.View(u.tlps[0])
	g.ReceiveTLP(tlp.View(pcie.AppendCpl(nil, tlp.ID(0x0100), rd.RequesterID(), rd.Tag(), tlp.StatusCA, 64)))
	pcie.RunUntil(s, 2*time.Millisecond)
	if got := g.readReg(ChannelReg(0, ChErrors)); got != 1 {
		t.Errorf("channel errors %d after an aborted copy, want 1", got)
	}
	if len(u.tlps) != 1 {
		t.Errorf("GPU sent %d TLPs after the aborted copy, want none (no release behind the fault)", len(u.tlps)-1)
	}
	want := ChannelFault{Reason: FaultCopyRead, Status: tlp.StatusCA, Addr: 0x1_0000_0000}
	if got := channelFault(g, 0); got != want || got.String() != "copy's DMA read at 0x100000000: completer abort" {
		t.Errorf("fault %v (%q), want %v", got, got, want)
	}
	if !g.Idle() {
		t.Error("a stopped channel keeps the GPU busy")
	}
}

// TestFetchAbortStopsChannel: commands in host memory, an error notifier
// and MSI programmed. The first submission runs; the pushbuffer read of
// the second is answered with CA: the channel posts the notifier record,
// then the MSI, releases nothing of the second or third submission, and
// a later doorbell fetches nothing.
func TestFetchAbortStopsChannel(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	g := New(s, Config{})
	u := &upstream{s: s}
	g.Attach(u)
	g.Cfg.Set16(pcie.CfgCommand, pcie.CmdMemory|pcie.CmdBusMaster)
	g.Cfg.Set32(CapMSIOff+MSIAddrLo, 0xfee0_0000)
	g.Cfg.Set16(CapMSIOff+MSIData, 0x41)
	g.Cfg.Set16(CapMSIOff+MSICtl, g.Cfg.Get16(CapMSIOff+MSICtl)|1)
	ring, notify := uint64(0x1_0000_0000), uint64(0x1_0000_3020)
	g.writeReg(ChannelReg(2, ChGPBaseLo), uint32(ring))
	g.writeReg(ChannelReg(2, ChGPBaseHi), uint32(ring>>32))
	g.writeReg(ChannelReg(2, ChGPEntries), 8)
	g.writeReg(ChannelReg(2, ChNotifyLo), uint32(notify))
	g.writeReg(ChannelReg(2, ChNotifyHi), uint32(notify>>32))

	// answer serves the GPU's reads from host memory mem, failing the
	// read at failAt with status st.
	mem := map[uint64][]byte{}
	var failAt uint64
	answered := 0
	answer := func(st tlp.Status) {
		for ; answered < len(u.tlps); answered++ {
			v := tlp.View(u.tlps[answered])
			if v.Kind() != tlp.MRd {
				continue
			}
			addr, n := pcie.RequestBytes(v)
			if addr == failAt {
				g.ReceiveTLP(tlp.View(pcie.AppendCpl(nil, 0, v.RequesterID(), v.Tag(), st, n)))
				continue
			}
			g.ReceiveTLP(tlp.View(pcie.AppendCplD(nil, 0, v.RequesterID(), v.Tag(), n, addr, mem[addr][:n])))
		}
	}
	var ringBytes []byte
	for i, seq := range []uint64{1, 2, 3} {
		pb := AppendCommand(nil, Command{Op: OpSemRelease, Addr: 0x1_0000_3000, Value: seq, Flags: SemHost})
		addr := uint64(0x1_0000_1000 + 0x100*i)
		mem[addr] = pb
		ringBytes = AppendGPEntry(ringBytes, addr, uint32(len(pb)))
	}
	mem[ring] = ringBytes[:GPEntrySize]
	g.writeReg(ChannelReg(2, ChGPPut), 1)
	for range 3 {
		pcie.RunUntil(s, s.Now()+time.Microsecond)
		answer(tlp.StatusSC)
	}
	last := tlp.View(u.tlps[len(u.tlps)-1])
	if last.Kind() != tlp.MWr || last.Address() != 0x1_0000_3000 || binary.LittleEndian.Uint64(last.Payload()) != 1 {
		t.Fatalf("first submission: last TLP %v at %#x, want the release of 1", last.Kind(), last.Address())
	}
	// Two more entries: the first's pushbuffer read fails.
	mem[ring+GPEntrySize] = ringBytes[GPEntrySize:]
	failAt = 0x1_0000_1100
	g.writeReg(ChannelReg(2, ChGPPut), 3)
	for range 3 {
		pcie.RunUntil(s, s.Now()+time.Microsecond)
		answer(tlp.StatusCA)
	}
	pcie.RunUntil(s, s.Now()+time.Millisecond)
	var writes []tlp.View
	for _, b := range u.tlps {
		if v := tlp.View(b); v.Kind() == tlp.MWr {
			writes = append(writes, v)
		}
	}
	if len(writes) != 3 {
		t.Fatalf("GPU posted %d writes, want the first release, the notifier and the MSI", len(writes))
	}
	if n := writes[1]; n.Address() != notify || DecodeNotifier(n.Payload()) != (ChannelFault{Reason: FaultSegmentFetch, Status: tlp.StatusCA, Addr: 0x1_0000_1100}) {
		t.Errorf("second write at %#x %x, want the notifier of a pushbuffer fetch aborted at 0x100001100", n.Address(), n.Payload())
	}
	if m := writes[2]; m.Address() != 0xfee0_0000 {
		t.Errorf("third write at %#x, want the MSI", m.Address())
	}
	got := channelFault(g, 2)
	if got.String() != "pushbuffer fetch at 0x100001100: completer abort" || g.readReg(ChannelReg(2, ChErrors)) != 1 {
		t.Errorf("fault %q, errors %d", got, g.readReg(ChannelReg(2, ChErrors)))
	}
	// A stopped channel fetches nothing more.
	sent := len(u.tlps)
	g.writeReg(ChannelReg(2, ChGPPut), 4)
	pcie.RunUntil(s, s.Now()+time.Millisecond)
	if len(u.tlps) != sent || !g.Idle() {
		t.Errorf("after a doorbell the stopped channel sent %d TLPs, idle %v", len(u.tlps)-sent, g.Idle())
	}
}

// TestOversizedRingRefused: a doorbell on a ring larger than MaxGPEntries
// fetches nothing and counts an error (the fuzzer's doorbell on a
// 808-million-entry ring made the GPU read 46 MB of ring for one write;
// 0xffffffff entries would have asked for a 64 GiB buffer). The largest
// ring is still served.
func TestOversizedRingRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		entries uint32
		reads   bool
	}{{MaxGPEntries + 1, false}, {0xffffffff, false}, {MaxGPEntries, true}} {
		s, g, _ := busMasterGPU()
		g.writeReg(ChannelReg(0, ChGPBaseLo), 0x1000)
		g.writeReg(ChannelReg(0, ChGPEntries), tc.entries)
		g.writeReg(ChannelReg(0, ChGPPut), tc.entries-1)
		pcie.RunUntil(s, time.Millisecond)
		errs := g.readReg(ChannelReg(0, ChErrors))
		if got := g.Stats.ReadRequests > 0; got != tc.reads || (errs != 0) == tc.reads {
			t.Errorf("%d entries: %d read requests, %d channel errors; want reads %v", tc.entries, g.Stats.ReadRequests, errs, tc.reads)
		}
	}
}
