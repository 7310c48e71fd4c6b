package tlp

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// Edge cases the other tests leave open: each test here pins a boundary
// that a one-character change of the code would move without another test
// noticing.

// TestMessageTC0EveryCode: of all 256 message codes, exactly those
// needsTC0 lists (independent_test.go, from the specification) are refused
// on TC 1, as Msg and as MsgD; every code passes on TC 0.
func TestMessageTC0EveryCode(t *testing.T) {
	t.Parallel()
	for code := 0; code < 256; code++ {
		for _, tc := range []byte{0, 1, 7} {
			// Msg, local routing (Type 10100), and MsgD of 1 DW.
			msg := []byte{0x34, tc << 4, 0, 0, 0x03, 0, 0, byte(code), 0, 0, 0, 0, 0, 0, 0, 0}
			msgD := []byte{0x74, tc << 4, 0, 1, 0x03, 0, 0, byte(code), 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4}
			for _, b := range [][]byte{msg, msgD} {
				_, err := Parse(b)
				switch {
				case tc != 0 && needsTC0(byte(code)):
					if RuleOf(err) != RuleMessageTC || !errors.Is(err, ErrMessageRule) {
						t.Errorf("code %#02x on TC %d (%x): %v, want rule %s", code, tc, b, err, RuleMessageTC)
					}
				case err != nil:
					t.Errorf("code %#02x on TC %d (%x): %v", code, tc, b, err)
				}
			}
		}
	}
}

// TestRequestLowerAddressAllSevenBits: the Lower Address a read's first
// completion carries keeps all 7 low address bits of the first enabled
// byte (also above 0x3f), and agrees with the splitter's first completion
// for random reads, TH set or not.
func TestRequestLowerAddressAllSevenBits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		p    Packet
		want uint8
	}{
		{Packet{Kind: MRd, Length: 1, FirstBE: 0x8, Address: 0x1040}, 0x43},
		{Packet{Kind: MRd, Length: 1, FirstBE: 0xf, Address: 0x107c}, 0x7c},
		{Packet{Kind: MRdLk, Length: 2, FirstBE: 0xe, LastBE: 0x1, Address: 0xfedc00f8}, 0x79},
		{Packet{Kind: MRd, Length: 4, FirstBE: 0xc, LastBE: 0xf, Address: 0x1_0000_0fc0}, 0x42},
		{Packet{Kind: MRd, TH: true, Length: 2, FirstBE: 0x2, LastBE: 0x1, Address: 0x10f0}, 0x70}, // ST 0x12: whole DWs
		{Packet{Kind: MWr, FirstBE: 0xc, Address: 0x20c4, Data: make([]byte, 4)}, 0x46},
		{Packet{Kind: CfgRd0, Length: 1, FirstBE: 0x8, Register: 0x7c}, 0},
		{Packet{Kind: FetchAdd, Address: 0x1078, Data: make([]byte, 8)}, 0},
	}
	for _, c := range cases {
		b, err := c.p.Encode()
		if err != nil {
			t.Fatalf("%v: %v", c.p, err)
		}
		if got := View(b).RequestLowerAddress(); got != c.want {
			t.Errorf("%v: Lower Address %#x, want %#x", c.p, got, c.want)
		}
	}

	r := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 5000; i++ {
		n := 1 + r.IntN(64)
		p := Packet{Kind: MRd, Length: uint16(n), TH: r.IntN(4) == 0, Address: r.Uint64N(1<<40) &^ 3}
		fbes, lbes := []uint8{0xf, 0xe, 0xc, 0x8}, []uint8{0xf, 0x7, 0x3, 0x1}
		p.FirstBE = fbes[r.IntN(4)]
		if n > 1 {
			p.LastBE = lbes[r.IntN(4)]
		}
		b, err := p.Encode()
		if err != nil {
			continue // crosses 4 KiB
		}
		v := View(b)
		s, err := SplitterFor(v, 128<<r.IntN(6), 64)
		if err != nil {
			t.Fatal(err)
		}
		c, ok := s.Next()
		if !ok || c.LowerAddress != v.RequestLowerAddress() || c.ByteCount != v.RequestBytes() {
			t.Fatalf("%v: first completion %+v, request says lower address %#x byte count %d",
				p, c, v.RequestLowerAddress(), v.RequestBytes())
		}
	}
}

// TestClassOfEveryKind: the flow-control class of each kind, on Kind,
// View and Packet: memory writes and both message kinds are posted,
// completions are completions, every other request is non-posted.
func TestClassOfEveryKind(t *testing.T) {
	t.Parallel()
	want := map[Kind]Class{
		MRd: NonPosted, MRdLk: NonPosted, MWr: Posted, IORd: NonPosted, IOWr: NonPosted,
		CfgRd0: NonPosted, CfgWr0: NonPosted, CfgRd1: NonPosted, CfgWr1: NonPosted,
		Msg: Posted, MsgD: Posted, Cpl: Completion, CplD: Completion, CplLk: Completion, CplDLk: Completion,
		FetchAdd: NonPosted, Swap: NonPosted, CAS: NonPosted,
	}
	for k := MRd; k < kindCount; k++ {
		if got := k.Class(); got != want[k] {
			t.Errorf("%v: class %v, want %v", k, got, want[k])
		}
		if k.IsPosted() != (want[k] == Posted) || k.IsNonPosted() != (want[k] == NonPosted) {
			t.Errorf("%v: posted %v non-posted %v, class %v", k, k.IsPosted(), k.IsNonPosted(), want[k])
		}
	}
	// A MsgD of 5 DW on the wire: posted, one header and two data credits.
	v, err := Parse(unhex(t, "74000005 03000050 00000000 00000000"+
		"00000001 00000002 00000003 00000004 00000005"))
	if err != nil {
		t.Fatal(err)
	}
	if c, h, d := v.Credits(); c != Posted || h != 1 || d != 2 {
		t.Errorf("MsgD 5 DW: %v %d %d, want P 1 2", c, h, d)
	}
}

// TestReqSplitterTopOfAddressSpace: transfers that end at the top of the
// 64-bit address space split like any other (the next max boundary there
// wraps to 0), and one that would run past it is refused.
func TestReqSplitterTopOfAddressSpace(t *testing.T) {
	t.Parallel()
	for _, max := range []int{128, 512, 4096} {
		for _, size := range []int{0, 1, 2, 3, 5, 99, 127, 128, 129, 1000, 4095, 4096, 9000} {
			addr := ^uint64(0) - uint64(size) // the transfer ends at 2^64 - 1
			s, err := NewReqSplitter(addr, size, max)
			if err != nil {
				t.Fatalf("%d bytes at %#x, max %d: %v", size, addr, max, err)
			}
			sum, n := 0, 0
			for q := range s.All() {
				n++
				if q.Offset != sum {
					t.Fatalf("%d bytes at %#x, max %d: request %+v at offset %d, want %d", size, addr, max, q, q.Offset, sum)
				}
				if 4*q.Length > max || int(q.Address&0xfff)+4*q.Length > 4096 {
					t.Fatalf("%d bytes at %#x, max %d: request %+v over max or across 4 KiB", size, addr, max, q)
				}
				if size > 0 && ByteCount(q.Length, q.FirstBE, q.LastBE) != q.Bytes {
					t.Fatalf("%d bytes at %#x, max %d: %+v: BEs cover %d bytes", size, addr, max, q, ByteCount(q.Length, q.FirstBE, q.LastBE))
				}
				p := Packet{Kind: MWr, Address: q.Address, FirstBE: q.FirstBE, LastBE: q.LastBE, Data: make([]byte, 4*q.Length)}
				if _, err := p.Encode(); err != nil {
					t.Fatalf("%d bytes at %#x, max %d: %+v: %v", size, addr, max, q, err)
				}
				sum += q.Bytes
				if n > size/max+2 {
					t.Fatalf("%d bytes at %#x, max %d: more than %d requests", size, addr, max, n)
				}
			}
			if sum != size {
				t.Fatalf("%d bytes at %#x, max %d: requests move %d bytes", size, addr, max, sum)
			}
		}
	}
	for _, c := range []struct {
		addr uint64
		size int
		ok   bool
	}{
		{^uint64(0) - 10, 10, true},
		{^uint64(0) - 10, 11, false},
		{^uint64(0), 0, true},
		{^uint64(0), 1, false},
		{1 << 63, 1 << 62, true},
		{1<<63 + 1<<62, 1 << 62, false},
	} {
		_, err := NewReqSplitter(c.addr, c.size, 256)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrField)) {
			t.Errorf("%d bytes at %#x: %v, want ok %v", c.size, c.addr, err, c.ok)
		}
	}
}

// TestEncodeRejectsConfigRegister: the register offset of a configuration
// request is a multiple of 4 up to 0xffc; anything else is refused rather
// than masked into another register.
func TestEncodeRejectsConfigRegister(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reg uint16
		ok  bool
	}{{0, true}, {0x100, true}, {0xffc, true}, {0xffe, false}, {0x1000, false}, {0x1004, false}, {0xfffc, false}, {0x102, false}} {
		for _, k := range []Kind{CfgRd0, CfgRd1} {
			p := Packet{Kind: k, Length: 1, FirstBE: 0xf, TargetID: NewID(3, 0, 0), Register: c.reg}
			b, err := p.Encode()
			switch {
			case c.ok && err != nil:
				t.Errorf("%v register %#x: %v", k, c.reg, err)
			case c.ok && View(b).Register() != c.reg:
				t.Errorf("%v register %#x encodes as %#x", k, c.reg, View(b).Register())
			case !c.ok && RuleOf(err) != RuleFieldRange:
				t.Errorf("%v register %#x: %v, want rule %s", k, c.reg, err, RuleFieldRange)
			}
		}
	}
}

// TestSetAddressKeepsPH: SetAddress rewrites the address of 3- and 4-DW
// memory requests in place and keeps the processing hint in bits 1:0.
func TestSetAddressKeepsPH(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    Packet
		to   uint64
		want uint64
	}{
		{Packet{Kind: MWr, TH: true, PH: 2, FirstBE: 0xf, Address: 0x1000, Data: make([]byte, 4)}, 0x2000_0004, 0x2000_0004},
		{Packet{Kind: MRd, TH: true, PH: 3, Length: 1, FirstBE: 0xf, Address: 0xfffffff0}, 0x10, 0x10},
		{Packet{Kind: MRd, TH: true, PH: 1, Length: 1, FirstBE: 0xf, Address: 0x1_0000_1000}, 0x2_0000_2008, 0x2_0000_2008},
		{Packet{Kind: MWr, TH: true, PH: 3, FirstBE: 0xf, Address: 0x1_0000_1000, Data: make([]byte, 4)}, 0x7, 0x4},
	} {
		b, err := c.p.Encode()
		if err != nil {
			t.Fatalf("%v: %v", c.p, err)
		}
		v := View(b)
		v.SetAddress(c.to)
		if v.Address() != c.want || v.PH() != c.p.PH {
			t.Errorf("%v: SetAddress(%#x): address %#x PH %d, want %#x PH %d", c.p, c.to, v.Address(), v.PH(), c.want, c.p.PH)
		}
		if _, err := Parse(b); err != nil {
			t.Errorf("%v after SetAddress(%#x): %v", c.p, c.to, err)
		}
	}
}
