package gpudrv

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/dxpu/dxpu/emu/gpu"
)

// fakeHost records what the driver does to host memory and BAR0.
type fakeHost struct {
	mem    map[uint64]byte
	next   uint64
	writes []regWrite
}

type regWrite struct {
	addr uint64
	v    uint32
}

func (h *fakeHost) Alloc(n, align uint64) (uint64, error) {
	a := (h.next + align - 1) &^ (align - 1)
	h.next = a + n
	return a, nil
}

func (h *fakeHost) WriteMem(addr uint64, p []byte) error {
	for i, b := range p {
		h.mem[addr+uint64(i)] = b
	}
	return nil
}

func (h *fakeHost) ReadMem(addr uint64, p []byte) error {
	for i := range p {
		p[i] = h.mem[addr+uint64(i)]
	}
	return nil
}

func (h *fakeHost) MMIOWrite32(addr uint64, v uint32) error {
	h.writes = append(h.writes, regWrite{addr, v})
	return nil
}

func TestChannelSubmit(t *testing.T) {
	t.Parallel()
	h := &fakeHost{mem: map[uint64]byte{}, next: 0x1_0000}
	const bar0 = 0x9000_0000
	c, err := OpenChannel(h, bar0, 3, ChannelConfig{Entries: 4, PushbufferBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	want := []regWrite{{bar0 + gpu.ChannelReg(3, gpu.ChGPBaseLo), 0x1_0000}, {bar0 + gpu.ChannelReg(3, gpu.ChGPBaseHi), 0},
		{bar0 + gpu.ChannelReg(3, gpu.ChGPEntries), 4}}
	if len(h.writes) != 3 || h.writes[0] != want[0] || h.writes[1] != want[1] || h.writes[2] != want[2] {
		t.Fatalf("setup writes %+v, want %+v", h.writes, want)
	}
	seq, err := c.Submit(0, gpu.Command{Op: gpu.OpKernel, Duration: 1000, Marker: 7})
	if err != nil || seq != 1 {
		t.Fatalf("submit: %d %v", seq, err)
	}
	// The GPFIFO entry points at the pushbuffer, whose commands end with
	// the tracking semaphore release of sequence 1.
	var e [gpu.GPEntrySize]byte
	_ = h.ReadMem(0x1_0000, e[:])
	addr, n := binary.LittleEndian.Uint64(e[:]), binary.LittleEndian.Uint32(e[8:])
	pb := make([]byte, n)
	_ = h.ReadMem(addr, pb)
	cmds, err := gpu.DecodeCommands(pb, nil)
	if err != nil || len(cmds) != 2 || cmds[0].Op != gpu.OpKernel || cmds[1].Op != gpu.OpSemRelease || cmds[1].Value != 1 ||
		cmds[1].Addr != c.Semaphore() || cmds[1].Flags != gpu.SemHost {
		t.Fatalf("pushbuffer %+v %v", cmds, err)
	}
	if last := h.writes[len(h.writes)-1]; last != (regWrite{bar0 + gpu.ChannelReg(3, gpu.ChGPPut), 1}) {
		t.Fatalf("doorbell %+v", last)
	}
	// The ring holds entries-1 submissions the GPU has not completed.
	for i := 2; i <= 3; i++ {
		if _, err := c.Submit(0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Submit(0); !errors.Is(err, ErrRingFull) {
		t.Fatalf("fourth submission: %v", err)
	}
	var sem [8]byte
	binary.LittleEndian.PutUint64(sem[:], 3)
	_ = h.WriteMem(c.Semaphore(), sem[:])
	if done, _ := c.Completed(); done != 3 {
		t.Fatalf("completed %d", done)
	}
	if seq, err := c.Submit(3); err != nil || seq != 4 {
		t.Fatalf("after completion: %d %v", seq, err)
	}
	if last := h.writes[len(h.writes)-1]; last.v != 0 {
		t.Fatalf("put wraps to 0, got %d", last.v)
	}
	if _, err := OpenChannel(h, bar0, gpu.MaxChannels, ChannelConfig{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("channel out of range: %v", err)
	}
}

// barHost is a fakeHost that also writes through a BAR: what it writes
// there is recorded, not stored in host memory.
type barHost struct {
	*fakeHost
	bar []barWrite
}

type barWrite struct {
	addr uint64
	p    []byte
}

func (h *barHost) MMIOWrite(addr uint64, p []byte) error {
	h.bar = append(h.bar, barWrite{addr, append([]byte(nil), p...)})
	return nil
}

// TestChannelDeviceMemory: with the commands in device memory the ring and
// the pushbuffer are written through BAR1 at the VRAM offsets given, the
// GPFIFO entry carries the VRAM flag, GP_APERTURE is set after GP_BASE,
// and host memory holds only the semaphore.
func TestChannelDeviceMemory(t *testing.T) {
	t.Parallel()
	h := &barHost{fakeHost: &fakeHost{mem: map[uint64]byte{}, next: 0x1_0000}}
	const bar0, bar1, vram = 0x9000_0000, 0x100_0000_0000, 0x20_0000
	cfg := ChannelConfig{Entries: 4, PushbufferBytes: 4096, Commands: DeviceMemory, BAR1: bar1, VRAM: vram}
	if got := cfg.DeviceBytes(); got != 4096+4096 {
		t.Fatalf("DeviceBytes %d, want a 4 KiB ring page and the 4 KiB pushbuffer", got)
	}
	c, err := OpenChannel(h, bar0, 2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []regWrite{{bar0 + gpu.ChannelReg(2, gpu.ChGPBaseLo), vram}, {bar0 + gpu.ChannelReg(2, gpu.ChGPBaseHi), 0},
		{bar0 + gpu.ChannelReg(2, gpu.ChGPEntries), 4}, {bar0 + gpu.ChannelReg(2, gpu.ChGPAperture), gpu.ApertureVRAM}}
	if len(h.writes) != len(want) {
		t.Fatalf("setup writes %+v, want %+v", h.writes, want)
	}
	for i := range want {
		if h.writes[i] != want[i] {
			t.Fatalf("setup write %d: %+v, want %+v", i, h.writes[i], want[i])
		}
	}
	for i := 1; i <= 5; i++ { // past the ring's end: the slot wraps
		seq, err := c.Submit(uint64(i-1), gpu.Command{Op: gpu.OpKernel, Duration: 1000})
		if err != nil || seq != uint64(i) {
			t.Fatalf("submit %d: %d %v", i, seq, err)
		}
		if len(h.bar) != 2*i {
			t.Fatalf("submit %d: %d BAR writes so far, want 2 per submission", i, len(h.bar))
		}
		pbw, ew := h.bar[2*i-2], h.bar[2*i-1]
		if ew.addr != bar1+vram+uint64((i-1)%4)*gpu.GPEntrySize || len(ew.p) != gpu.GPEntrySize {
			t.Fatalf("submit %d: entry written at %#x (%d bytes)", i, ew.addr, len(ew.p))
		}
		seg, n, flags := binary.LittleEndian.Uint64(ew.p), binary.LittleEndian.Uint32(ew.p[8:]), binary.LittleEndian.Uint32(ew.p[12:])
		if flags != gpu.GPEntryVRAM || bar1+seg != pbw.addr || int(n) != len(pbw.p) || seg < vram+4096 || seg+uint64(n) > vram+8192 {
			t.Fatalf("submit %d: entry (%#x, %d, flags %d) for a segment written at %#x (%d bytes)", i, seg, n, flags, pbw.addr, len(pbw.p))
		}
		cmds, err := gpu.DecodeCommands(pbw.p, nil)
		if err != nil || len(cmds) != 2 || cmds[1].Op != gpu.OpSemRelease || cmds[1].Addr != c.Semaphore() || cmds[1].Value != uint64(i) {
			t.Fatalf("submit %d: segment %+v %v", i, cmds, err)
		}
		if last := h.writes[len(h.writes)-1]; last != (regWrite{bar0 + gpu.ChannelReg(2, gpu.ChGPPut), uint32(i % 4)}) {
			t.Fatalf("submit %d: doorbell %+v", i, last)
		}
	}
	if len(h.mem) != 0 {
		t.Errorf("device-memory channel stored %d bytes in host memory, want none", len(h.mem))
	}
}

func TestChannelDeviceMemoryRejected(t *testing.T) {
	t.Parallel()
	plain := &fakeHost{mem: map[uint64]byte{}}
	bh := &barHost{fakeHost: &fakeHost{mem: map[uint64]byte{}}}
	for name, tc := range map[string]struct {
		h   Host
		cfg ChannelConfig
	}{
		"no BAR writer":   {plain, ChannelConfig{Commands: DeviceMemory, BAR1: 1 << 40}},
		"no BAR1":         {bh, ChannelConfig{Commands: DeviceMemory}},
		"unaligned VRAM":  {bh, ChannelConfig{Commands: DeviceMemory, BAR1: 1 << 40, VRAM: 64}},
		"placement stray": {bh, ChannelConfig{Commands: Placement(7)}},
	} {
		if _, err := OpenChannel(tc.h, 0, 0, tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	if len(plain.writes)+len(bh.writes) != 0 {
		t.Errorf("a rejected channel wrote registers: %+v %+v", plain.writes, bh.writes)
	}
}

// TestChannelNotifier: with Notifier the driver programs NOTIFY_LO/HI with
// the address next to the tracking semaphore (one 64-bit store where the
// host posts one, else two 32-bit stores), and Fault decodes what the GPU
// posts there.
func TestChannelNotifier(t *testing.T) {
	t.Parallel()
	const bar0 = 0x9000_0000
	plain := &fakeHost{mem: map[uint64]byte{}, next: 0x1_0000_0000}
	c, err := OpenChannel(plain, bar0, 5, ChannelConfig{Entries: 4, PushbufferBytes: 4096, Notifier: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.Notifier() != c.Semaphore()+NotifierOffset {
		t.Fatalf("notifier %#x, semaphore %#x", c.Notifier(), c.Semaphore())
	}
	n := len(plain.writes)
	want := []regWrite{{bar0 + gpu.ChannelReg(5, gpu.ChNotifyLo), uint32(c.Notifier())}, {bar0 + gpu.ChannelReg(5, gpu.ChNotifyHi), uint32(c.Notifier() >> 32)}}
	if n != 5 || plain.writes[3] != want[0] || plain.writes[4] != want[1] {
		t.Fatalf("setup writes %+v, want GP_BASE, GP_ENTRIES, then %+v", plain.writes, want)
	}
	if f, err := c.Fault(); err != nil || f.Reason != gpu.FaultNone {
		t.Fatalf("fault of a running channel: %v %v", f, err)
	}
	fault := gpu.ChannelFault{Reason: gpu.FaultRingFetch, Status: 4, Addr: 0x1_0000_0040}
	_ = plain.WriteMem(c.Notifier(), gpu.AppendNotifier(nil, fault))
	if f, err := c.Fault(); err != nil || f != fault {
		t.Fatalf("fault %v %v, want %v", f, err, fault)
	}

	bh := &barHost{fakeHost: &fakeHost{mem: map[uint64]byte{}, next: 0x1_0000_0000}}
	c, err = OpenChannel(bh, bar0, 5, ChannelConfig{Entries: 4, PushbufferBytes: 4096, Notifier: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(bh.writes) != 3 || len(bh.bar) != 1 || bh.bar[0].addr != bar0+gpu.ChannelReg(5, gpu.ChNotifyLo) ||
		binary.LittleEndian.Uint64(bh.bar[0].p) != c.Notifier() || len(bh.bar[0].p) != 8 {
		t.Fatalf("setup: %+v, BAR writes %+v: want one 64-bit store of %#x", bh.writes, bh.bar, c.Notifier())
	}
}
