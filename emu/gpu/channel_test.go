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

// vramChannel is a GPU whose channel 0 has its ring at VRAM offset 0x1000
// (8 entries) and the bus master bit set, so releases reach up.
func vramChannel(t *testing.T) (*sim.Sim, *GPU, *upstream) {
	t.Helper()
	s := sim.New(1)
	g := New(s, Config{})
	u := &upstream{s: s}
	g.Attach(u)
	g.Cfg.Set16(pcie.CfgCommand, pcie.CmdMemory|pcie.CmdBusMaster)
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
// leave the GPU idle: no panic, no DMA read, and later entries still run.
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
	if len(u.tlps) != 1 || g.Stats.ReadRequests != 0 || !g.Idle() {
		t.Errorf("sent %d TLPs, %d DMA reads, idle %v: want the one good release, no read, idle", len(u.tlps), g.Stats.ReadRequests, g.Idle())
	}

	// A ring base past the end of VRAM: the fetch fails once and the
	// channel counts it; it does not retry (as after a DMA fault, the
	// channel is wedged until reprogrammed).
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

// TestCopyAbortCountsChannelError: a host-to-device copy whose DMA read
// is answered with an error status (a bridge answers a completion timeout
// with CA) left its destination unwritten. The channel goes on (the
// semaphore after it is released) and its ERRORS register counts the
// failed copy, or a driver would take stale VRAM for the data it sent.
func TestCopyAbortCountsChannelError(t *testing.T) {
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
	if last := tlp.View(u.tlps[len(u.tlps)-1]); last.Kind() != tlp.MWr || last.Address() != 0x1_0000_2000 {
		t.Errorf("last TLP %v at %#x, want the semaphore release after the failed copy", last.Kind(), last.Address())
	}
}
