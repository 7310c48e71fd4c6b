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
