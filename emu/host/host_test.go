package host

import (
	"errors"
	"testing"
	"time"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/sim"
	"github.com/dxpu/dxpu/tlp"
)

// A switch with no device behind it: enumeration numbers every port, gives
// every slot its windows, and finds no endpoint; reads of empty slots end
// in Unsupported Request, not in a hang.
func TestEmptySwitchEnumeration(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	rc := New(s, Config{})
	sw := NewSwitch(s, 32)
	native := pcie.LinkConfig{Latency: 150 * time.Nanosecond, BytesPerSec: pcie.Gen5x16BytesPerSec}
	up, err := rc.AddRootPort(&pcie.LinkPath{S: s, Down: native, Up: native}, sw)
	if err != nil {
		t.Fatal(err)
	}
	sw.AttachUp(up)
	devs, err := rc.Enumerate(EnumConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 0 {
		t.Fatalf("found %d devices behind an empty switch", len(devs))
	}
	if sw.USP.Secondary() != 2 || sw.USP.Subordinate() != 34 {
		t.Fatalf("switch buses %d..%d, want 2..34", sw.USP.Secondary(), sw.USP.Subordinate())
	}
	var prevEnd uint64
	for i, p := range sw.DSPs {
		if p.Secondary() != uint8(3+i) {
			t.Fatalf("port %d secondary bus %d", i, p.Secondary())
		}
		b, l := p.PrefWindow()
		if b <= prevEnd || l-b+1 != 256<<30 {
			t.Fatalf("port %d prefetchable window %#x..%#x overlaps or has the wrong size", i, b, l)
		}
		prevEnd = l
	}
	_, err = rc.CfgRead32(tlp.NewID(3, 0, 0), 0)
	if !errors.Is(err, ErrUR) {
		t.Fatalf("empty slot read: %v, want UR", err)
	}
	if _, err := rc.MMIORead32(0x12345000); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("read of an unmapped address: %v", err)
	}
	// Every DSP is hot-plug capable with its slot number.
	slotCap := sw.DSPs[7].Cfg.Get32(PortCapPCIe + PCIeSlotCap)
	if slotCap&SlotCapHotPlug == 0 || slotCap>>19 != 8 {
		t.Fatalf("slot capabilities %#x", slotCap)
	}
}

func TestMSIAndWatch(t *testing.T) {
	t.Parallel()
	s := sim.New(1)
	rc := New(s, Config{})
	var msi []uint32
	rc.OnMSI = func(d uint32) { msi = append(msi, d) }
	rp := &RootPortFn{Port: NewPort(RootPort, 1, 1, 1, false), rc: rc}
	fired := 0
	rc.Watch(0x1000, func() { fired++ })
	rp.ReceiveTLP(pcie.AppendMWr(nil, tlp.NewID(1, 0, 0), 0x1004, []byte{1, 2, 3, 4}))
	rp.ReceiveTLP(pcie.AppendMWr(nil, tlp.NewID(1, 0, 0), MSIBase, []byte{0x42, 0, 0, 0}))
	if fired != 1 || len(msi) != 1 || msi[0] != 0x42 {
		t.Fatalf("watch fired %d, MSIs %v", fired, msi)
	}
	if rc.Mem.Uint64(0x1000)>>32 != 0x04030201 {
		t.Fatal("DMA write not in memory")
	}
	if rc.Mem.Pages() != 1 {
		t.Fatal("the MSI write landed in memory")
	}
}
