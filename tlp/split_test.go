package tlp

import (
	"math/rand/v2"
	"testing"
)

func TestByteCountTable(t *testing.T) {
	t.Parallel()
	// The specification's table: Length 1 counts from the first to the
	// last enabled byte of First BE; longer requests subtract the disabled
	// bytes before First BE and after Last BE.
	cases := []struct {
		length   int
		fbe, lbe uint8
		want     int
	}{
		{1, 0b1001, 0, 4}, {1, 0b1111, 0, 4}, {1, 0b0101, 0, 3}, {1, 0b0111, 0, 3},
		{1, 0b1010, 0, 3}, {1, 0b1110, 0, 3}, {1, 0b0011, 0, 2}, {1, 0b0110, 0, 2},
		{1, 0b1100, 0, 2}, {1, 0b0001, 0, 1}, {1, 0b0010, 0, 1}, {1, 0b0100, 0, 1},
		{1, 0b1000, 0, 1}, {1, 0b0000, 0, 1},
		{2, 0xf, 0xf, 8}, {2, 0xe, 0xf, 7}, {2, 0xc, 0x7, 5}, {2, 0x8, 0x1, 2},
		{1024, 0xf, 0xf, 4096}, {3, 0x8, 0x1, 6}, {2, 0b0101, 0b1010, 8},
	}
	for _, c := range cases {
		if got := ByteCount(c.length, c.fbe, c.lbe); got != c.want {
			t.Errorf("ByteCount(%d, %04b, %04b) = %d, want %d", c.length, c.fbe, c.lbe, got, c.want)
		}
	}
	if a := FirstByteAddress(0x1004, 0xc); a != 0x1006 {
		t.Errorf("first byte %#x", a)
	}
	if a := LastByteAddress(0x1004, 2, 0xc, 0x3); a != 0x1009 {
		t.Errorf("last byte %#x", a)
	}
}

func collect(t *testing.T, addr uint64, length int, fbe, lbe uint8, mps, rcb int) []CplPart {
	t.Helper()
	cs, err := AppendCompletions(nil, addr, length, fbe, lbe, mps, rcb)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestSplitCompletionsWorked(t *testing.T) {
	t.Parallel()
	// 512 bytes from 0x1010, MPS 128, RCB 64: the first completion stops
	// at the RCB boundary 0x1080 (112 bytes); the middle ones carry 128;
	// the last the remaining 16.
	cs := collect(t, 0x1010, 128, 0xf, 0xf, 128, 64)
	want := []CplPart{
		{Offset: 0, Bytes: 112, Length: 28, ByteCount: 512, LowerAddress: 0x10, Address: 0x1010},
		{Offset: 112, Bytes: 128, Length: 32, ByteCount: 400, LowerAddress: 0x00, Address: 0x1080},
		{Offset: 240, Bytes: 128, Length: 32, ByteCount: 272, LowerAddress: 0x00, Address: 0x1100},
		{Offset: 368, Bytes: 128, Length: 32, ByteCount: 144, LowerAddress: 0x00, Address: 0x1180},
		{Offset: 496, Bytes: 16, Length: 4, ByteCount: 16, LowerAddress: 0x00, Address: 0x1200},
	}
	if len(cs) != len(want) {
		t.Fatalf("%d completions: %+v", len(cs), cs)
	}
	for i := range want {
		if cs[i] != want[i] {
			t.Errorf("completion %d: %+v, want %+v", i, cs[i], want[i])
		}
	}
	// Byte enables: 4 bytes from 0x1005; Lower Address 05, 2 DWs.
	cs = collect(t, 0x1004, 2, 0xe, 0x1, 256, 128)
	if len(cs) != 1 || cs[0] != (CplPart{Bytes: 4, Length: 2, ByteCount: 4, LowerAddress: 5, Address: 0x1005}) {
		t.Errorf("BE read: %+v", cs)
	}
	// Zero-length read: one 1-DW completion with Byte Count 1.
	cs = collect(t, 0x2000, 1, 0, 0, 256, 64)
	if len(cs) != 1 || cs[0].ByteCount != 1 || cs[0].Length != 1 || !cs[0].Last() {
		t.Errorf("zero-length read: %+v", cs)
	}
	// 4 KiB read with MPS 4096 from an aligned address: one completion,
	// Byte Count 4096 (encoded 0).
	cs = collect(t, 0x3000, 1024, 0xf, 0xf, 4096, 128)
	if len(cs) != 1 || cs[0].ByteCount != 4096 || cs[0].Length != 1024 {
		t.Errorf("4 KiB read: %+v", cs)
	}
	if _, err := NewCplSplitter(0, 1, 0xf, 0, 100, 64); err == nil {
		t.Error("MPS 100 accepted")
	}
	if _, err := NewCplSplitter(0, 1, 0xf, 0, 128, 256); err == nil {
		t.Error("RCB above MPS accepted")
	}
}

// TestSplitCompletionsMinimal: a read that fits in one completion gets one,
// also when it does not start on an RCB boundary: 256 bytes at 0x10020
// with MPS 256 and RCB 64 end at 0x10120, within MPS of the start, so the
// RCB rule (for completions that are not the last) does not apply.
func TestSplitCompletionsMinimal(t *testing.T) {
	t.Parallel()
	cs := collect(t, 0x10020, 64, 0xf, 0xf, 256, 64)
	want := CplPart{Bytes: 256, Length: 64, ByteCount: 256, LowerAddress: 0x20, Address: 0x10020}
	if len(cs) != 1 || cs[0] != want {
		t.Fatalf("256 bytes at 0x10020, MPS 256, RCB 64: %d completions %+v, want one %+v", len(cs), cs, want)
	}
}

func TestSplitCompletionsProperty(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 5000; i++ {
		n := 1 + r.IntN(1024)
		off := 4 * r.IntN(1024-n+1)
		addr := 0x10000 + uint64(off)
		fbe, lbe := []uint8{0xf, 0xe, 0xc, 0x8}[r.IntN(4)], []uint8{0xf, 0x7, 0x3, 0x1}[r.IntN(4)]
		if n == 1 {
			fbe, lbe = uint8(r.IntN(16)), 0
		}
		mps := 128 << r.IntN(6)
		rcb := []int{64, 128}[r.IntN(2)]
		total := ByteCount(n, fbe, lbe)
		next := FirstByteAddress(addr, fbe)
		sum := 0
		s, err := NewCplSplitter(addr, n, fbe, lbe, mps, rcb)
		if err != nil {
			t.Fatal(err)
		}
		var cs []CplPart
		for c := range s.All() {
			cs = append(cs, c)
		}
		for j, c := range cs {
			last := j == len(cs)-1
			if c.Address != next || c.ByteCount != total-sum || c.LowerAddress != uint8(c.Address&0x7f) {
				t.Fatalf("%d/%d: %+v (next %#x, owed %d)", i, j, c, next, total-sum)
			}
			if 4*c.Length > mps {
				t.Fatalf("%d/%d: %d DW over MPS %d", i, j, c.Length, mps)
			}
			end := c.Address + uint64(c.Bytes)
			if !last && end%uint64(rcb) != 0 {
				t.Fatalf("%d/%d: completion ends at %#x, not on RCB %d", i, j, end, rcb)
			}
			// As large as the rules allow: a completion that is not the
			// last could neither have ended the request nor reached the
			// next RCB boundary within MPS.
			if start := c.Address &^ 3; !last && (next+uint64(total-sum)-start <= uint64(mps) || end+uint64(rcb)-start <= uint64(mps)) {
				t.Fatalf("%d/%d: %+v stops short (request ends at %#x, MPS %d, RCB %d)", i, j, c, next+uint64(total-sum), mps, rcb)
			}
			if c.Last() != last {
				t.Fatalf("%d/%d: Last() %v", i, j, c.Last())
			}
			// The completion is a valid CplD.
			p := Packet{Kind: CplD, ByteCount: uint16(c.ByteCount), LowerAddress: c.LowerAddress,
				Data: make([]byte, 4*c.Length)}
			if _, err := p.Encode(); err != nil {
				t.Fatalf("%d/%d: %+v as CplD: %v", i, j, c, err)
			}
			next = end
			sum += c.Bytes
		}
		if sum != total && !(n == 1 && fbe == 0) {
			t.Fatalf("%d: completions return %d of %d bytes", i, sum, total)
		}
	}
}

func TestSplitRequests(t *testing.T) {
	t.Parallel()
	s, err := NewReqSplitter(0x0ffe, 1000, 256)
	if err != nil {
		t.Fatal(err)
	}
	var rs []Request
	for q := range s.All() {
		rs = append(rs, q)
	}
	if len(rs) != 5 {
		t.Fatalf("%d requests: %+v", len(rs), rs)
	}
	if rs[0] != (Request{Address: 0xffc, Length: 1, FirstBE: 0xc, LastBE: 0, Offset: 0, Bytes: 2}) {
		t.Errorf("first %+v", rs[0])
	}
	if rs[1] != (Request{Address: 0x1000, Length: 64, FirstBE: 0xf, LastBE: 0xf, Offset: 2, Bytes: 256}) {
		t.Errorf("second %+v", rs[1])
	}
	// 0x0ffe + 1000 = 0x13e6: the last runs 0x1300..0x13e5, Last BE 0011.
	if l := rs[4]; l.Address != 0x1300 || l.Bytes != 230 || l.LastBE != 0x3 || l.Length != 58 {
		t.Errorf("last %+v", l)
	}

	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 3000; i++ {
		addr := r.Uint64() >> uint(r.IntN(64))
		size := r.IntN(20000)
		max := 128 << r.IntN(6)
		s, err := NewReqSplitter(addr, size, max)
		if err != nil {
			continue // range overflow near 2^64
		}
		sum := 0
		for q := range s.All() {
			p := Packet{Kind: MWr, Address: q.Address, FirstBE: q.FirstBE, LastBE: q.LastBE,
				Data: make([]byte, 4*q.Length)}
			if _, err := p.Encode(); err != nil {
				t.Fatalf("%d: %+v: %v", i, q, err)
			}
			if 4*q.Length > max {
				t.Fatalf("%d: %+v over max %d", i, q, max)
			}
			if size > 0 && ByteCount(q.Length, q.FirstBE, q.LastBE) != q.Bytes {
				t.Fatalf("%d: %+v: BEs cover %d bytes", i, q, ByteCount(q.Length, q.FirstBE, q.LastBE))
			}
			if q.Offset != sum {
				t.Fatalf("%d: offset %d, want %d", i, q.Offset, sum)
			}
			sum += q.Bytes
		}
		if sum != size {
			t.Fatalf("%d: requests move %d of %d bytes", i, sum, size)
		}
	}
}

func TestSplittersAllocateNothing(t *testing.T) {
	// Not parallel: it measures the process's allocations.
	allocs := testing.AllocsPerRun(100, func() {
		s, _ := NewCplSplitter(0x1010, 1024-4, 0xf, 0xf, 256, 64)
		for {
			if _, ok := s.Next(); !ok {
				break
			}
		}
		q, _ := NewReqSplitter(0x1010, 9000, 512)
		for {
			if _, ok := q.Next(); !ok {
				break
			}
		}
	})
	if allocs != 0 {
		t.Errorf("splitters allocated %.1f times", allocs)
	}
}

func TestCredits(t *testing.T) {
	t.Parallel()
	v, _ := Parse(unhex(t, "400c4002 0011003c 00001004 deadbeef 01020304"))
	if c, h, d := v.Credits(); c != Posted || h != 1 || d != 1 {
		t.Errorf("MWr 2 DW: %v %d %d", c, h, d)
	}
	p := Packet{Kind: CplD, Length: 17}
	if p.DataCredits() != 5 || p.Class() != Completion {
		t.Errorf("CplD 17 DW: %d credits, class %v", p.DataCredits(), p.Class())
	}
	if (&Packet{Kind: MRd, Length: 1024}).DataCredits() != 0 || MRd.Class() != NonPosted {
		t.Error("MRd consumes no data credits and is non-posted")
	}
}

func TestSplitterForRequest(t *testing.T) {
	t.Parallel()
	// MRd of 3 DW at 0x1004, First BE 1100, Last BE 0011: 8 bytes from
	// 0x1006; its first completion says Lower Address 0x06, Byte Count 8.
	v, err := Parse(unhex(t, "00000003 010005 3c 00001004"))
	if err != nil {
		t.Fatal(err)
	}
	if v.RequestBytes() != 8 || v.RequestLowerAddress() != 0x06 {
		t.Errorf("bytes %d lower address %#x", v.RequestBytes(), v.RequestLowerAddress())
	}
	s, err := SplitterFor(v, 128, 64)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := s.Next()
	if !ok || c.ByteCount != 8 || c.LowerAddress != 6 || c.Length != 3 || !c.Last() {
		t.Errorf("completion %+v", c)
	}
	// A read with TH: BE fields hold a steering tag, whole DWs are read.
	th, _ := Parse(unhex(t, "00010002 01000512 fedc0010"))
	if th.RequestBytes() != 8 || th.RequestLowerAddress() != 0x10 {
		t.Errorf("TH read: %d bytes, lower address %#x", th.RequestBytes(), th.RequestLowerAddress())
	}
	if _, err := SplitterFor(View(unhex(t, "40000001 0100050f fedc0010 00000000")), 128, 64); err == nil {
		t.Error("SplitterFor accepted a write")
	}
	if MaxSize(0) != 128 || MaxSize(5) != 4096 {
		t.Errorf("MaxSize %d %d", MaxSize(0), MaxSize(5))
	}
}
