package pcie

import (
	"bytes"
	"testing"

	"github.com/dxpu/dxpu/tlp"
)

func TestBuildersRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr uint64
		n    int
	}{{0x1000, 512}, {0x1002, 3}, {0x100000ffc, 4}, {0x7, 1}, {0x10, 4096}, {0x201, 13}} {
		v := tlp.View(AppendMRd(nil, tlp.NewID(3, 0, 0), 777, c.addr, c.n))
		if !Valid(v) || v.Kind() != tlp.MRd || v.Tag() != 777 || v.RequesterID() != tlp.NewID(3, 0, 0) {
			t.Fatalf("MRd %+v: kind %v tag %d", c, v.Kind(), v.Tag())
		}
		if a, n := RequestBytes(v); a != c.addr || n != c.n {
			t.Fatalf("MRd %+v: request covers %#x+%d", c, a, n)
		}
		if v.Is4DW() != (c.addr >= 1<<32) {
			t.Fatalf("MRd %+v: 4DW=%v", c, v.Is4DW())
		}
		data := make([]byte, c.n)
		for i := range data {
			data[i] = byte(i + 1)
		}
		w := tlp.View(AppendMWr(nil, 0, c.addr, data))
		a, n := RequestBytes(w)
		lead := int(c.addr & 3)
		if a != c.addr || n != c.n || !bytes.Equal(w.Payload()[lead:lead+n], data) {
			t.Fatalf("MWr %+v: covers %#x+%d", c, a, n)
		}
	}
	cpl := tlp.View(AppendCplD(nil, tlp.NewID(1, 0, 0), 0, 300, 64, 0x1043, []byte{9, 9, 9, 9, 9}))
	if cpl.Kind() != tlp.CplD || cpl.Tag() != 300 || cpl.ByteCount() != 64 || cpl.LowerAddress() != 0x43 || cpl.PayloadLen() != 8 {
		t.Fatalf("CplD: %v tag %d bc %d la %#x len %d", cpl.Kind(), cpl.Tag(), cpl.ByteCount(), cpl.LowerAddress(), cpl.PayloadLen())
	}
	cfg := tlp.View(AppendCfg(nil, true, 0, 9, tlp.NewID(5, 0, 0), 0x104, 0xf, []byte{1, 2, 3, 4}))
	if cfg.Kind() != tlp.CfgWr1 || cfg.Register() != 0x104 || cfg.TargetID() != tlp.NewID(5, 0, 0) {
		t.Fatalf("CfgWr1: %v reg %#x target %v", cfg.Kind(), cfg.Register(), cfg.TargetID())
	}
}

func TestSplitCompletionRules(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr     uint64
		n        int
		mps, rcb int
	}{{0x1000, 512, 256, 64}, {0x1010, 512, 256, 64}, {0x1044, 300, 128, 128}, {0x0, 4096, 512, 64}, {0x3c, 8, 256, 64}} {
		var total int
		first := true
		SplitCompletion(c.addr, c.n, c.mps, c.rcb, func(a uint64, k int) {
			if k > c.mps || k <= 0 {
				t.Fatalf("%+v: completion of %d bytes", c, k)
			}
			end := a + uint64(k)
			if end != c.addr+uint64(c.n) && end%uint64(c.rcb) != 0 {
				t.Fatalf("%+v: completion %#x+%d does not end on RCB", c, a, k)
			}
			if !first && a%uint64(c.rcb) != 0 {
				t.Fatalf("%+v: middle completion starts off RCB at %#x", c, a)
			}
			first = false
			total += k
		})
		if total != c.n {
			t.Fatalf("%+v: completions cover %d bytes", c, total)
		}
	}
	var reqs int
	SplitRead(0xf80, 5000, 512, func(a uint64, n int) {
		if n > 512 || a/4096 != (a+uint64(n)-1)/4096 {
			t.Fatalf("request %#x+%d crosses 4 KiB or exceeds MRRS", a, n)
		}
		reqs++
	})
	if reqs != 11 {
		t.Fatalf("%d requests", reqs)
	}
}

func TestConfigSpaceBARSizing(t *testing.T) {
	t.Parallel()
	var c ConfigSpace
	c.DefineBAR(BAR{Index: 1, Size: 128 << 30, Is64: true, Prefetch: true})
	c.Write(0x14, 0xf, [4]byte{0xff, 0xff, 0xff, 0xff})
	c.Write(0x18, 0xf, [4]byte{0xff, 0xff, 0xff, 0xff})
	lo, hi := c.Read32(0x14), c.Read32(0x18)
	if lo != 0x0000000c || hi != 0xffffffe0 {
		t.Fatalf("sizing reads %#x %#x, want 0xc 0xffffffe0 (128 GiB, 64-bit prefetchable)", lo, hi)
	}
	c.Write(0x14, 0xf, [4]byte{0, 0, 0, 0})
	c.Write(0x18, 0xf, [4]byte{0x20, 0, 0, 0})
	if a := c.BARAddress(1); a != 0x20<<32 {
		t.Fatalf("BAR1 = %#x", a)
	}
}

func BenchmarkLinkSendTLP(b *testing.B) {
	b.ReportAllocs()
	s := newSim()
	var got int
	l := NewLink(s, LinkConfig{Latency: 100, BytesPerSec: Gen5x16BytesPerSec, OverheadBytes: PCIeOverheadBytes},
		ReceiverFunc(func(v tlp.View) { got += len(v) }))
	pkt := AppendCplD(nil, 0, 0x300, 5, 256, 0, make([]byte, 256))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l.SendTLP(pkt)
		s.Step()
	}
	if got == 0 {
		b.Fatal("nothing delivered")
	}
}
