package topo

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// FuzzComponentsTLPs feeds arbitrary TLP bytes to every emulated component
// (the GPU from its link, the host bridge's switch from both sides, the root
// port from below). Invariants: nothing panics, the simulation drains
// within a bounded number of events, and the GPU's identity (vendor,
// device, class, which no write may change) still reads correctly through
// the fabric after a TLP hit the GPU or the root port.
func FuzzComponentsTLPs(f *testing.F) {
	seeds := [][]byte{
		pcie.AppendMRd(nil, tlp.NewID(3, 0, 0), 5, 0x100000000, 512),
		pcie.AppendMWr(nil, 0, 0x80000000, []byte{1, 2, 3, 4}),
		pcie.AppendCfg(nil, false, 0, 1, tlp.NewID(3, 0, 0), 0x10, 0xf, []byte{0xff, 0xff, 0xff, 0xff}),
		pcie.AppendCplD(nil, 0, tlp.NewID(3, 0, 0), 300, 8, 0, []byte{1, 2, 3, 4, 5, 6, 7, 8}),
		{0x60, 0, 0, 1, 0, 0, 0, 0xf},
	}
	for _, s := range seeds {
		f.Add(byte(0), s)
	}
	f.Fuzz(func(t *testing.T, target byte, raw []byte) {
		w, err := Build(Options{GPUs: 1, Fabric: &Fabric{RTT: time.Microsecond}, Ports: 2})
		if err != nil {
			t.Fatal(err)
		}
		want := w.GPUs[0].ConfigBytes()[:12]
		v := tlp.View(raw)
		switch target % 4 {
		case 0:
			w.GPUs[0].ReceiveTLP(v)
		case 1:
			w.Switch.ReceiveTLP(v)
		case 2:
			w.Host.Ports[0].ReceiveTLP(v)
		case 3:
			w.GPUs[0].Attach(nil) // stray TLPs from a removed GPU are ignored too
			w.GPUs[0].ReceiveTLP(v)
		}
		if !w.S.RunWhile(func() bool { return w.S.Pending() > 0 }, 1_000_000) {
			t.Fatal("simulation did not drain")
		}
		if target%4 == 1 || target%4 == 3 {
			// A config write from the host side may legitimately renumber
			// the switch's buses; a removed GPU cannot be read.
			return
		}
		id := w.Devices[0].ID
		for off := 0; off < 12; off += 4 {
			got, err := w.Host.CfgRead32(id, uint16(off))
			if err != nil {
				t.Fatalf("config read after fuzz TLP: %v", err)
			}
			if got != binary.LittleEndian.Uint32(want[off:]) && off != 4 {
				t.Fatalf("identity at %#x changed: %#x", off, got)
			}
		}
	})
}
