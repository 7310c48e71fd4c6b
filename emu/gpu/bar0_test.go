package gpu

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// TestBAR0SubDwordAccess: registers are dwords, but a requester may read
// or write any bytes of them, as libtlp's one-byte reads do. Each byte
// read comes from its place in its register (a 1-byte read at BOOT_0+2
// returned BOOT_0's first byte, and a 16-byte read with 1-byte requests
// its first byte 16 times); a write changes the bytes it carries and no
// other, and an 8-byte write sets both registers it covers (the second
// was dropped).
func TestBAR0SubDwordAccess(t *testing.T) {
	t.Parallel()
	s, g, u := vramChannel(t)
	const bar0 = 0x9000_0000
	g.Cfg.Set32(pcie.CfgBAR0, bar0)
	boot0 := g.readReg(RegBoot0)
	read := func(off uint64, n int) []byte {
		t.Helper()
		u.tlps = u.tlps[:0]
		g.ReceiveTLP(pcie.AppendMRd(nil, 0x0100, 1, bar0+off, n))
		pcie.RunUntil(s, s.Now()+time.Millisecond)
		var got []byte
		for _, c := range u.tlps {
			if v := tlp.View(c); v.Kind() == tlp.CplD {
				got = append(got, v.Payload()[v.LowerAddress()&3:][:min(int(v.ByteCount()), len(v.Payload())-int(v.LowerAddress()&3))]...)
			}
		}
		return got
	}
	var want [4]byte
	binary.LittleEndian.PutUint32(want[:], boot0)
	for i := range 4 {
		if got := read(RegBoot0+uint64(i), 1); len(got) != 1 || got[0] != want[i] {
			t.Errorf("1-byte read of BOOT_0+%d: %x, want %x", i, got, want[i])
		}
	}
	if got := read(RegBoot0+1, 2); len(got) != 2 || got[0] != want[1] || got[1] != want[2] {
		t.Errorf("2-byte read of BOOT_0+1: %x, want %x", got, want[1:3])
	}

	g.writeReg(RegScratch, 0x11223344)
	g.ReceiveTLP(pcie.AppendMWr(nil, 0x0100, bar0+RegScratch+2, []byte{0xaa}))
	pcie.RunUntil(s, s.Now()+time.Millisecond)
	if got := g.readReg(RegScratch); got != 0x11aa3344 {
		t.Errorf("scratch after a 1-byte write of 0xaa at +2: %#x, want 0x11aa3344", got)
	}
	base := ChannelReg(1, ChGPBaseLo)
	var q [8]byte
	binary.LittleEndian.PutUint64(q[:], 0x0000_0012_3456_7000)
	g.ReceiveTLP(pcie.AppendMWr(nil, 0x0100, bar0+base, q[:]))
	pcie.RunUntil(s, s.Now()+time.Millisecond)
	if lo, hi := g.readReg(base), g.readReg(ChannelReg(1, ChGPBaseHi)); lo != 0x34567000 || hi != 0x12 {
		t.Errorf("channel 1 base after an 8-byte write: hi %#x lo %#x, want 0x12 0x34567000", hi, lo)
	}
}
