package gpu

import (
	"encoding/binary"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// Config tunes a GPU model.
type Config struct {
	Model Model
	// MaxOutstanding caps the DMA read requests in flight whatever the tag
	// width (the copy engines' own limit); 0 means 768.
	MaxOutstanding int
	// MaxSimBytes bounds how much of one copy moves as TLPs; the rest of a
	// longer copy is moved functionally and timed at the rate the TLP-level
	// part reached in its second half. 0 moves everything as TLPs.
	MaxSimBytes uint64
	// HostMemory is the host DRAM the functional part of long copies reads
	// and writes; without it long copies run entirely as TLPs.
	HostMemory *pcie.Memory
	// RegLatency is how long the GPU takes to answer an MMIO or config
	// read; KernelOverhead the command processor's time to start a kernel.
	RegLatency     time.Duration
	KernelOverhead time.Duration
	// LocalFetchLatency is how long the command processor takes to read a
	// GPFIFO ring or pushbuffer segment held in its own VRAM (default
	// 500ns, an HBM access from the host interface); commands in host
	// memory are DMA reads instead.
	LocalFetchLatency time.Duration
	// VRAMBytesPerSec times memsets and device-to-device copies without a
	// given duration.
	VRAMBytesPerSec float64
}

// Stats counts what the GPU did.
type Stats struct {
	ReadRequests  uint64 // DMA read requests issued
	ReadBytes     uint64 // bytes received by DMA reads as TLPs
	WriteTLPs     uint64 // posted writes issued
	WriteBytes    uint64
	FluidBytes    uint64 // bytes moved functionally (long-copy tails)
	Kernels       uint64
	Copies        uint64
	MSIs          uint64
	MaxInFlight   int // most DMA reads outstanding at once
	BadCompletion uint64
	Errors        uint64 // pushbuffer decode errors and failed DMA
	LocalFetches  uint64 // rings and segments read from VRAM, not by DMA
	MMIOReads     uint64
	MMIOWrites    uint64
	URs           uint64
}

// GPU is an emulated NVIDIA data-center GPU behind a PCIe port.
type GPU struct {
	s       *sim.Sim
	cfg     Config
	Cfg     *pcie.ConfigSpace
	VRAM    *pcie.Memory
	up      pcie.Sender
	id      tlp.ID
	dma     dmaEngine
	chans   map[int]*channel
	h2d     engineQueue
	d2h     engineQueue
	scratch uint32
	waiters []waiter
	ready   []*channel // scratch of wakeAcquires
	buf     []byte
	replies []*reply // free list
	readBuf []byte   // scratch of an MMIO read
	Stats   Stats
	// OnOp, when set, is told the start and end of every kernel, copy and
	// memset: the GPU-side view a profiler records.
	OnOp func(c Command, start, end time.Duration)
}

// New returns a GPU on simulator s.
func New(s *sim.Sim, cfg Config) *GPU {
	if cfg.Model.DeviceID == 0 {
		cfg.Model = H100SXM
	}
	if cfg.MaxOutstanding == 0 {
		cfg.MaxOutstanding = 768
	}
	if cfg.RegLatency == 0 {
		cfg.RegLatency = 300 * time.Nanosecond
	}
	if cfg.KernelOverhead == 0 {
		cfg.KernelOverhead = 500 * time.Nanosecond
	}
	if cfg.LocalFetchLatency == 0 {
		cfg.LocalFetchLatency = 500 * time.Nanosecond
	}
	if cfg.VRAMBytesPerSec == 0 {
		cfg.VRAMBytesPerSec = 1.5e12
	}
	g := &GPU{s: s, cfg: cfg, Cfg: buildConfig(cfg.Model), VRAM: pcie.NewMemory(), chans: map[int]*channel{}}
	g.dma.g = g
	g.h2d.g, g.d2h.g = g, g
	return g
}

// Model returns the GPU's model.
func (g *GPU) Model() Model { return g.cfg.Model }

// ID returns the routing ID the GPU captured from its last config write.
func (g *GPU) ID() tlp.ID { return g.id }

// Attach connects the GPU's upstream side: everything it sends goes to up.
func (g *GPU) Attach(up pcie.Sender) { g.up = up }

// Detach disconnects the GPU (surprise removal): what it sends is lost.
func (g *GPU) Detach() { g.up = nil }

// ConfigBytes returns a copy of the GPU's config space as the model holds it.
func (g *GPU) ConfigBytes() []byte { return g.Cfg.Bytes() }

func (g *GPU) send(v []byte) {
	if g.up != nil {
		g.up.SendTLP(v)
	}
}

func (g *GPU) cmd() uint16 { return g.Cfg.Get16(pcie.CfgCommand) }

// ReceiveTLP implements pcie.Receiver: TLPs arriving from the host side.
func (g *GPU) ReceiveTLP(v tlp.View) {
	if !pcie.Valid(v) {
		g.Stats.Errors++
		return
	}
	switch k := v.Kind(); k {
	case tlp.CfgRd0, tlp.CfgWr0:
		g.config(v, k == tlp.CfgWr0)
	case tlp.MRd:
		g.memRead(v)
	case tlp.MWr:
		g.memWrite(v)
	case tlp.CplD, tlp.Cpl:
		g.dma.completion(v)
	default:
		if k.IsNonPosted() {
			r := g.newReply()
			r.add(pcie.AppendCpl(r.buf, g.id, v.RequesterID(), v.Tag(), tlp.StatusUR, 4))
			r.later()
		}
	}
}

func (g *GPU) config(v tlp.View, write bool) {
	reg := v.Register()
	req, tag := v.RequesterID(), v.Tag()
	if write {
		// A function captures its bus and device number from the target of
		// every type 0 configuration write.
		g.id = v.TargetID()
		var d [4]byte
		copy(d[:], v.Payload())
		g.Cfg.Write(reg, v.FirstBE(), d)
		r := g.newReply()
		r.add(pcie.AppendCpl(r.buf, g.id, req, tag, tlp.StatusSC, 4))
		r.later()
		return
	}
	var d [4]byte
	binary.LittleEndian.PutUint32(d[:], g.Cfg.Read32(reg))
	r := g.newReply()
	r.add(pcie.AppendCplD(r.buf, v.TargetID(), req, tag, 4, 0, d[:]))
	r.later()
}

// bar returns which BAR addr falls in and the offset inside it.
func (g *GPU) bar(addr uint64, n int) (int, uint64, bool) {
	for _, b := range [...]struct {
		i    int
		size uint64
	}{{0, g.cfg.Model.BAR0Size}, {1, g.cfg.Model.BAR1Size}, {3, g.cfg.Model.BAR3Size}} {
		base := g.Cfg.BARAddress(b.i)
		if base != 0 && addr >= base && addr+uint64(n) <= base+b.size {
			return b.i, addr - base, true
		}
	}
	return 0, 0, false
}

func (g *GPU) memRead(v tlp.View) {
	addr, n := pcie.RequestBytes(v)
	bar, off, ok := g.bar(addr, n)
	if !ok || g.cmd()&pcie.CmdMemory == 0 {
		g.Stats.URs++
		r := g.newReply()
		r.add(pcie.AppendCpl(r.buf, g.id, v.RequesterID(), v.Tag(), tlp.StatusUR, n))
		r.later()
		return
	}
	g.Stats.MMIOReads++
	if cap(g.readBuf) < n {
		g.readBuf = make([]byte, n)
	}
	data := g.readBuf[:n]
	clear(data) // BAR3 reads as zeros
	switch bar {
	case 0:
		// Registers are dwords: each byte read comes from its place in
		// its dword (a 1-byte read at +2 is the register's third byte).
		eachDword(off, n, func(a, lo, hi uint64) {
			var w [4]byte
			binary.LittleEndian.PutUint32(w[:], g.readReg(a))
			copy(data[lo-off:hi-off], w[lo-a:hi-a])
		})
	case 1:
		g.VRAM.Read(off, data)
	}
	req, tag := v.RequesterID(), v.Tag()
	r := g.newReply()
	pcie.SplitCompletion(addr, n, mpsOf(g.Cfg), 128, func(a uint64, k int) {
		rest := int(addr + uint64(n) - a)
		r.add(pcie.AppendCplD(r.buf, g.id, req, tag, rest, a, data[a-addr:a-addr+uint64(k)]))
	})
	r.later()
}

func (g *GPU) memWrite(v tlp.View) {
	addr, n := pcie.RequestBytes(v)
	bar, off, ok := g.bar(addr, n)
	if !ok || g.cmd()&pcie.CmdMemory == 0 {
		g.Stats.URs++
		return
	}
	g.Stats.MMIOWrites++
	p := v.Payload()
	lead := int(addr & 3)
	if lead+n > len(p) {
		g.Stats.Errors++
		return
	}
	data := p[lead : lead+n]
	switch bar {
	case 0:
		// Every dword the write touches, its other bytes kept (byte
		// enables): a 64-bit store sets two registers, a 1-byte store
		// one byte of one.
		eachDword(off, n, func(a, lo, hi uint64) {
			var w [4]byte
			binary.LittleEndian.PutUint32(w[:], g.readReg(a))
			copy(w[lo-a:hi-a], data[lo-off:hi-off])
			g.writeReg(a, binary.LittleEndian.Uint32(w[:]))
		})
	case 1:
		g.VRAM.Write(off, data)
	}
}

// eachDword calls f for every register dword at a that the bytes [off,
// off+n) touch, with [lo, hi), the bytes of it they cover.
func eachDword(off uint64, n int, f func(a, lo, hi uint64)) {
	end := off + uint64(n)
	for a := off &^ 3; a < end; a += 4 {
		f(a, max(a, off), min(a+4, end))
	}
}

func (g *GPU) readReg(off uint64) uint32 {
	switch {
	case off == RegBoot0:
		return g.cfg.Model.Boot0
	case off == RegScratch:
		return g.scratch
	case off >= ChannelBase && off < ChannelBase+MaxChannels*ChannelStride:
		ch := g.chans[int((off-ChannelBase)/ChannelStride)]
		if ch == nil {
			return 0
		}
		switch (off - ChannelBase) % ChannelStride {
		case ChGPBaseLo:
			return uint32(ch.base)
		case ChGPBaseHi:
			return uint32(ch.base >> 32)
		case ChGPEntries:
			return ch.entries
		case ChGPGet:
			return ch.get
		case ChGPPut:
			return ch.put
		case ChErrors:
			return ch.errors
		case ChGPAperture:
			return ch.aperture
		case ChNotifyLo:
			return uint32(ch.notify)
		case ChNotifyHi:
			return uint32(ch.notify >> 32)
		case ChFault:
			if !ch.stopped {
				return 0
			}
			return ch.fault.Word()
		case ChFaultAddrLo:
			return uint32(ch.fault.Addr)
		case ChFaultAddrHi:
			return uint32(ch.fault.Addr >> 32)
		}
	}
	return 0
}

func (g *GPU) writeReg(off uint64, v uint32) {
	switch {
	case off == RegScratch:
		g.scratch = v
	case off >= ChannelBase && off < ChannelBase+MaxChannels*ChannelStride:
		idx := int((off - ChannelBase) / ChannelStride)
		ch := g.chans[idx]
		if ch == nil {
			ch = newChannel(g, idx)
			g.chans[idx] = ch
		}
		switch (off - ChannelBase) % ChannelStride {
		case ChGPBaseLo:
			ch.base = ch.base&^0xffffffff | uint64(v)
			ch.aperture = ApertureHost
		case ChGPAperture:
			ch.aperture = v & ApertureVRAM
		case ChGPBaseHi:
			ch.base = ch.base&0xffffffff | uint64(v)<<32
		case ChGPEntries:
			ch.entries = v
		case ChGPPut:
			ch.doorbell(v)
		case ChNotifyLo:
			ch.notify = ch.notify&^0xffffffff | uint64(v)
		case ChNotifyHi:
			ch.notify = ch.notify&0xffffffff | uint64(v)<<32
		}
	}
}

// writeHost posts a write of data to host memory, split at MPS and 4 KiB.
func (g *GPU) writeHost(addr uint64, data []byte) {
	mps := mpsOf(g.Cfg)
	for len(data) > 0 {
		k := min(len(data), mps, int(4096-addr%4096))
		g.buf = pcie.AppendMWr(g.buf[:0], g.id, addr, data[:k])
		g.Stats.WriteTLPs++
		g.Stats.WriteBytes += uint64(k)
		g.send(g.buf)
		addr += uint64(k)
		data = data[k:]
	}
}

// raiseMSI posts the MSI write the host programmed, if MSI is enabled.
func (g *GPU) raiseMSI() {
	ctl := g.Cfg.Get16(CapMSIOff + MSICtl)
	if ctl&1 == 0 || g.cmd()&pcie.CmdBusMaster == 0 {
		return
	}
	addr := uint64(g.Cfg.Get32(CapMSIOff+MSIAddrLo)) | uint64(g.Cfg.Get32(CapMSIOff+MSIAddrHi))<<32
	var d [4]byte
	binary.LittleEndian.PutUint16(d[:], g.Cfg.Get16(CapMSIOff+MSIData))
	g.Stats.MSIs++
	g.writeHost(addr, d[:])
}
