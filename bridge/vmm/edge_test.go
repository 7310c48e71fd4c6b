package vmm

import (
	"bytes"
	"errors"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

// TestDMASpanFromGapIntoRAM: a device access that starts in the gap below
// a RAM region and ends inside it lies in no region: UR for a read, a
// dropped write, no byte of guest memory touched and no slice panic (the
// offset into the region would be negative).
func TestDMASpanFromGapIntoRAM(t *testing.T) {
	t.Parallel()
	low, high := make([]byte, 4096), make([]byte, 4096)
	var ram GuestRAM
	// RAM at 0x1000..0x2000 and 0x10800..0x11800: a gap between them
	// (the second one not page-aligned, so that a TLP can cross into it
	// without crossing a 4 KiB boundary).
	if err := ram.Replace([]RAMRegion{{GPA: 0x1000, Mem: low}, {GPA: 0x10800, Mem: high}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		addr uint64
		n    int
	}{
		{"gap into the upper region", 0x10800 - 32, 64},
		{"below the first region into it", 0x1000 - 4, 8},
		{"from address 0 into the first region", 0, 0x1000 + 4},
	} {
		buf := make([]byte, tc.n)
		if err := ram.ReadAt(buf, tc.addr); !errors.Is(err, ErrOutsideRAM) {
			t.Errorf("%s: ReadAt %d bytes at %#x: %v, want ErrOutsideRAM", tc.name, tc.n, tc.addr, err)
		}
		if err := ram.WriteAt(bytes.Repeat([]byte{0xee}, tc.n), tc.addr); !errors.Is(err, ErrOutsideRAM) {
			t.Errorf("%s: WriteAt %d bytes at %#x: %v, want ErrOutsideRAM", tc.name, tc.n, tc.addr, err)
		}
	}
	if !bytes.Equal(low, make([]byte, 4096)) || !bytes.Equal(high, make([]byte, 4096)) {
		t.Fatal("a refused write changed guest memory")
	}

	// The same span as the device's TLPs through a port: UR, counted.
	p, err := NewPort(Config{BARs: h100BARs}, &ram)
	if err != nil {
		t.Fatal(err)
	}
	rd := build(t, tlp.Packet{Kind: tlp.MRd, RequesterID: tlp.NewID(3, 0, 0), Tag: 5, Address: 0x10800 - 32, Length: 16, FirstBE: 0xf, LastBE: 0xf})
	var cpls []tlp.Status
	_, err = p.Receive(rd, func(b []byte) error { cpls = append(cpls, tlp.View(b).Status()); return nil })
	if len(cpls) != 1 || cpls[0] != tlp.StatusUR {
		t.Fatalf("DMA read from the gap into RAM: completions %v (%v), want one UR", cpls, err)
	}
	wr := build(t, tlp.Packet{Kind: tlp.MWr, RequesterID: tlp.NewID(3, 0, 0), Address: 0x10800 - 32, FirstBE: 0xf, LastBE: 0xf, Data: bytes.Repeat([]byte{0xcd}, 64)})
	_, _ = p.Receive(wr, nil)
	if !bytes.Equal(high, make([]byte, 4096)) || p.Stats().DMAOutside.Load() != 2 || p.Stats().DMAReads.Load() != 0 || p.Stats().DMAWrites.Load() != 0 {
		t.Fatalf("DMA from the gap: memory changed %v, outside %d reads %d writes %d", !bytes.Equal(high, make([]byte, 4096)),
			p.Stats().DMAOutside.Load(), p.Stats().DMAReads.Load(), p.Stats().DMAWrites.Load())
	}
}

// TestPoisonedCompletionIsNoData: a completion with EP set (data the
// device or a switch poisoned) answers the guest's read with all ones and
// counts an error completion, whatever its status and bytes say: poisoned
// data is never handed to the guest as the value (PCIe 2.7.2.2).
func TestPoisonedCompletionIsNoData(t *testing.T) {
	t.Parallel()
	p, _ := newTestPort(t, 4096)
	begin(t, p, Access{Op: CfgWrite, Addr: 0x10, Size: 4, Val: 0xfc00_0000})
	for _, tc := range []struct {
		a    Access
		want uint64
	}{
		{Access{Op: BarRead, Addr: 0xfc00_0000, Size: 4}, 0xffff_ffff},
		{Access{Op: BarRead, Addr: 0xfc00_0000, Size: 8}, AllOnes},
		{Access{Op: CfgRead, Addr: 0x40, Size: 2}, 0xffff},
	} {
		s := begin(t, p, tc.a)
		req := tlp.View(s.TLP)
		data := make([]byte, 4*max(1, int(req.Length())))
		for i := range data {
			data[i] = 0x11
		}
		cpl := build(t, tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(3, 0, 0), RequesterID: req.RequesterID(), Tag: req.Tag(),
			Status: tlp.StatusSC, ByteCount: uint16(len(data)), Data: data, EP: true})
		errs := p.Stats().ErrorCompletions.Load()
		a, err := p.Receive(cpl, nil)
		if err != nil || !a.Done || a.Value != tc.want || a.Err == nil || p.Stats().ErrorCompletions.Load() != errs+1 {
			t.Errorf("%v at %#x, poisoned CplD of 0x11s: answer %+v %v, errors %d, want %#x and an error", tc.a.Op, tc.a.Addr, a, err,
				p.Stats().ErrorCompletions.Load()-errs, tc.want)
		}
		if _, busy := p.Deadline(); busy {
			t.Fatalf("%v: still pending after its poisoned completion", tc.a.Op)
		}
	}
	// A config write's poisoned Cpl fails too (the write's outcome is
	// unknown), with no value.
	s := begin(t, p, Access{Op: CfgWrite, Addr: 0x4, Size: 2, Val: 6})
	req := tlp.View(s.TLP)
	cpl := build(t, tlp.Packet{Kind: tlp.Cpl, CompleterID: tlp.NewID(3, 0, 0), RequesterID: req.RequesterID(), Tag: req.Tag(), Status: tlp.StatusSC, ByteCount: 4, EP: true})
	if a, _ := p.Receive(cpl, nil); !a.Done || a.Value != 0 || a.Err == nil {
		t.Errorf("config write, poisoned Cpl: %+v, want done with an error", a)
	}
}

// TestCompletionRequesterIDChecked: a completion whose tag matches the
// pending access but whose requester ID is not the port's is someone
// else's: counted unexpected, not taken as the answer; the right one is.
func TestCompletionRequesterIDChecked(t *testing.T) {
	t.Parallel()
	var ram GuestRAM
	p, err := NewPort(Config{BARs: h100BARs, Requester: tlp.NewID(0, 1, 0)}, &ram)
	if err != nil {
		t.Fatal(err)
	}
	begin(t, p, Access{Op: CfgWrite, Addr: 0x10, Size: 4, Val: 0xfc00_0000})
	s := begin(t, p, Access{Op: BarRead, Addr: 0xfc00_0000, Size: 4})
	req := tlp.View(s.TLP)
	if req.RequesterID() != tlp.NewID(0, 1, 0) {
		t.Fatalf("request carries requester %v, want 00:01.0", req.RequesterID())
	}
	for _, wrong := range []tlp.ID{tlp.NewID(0, 0, 0), tlp.NewID(3, 0, 0), tlp.NewID(0, 1, 1)} {
		cpl := build(t, tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(3, 0, 0), RequesterID: wrong, Tag: req.Tag(),
			Status: tlp.StatusSC, ByteCount: 4, Data: []byte{0xba, 0xad, 0xf0, 0x0d}})
		if a, _ := p.Receive(cpl, nil); a.Done {
			t.Errorf("completion for requester %v (tag %d) answered the access: %+v", wrong, req.Tag(), a)
		}
	}
	if n := p.Stats().Unexpected.Load(); n != 3 {
		t.Errorf("unexpected completions %d, want 3", n)
	}
	cpl := build(t, tlp.Packet{Kind: tlp.CplD, CompleterID: tlp.NewID(3, 0, 0), RequesterID: tlp.NewID(0, 1, 0), Tag: req.Tag(),
		Status: tlp.StatusSC, ByteCount: 4, Data: []byte{0x78, 0x56, 0x34, 0x12}})
	if a, _ := p.Receive(cpl, nil); !a.Done || a.Value != 0x1234_5678 {
		t.Fatalf("the right completion after the wrong ones: %+v", a)
	}
}
