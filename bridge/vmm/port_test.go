package vmm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/tlp"
)

var h100BARs = [numBARs]BAR{
	0: {Size: 16 << 20, Device: 0x9000_0000},
	1: {Size: 256 << 20, Device: 0x20_0000_0000, Prefetchable: true},
	3: {Size: 32 << 20, Device: 0x40_0000_0000, Prefetchable: true},
}

func newTestPort(t *testing.T, ramSize int) (*Port, []byte) {
	t.Helper()
	mem := make([]byte, ramSize)
	var ram GuestRAM
	if err := ram.Replace([]RAMRegion{{GPA: 0x10000, Mem: mem}}, nil); err != nil {
		t.Fatal(err)
	}
	p, err := NewPort(Config{BARs: h100BARs}, &ram)
	if err != nil {
		t.Fatal(err)
	}
	return p, mem
}

func begin(t *testing.T, p *Port, a Access) Step {
	t.Helper()
	s, err := p.Begin(0, a)
	if err != nil {
		t.Fatalf("%+v: %v", a, err)
	}
	return s
}

// cplD answers request req with data (a CplD from the device).
func cplD(t *testing.T, req []byte, data []byte, st tlp.Status) []byte {
	t.Helper()
	v := tlp.View(req)
	k := tlp.CplD
	if st != tlp.StatusSC {
		k, data = tlp.Cpl, nil
	}
	bc := uint16(len(data))
	if bc == 0 {
		bc = 4
	}
	pk := tlp.Packet{Kind: k, CompleterID: tlp.NewID(3, 0, 0), RequesterID: v.RequesterID(), Tag: v.Tag(), Status: st,
		ByteCount: bc, Data: data}
	b, err := pk.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBARSizingIsShadowed: the guest sizes and places its BARs in the
// shadow (the device's own BARs never move), and sees 32-bit windows.
func TestBARSizingIsShadowed(t *testing.T) {
	t.Parallel()
	p, _ := newTestPort(t, 4096)
	for _, tc := range []struct {
		reg  uint64
		want uint32 // after writing all ones
	}{
		{0x10, 0xff00_0000},     // 16 MiB, 32-bit, non-prefetchable
		{0x14, 0xf000_0000 | 8}, // 256 MiB prefetchable window
		{0x18, 0},               // absent (the device's BAR1 upper half)
		{0x1c, 0xfe00_0000 | 8},
		{0x20, 0}, {0x24, 0}, {0x30, 0},
	} {
		if s := begin(t, p, Access{Op: CfgWrite, Addr: tc.reg, Size: 4, Val: 0xffff_ffff}); !s.Done || s.TLP != nil {
			t.Fatalf("write %#x left the shadow: %+v", tc.reg, s)
		}
		if s := begin(t, p, Access{Op: CfgRead, Addr: tc.reg, Size: 4}); !s.Done || uint32(s.Value) != tc.want {
			t.Errorf("BAR at %#x sized %#x, want %#x", tc.reg, s.Value, tc.want)
		}
	}
	begin(t, p, Access{Op: CfgWrite, Addr: 0x10, Size: 4, Val: 0xfc00_0000})
	// A 2-byte read of the register's upper half.
	if s := begin(t, p, Access{Op: CfgRead, Addr: 0x12, Size: 2}); s.Value != 0xfc00 {
		t.Errorf("upper half %#x", s.Value)
	}
	if n := p.Stats().ShadowAccesses.Load(); n != 16 {
		t.Errorf("shadow accesses %d, want 16", n)
	}
}

// TestConfigReadForwarded: other registers become CfgRd0/CfgWr0 to the
// device, and the completion's bytes are the answer.
func TestConfigReadForwarded(t *testing.T) {
	t.Parallel()
	p, _ := newTestPort(t, 4096)
	s := begin(t, p, Access{Op: CfgRead, Addr: 0x2, Size: 2})
	v := tlp.View(s.TLP)
	if s.Done || v.Kind() != tlp.CfgRd0 || v.TargetID() != tlp.NewID(3, 0, 0) || v.Register() != 0 || v.FirstBE() != 0xc {
		t.Fatalf("request %v target %v reg %#x BE %#x", v.Kind(), v.TargetID(), v.Register(), v.FirstBE())
	}
	if _, err := p.Begin(0, Access{Op: CfgRead, Addr: 0, Size: 4}); !errors.Is(err, ErrBusy) {
		t.Fatalf("second access while one is pending: %v", err)
	}
	a, err := p.Receive(cplD(t, s.TLP, []byte{0xde, 0x10, 0x30, 0x23}, tlp.StatusSC), nil)
	if err != nil || !a.Done || a.Value != 0x2330 {
		t.Fatalf("answer %+v %v, want device ID 0x2330", a, err)
	}
	s = begin(t, p, Access{Op: CfgWrite, Addr: 0x4, Size: 2, Val: 0x6})
	v = tlp.View(s.TLP)
	if v.Kind() != tlp.CfgWr0 || v.FirstBE() != 0x3 || !bytes.Equal(v.Payload(), []byte{6, 0, 0, 0}) {
		t.Fatalf("config write %v BE %#x data % x", v.Kind(), v.FirstBE(), v.Payload())
	}
	if a, _ := p.Receive(cplD(t, s.TLP, nil, tlp.StatusUR), nil); !a.Done || a.Value != 0 || a.Err == nil {
		t.Fatalf("UR to a config write: %+v", a)
	}
}

// TestBARAccessTranslated: the guest's window maps onto the device's BAR,
// byte enables and data placed as PCIe requires.
func TestBARAccessTranslated(t *testing.T) {
	t.Parallel()
	p, _ := newTestPort(t, 4096)
	begin(t, p, Access{Op: CfgWrite, Addr: 0x10, Size: 4, Val: 0xfc00_0000})
	begin(t, p, Access{Op: CfgWrite, Addr: 0x14, Size: 4, Val: 0xe000_0000})
	for _, tc := range []struct {
		a           Access
		addr        uint64
		dws         int
		first, last uint8
	}{
		{Access{Op: BarRead, Addr: 0xfc00_0000, Size: 4}, 0x9000_0000, 1, 0xf, 0},
		{Access{Op: BarRead, Addr: 0xfc00_0102, Size: 2}, 0x9000_0100, 1, 0xc, 0},
		{Access{Op: BarRead, Addr: 0xe000_1000, Size: 8}, 0x20_0000_1000, 2, 0xf, 0xf},
		{Access{Op: BarRead, Addr: 0xe000_1006, Size: 4}, 0x20_0000_1004, 2, 0xc, 0x3},
		{Access{Op: BarRead, Addr: 0xe000_1002, Size: 8}, 0x20_0000_1000, 3, 0xc, 0x3},
	} {
		s := begin(t, p, tc.a)
		v := tlp.View(s.TLP)
		if v.Kind() != tlp.MRd || v.Address() != tc.addr || int(v.Length()) != tc.dws || v.FirstBE() != tc.first || v.LastBE() != tc.last {
			t.Errorf("%#x: MRd at %#x len %d BE %#x/%#x, want %#x len %d BE %#x/%#x", tc.a.Addr, v.Address(), v.Length(),
				v.FirstBE(), v.LastBE(), tc.addr, tc.dws, tc.first, tc.last)
		}
		data := make([]byte, 4*tc.dws)
		for i := range data {
			data[i] = byte(0x10 + i)
		}
		a, _ := p.Receive(cplD(t, s.TLP, data, tlp.StatusSC), nil)
		var want uint64
		shift := int(tc.a.Addr & 3)
		for i := tc.a.Size - 1; i >= 0; i-- {
			want = want<<8 | uint64(data[shift+i])
		}
		if !a.Done || a.Value != want {
			t.Errorf("%#x: value %#x, want %#x", tc.a.Addr, a.Value, want)
		}
	}
	s := begin(t, p, Access{Op: BarWrite, Addr: 0xfc00_0206, Size: 2, Val: 0xbeef})
	v := tlp.View(s.TLP)
	if !s.Done || v.Kind() != tlp.MWr || v.Address() != 0x9000_0204 || v.FirstBE() != 0xc || !bytes.Equal(v.Payload(), []byte{0, 0, 0xef, 0xbe}) {
		t.Fatalf("posted write %+v: %v at %#x BE %#x % x", s.Done, v.Kind(), v.Address(), v.FirstBE(), v.Payload())
	}
	if s, err := p.Begin(0, Access{Op: BarRead, Addr: 0xfd00_0000, Size: 4}); !errors.Is(err, ErrNoBAR) || !s.Done || s.Value != 0xffff_ffff {
		t.Fatalf("read past BAR0: %+v %v", s, err)
	}
	if s, err := p.Begin(0, Access{Op: BarRead, Addr: 0xfcff_fffe, Size: 4}); !errors.Is(err, ErrNoBAR) || s.Value != 0xffff_ffff {
		t.Fatalf("read straddling BAR0's end: %+v %v", s, err)
	}
}

// TestTimeoutAndErrorsReadAllOnes: no completion, UR or poison: the guest
// reads all ones and the port takes the next access.
func TestTimeoutAndErrorsReadAllOnes(t *testing.T) {
	t.Parallel()
	p, _ := newTestPort(t, 4096)
	begin(t, p, Access{Op: CfgWrite, Addr: 0x10, Size: 4, Val: 0xfc00_0000})
	s := begin(t, p, Access{Op: BarRead, Addr: 0xfc00_0000, Size: 4})
	if d, ok := p.Deadline(); !ok || d != 50*time.Millisecond {
		t.Fatalf("deadline %v %v", d, ok)
	}
	if a := p.Expire(49 * time.Millisecond); a.Done {
		t.Fatal("expired early")
	}
	if a := p.Expire(50 * time.Millisecond); !a.Done || a.Value != 0xffff_ffff || a.Err == nil {
		t.Fatalf("timeout answer %+v", a)
	}
	// The late completion matches nothing.
	if a, _ := p.Receive(cplD(t, s.TLP, []byte{1, 2, 3, 4}, tlp.StatusSC), nil); a.Done || p.Stats().Unexpected.Load() != 1 {
		t.Fatalf("late completion answered %+v", a)
	}
	s = begin(t, p, Access{Op: BarRead, Addr: 0xfc00_0000, Size: 8})
	if a, _ := p.Receive(cplD(t, s.TLP, nil, tlp.StatusCA), nil); a.Value != AllOnes {
		t.Fatalf("CA answer %#x", a.Value)
	}
	s = begin(t, p, Access{Op: BarRead, Addr: 0xfc00_0000, Size: 4})
	if a := p.Abort(errors.New("link down")); !a.Done || a.Value != 0xffff_ffff {
		t.Fatalf("abort %+v", a)
	}
	_ = s
}

// TestDMAFromGuestRAM: the device's reads are served from guest RAM with
// completions split at RCB and MPS; reads and writes outside RAM get UR or
// are dropped, and touch no byte of it.
func TestDMAFromGuestRAM(t *testing.T) {
	t.Parallel()
	p, mem := newTestPort(t, 8192+512)
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	rd := build(t, tlp.Packet{Kind: tlp.MRd, RequesterID: tlp.NewID(3, 0, 0), Tag: 9, Address: 0x10000 + 32, Length: 256, FirstBE: 0xf, LastBE: 0xf})
	var got []byte
	var cpls int
	_, err := p.Receive(rd, func(b []byte) error {
		v := tlp.View(b)
		if v.Kind() != tlp.CplD || v.Tag() != 9 || v.RequesterID() != tlp.NewID(3, 0, 0) {
			t.Fatalf("completion %v tag %d", v.Kind(), v.Tag())
		}
		if len(v.Payload()) > 256 {
			t.Fatalf("CplD of %d bytes beyond MPS", len(v.Payload()))
		}
		got = append(got, v.Payload()...)
		cpls++
		return nil
	})
	if err != nil || !bytes.Equal(got, mem[32:32+1024]) || cpls != 5 {
		t.Fatalf("DMA read: %v, %d completions, equal %v", err, cpls, bytes.Equal(got, mem[32:32+1024]))
	}
	wr := build(t, tlp.Packet{Kind: tlp.MWr, RequesterID: tlp.NewID(3, 0, 0), Address: 0x10000 + 4096, FirstBE: 0xf, LastBE: 0xf, Data: bytes.Repeat([]byte{0xab}, 64)})
	if _, err := p.Receive(wr, nil); err != nil || !bytes.Equal(mem[4096:4096+64], bytes.Repeat([]byte{0xab}, 64)) {
		t.Fatalf("DMA write: %v", err)
	}
	snapshot := append([]byte(nil), mem...)
	// A write that starts inside RAM and runs past its end changes nothing.
	over := build(t, tlp.Packet{Kind: tlp.MWr, RequesterID: tlp.NewID(3, 0, 0), Address: 0x10000 + 8192 + 512 - 32, FirstBE: 0xf, LastBE: 0xf, Data: bytes.Repeat([]byte{0xcd}, 64)})
	_, _ = p.Receive(over, nil)
	outRd := build(t, tlp.Packet{Kind: tlp.MRd, RequesterID: tlp.NewID(3, 0, 0), Tag: 3, Address: 0x8000_0000, Length: 1, FirstBE: 0xf})
	var status tlp.Status = 0xff
	_, _ = p.Receive(outRd, func(b []byte) error { status = tlp.View(b).Status(); return nil })
	if !bytes.Equal(mem, snapshot) || status != tlp.StatusUR || p.Stats().DMAOutside.Load() != 2 {
		t.Fatalf("outside RAM: memory changed %v, status %v, counted %d", !bytes.Equal(mem, snapshot), status, p.Stats().DMAOutside.Load())
	}
	msi := build(t, tlp.Packet{Kind: tlp.MWr, RequesterID: tlp.NewID(3, 0, 0), Address: 0xfee0_0000, FirstBE: 0xf, Data: []byte{1, 0, 0, 0}})
	if _, err := p.Receive(msi, nil); err != nil || p.Stats().Interrupts.Load() != 1 {
		t.Fatalf("MSI: %v, counted %d", err, p.Stats().Interrupts.Load())
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	var ram GuestRAM
	for _, bars := range [][numBARs]BAR{{0: {Size: 3000}}, {0: {Size: 2 << 30}}, {0: {Size: 4096, Device: 2}}} {
		if _, err := NewPort(Config{BARs: bars}, &ram); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v", bars, err)
		}
	}
	if _, err := NewPort(Config{}, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("no RAM: %v", err)
	}
	p, _ := newTestPort(t, 4096)
	for _, a := range []Access{{Op: CfgRead, Addr: 4094, Size: 4}, {Op: CfgRead, Addr: 1, Size: 2}, {Op: BarRead, Size: 3}, {Op: 9}} {
		if _, err := p.Begin(0, a); !errors.Is(err, ErrAccess) {
			t.Errorf("%+v: %v", a, err)
		}
	}
}

func build(t *testing.T, pk tlp.Packet) []byte {
	t.Helper()
	b, err := pk.AppendTo(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
