package host

import (
	"fmt"
	"sort"

	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// EnumConfig sets what enumeration programs.
type EnumConfig struct {
	MPS        int  // Max Payload Size for every function (default 256)
	MRRS       int  // Max Read Request Size for endpoints (default 512)
	TenBitTags bool // enable 10-bit tags where requester and path support them
	// SlotMem and SlotPref are the windows reserved for every hot-plug
	// slot, occupied or not, so a GPU hot-added later fits without
	// moving anything (defaults 32 MiB and 256 GiB).
	SlotMem, SlotPref uint64
}

func (c *EnumConfig) defaults() {
	if c.MPS == 0 {
		c.MPS = 256
	}
	if c.MRRS == 0 {
		c.MRRS = 512
	}
	if c.SlotMem == 0 {
		c.SlotMem = 32 << 20
	}
	if c.SlotPref == 0 {
		c.SlotPref = 256 << 30
	}
}

// Address space the enumerator hands out.
const (
	Mem32Base  = 0x80000000
	Mem32Limit = 0xfdffffff
	Pref64Base = 0x10000000000 // 1 TiB
)

// BARInfo is one sized and assigned memory BAR.
type BARInfo struct {
	Index    int
	Addr     uint64
	Size     uint64
	Is64     bool
	Prefetch bool
}

// Device is an endpoint found by enumeration.
type Device struct {
	ID       tlp.ID
	Vendor   uint16
	DeviceID uint16
	Class    uint32
	BARs     []BARInfo
	Port     tlp.ID // the root or downstream port above it
	Slot     int    // physical slot number of that port
	MSIData  uint32
	Present  bool
}

// BAR returns BAR i.
func (d *Device) BAR(i int) (BARInfo, bool) {
	for _, b := range d.BARs {
		if b.Index == i {
			return b, true
		}
	}
	return BARInfo{}, false
}

// slotInfo is what enumeration reserved for a hot-plug slot.
type slotInfo struct {
	port      tlp.ID
	num       int
	bus       uint8
	mem, pref uint64
}

type enumState struct {
	cfg     EnumConfig
	nextBus int
	mem     uint64
	pref    uint64
	slots   map[tlp.ID]*slotInfo
	nextMSI uint32
	hotplug []hotplugEvent
}

type hotplugEvent struct {
	port    tlp.ID
	present bool
}

// Enumerate walks the hierarchy depth first from every root port: it
// numbers buses, reserves windows for every slot, sizes and assigns BARs,
// and enables memory, bus mastering, MPS, MRRS, 10-bit tags and MSI. It
// returns the endpoints found.
func (rc *RootComplex) Enumerate(cfg EnumConfig) ([]*Device, error) {
	cfg.defaults()
	e := &enumState{cfg: cfg, nextBus: 1, mem: Mem32Base, pref: Pref64Base, slots: map[tlp.ID]*slotInfo{}, nextMSI: 0x40}
	rc.enum = e
	rc.Devices = nil
	for _, rp := range rc.Ports {
		if err := rc.enumBridge(e, tlp.NewID(0, rp.dev, 0), RootPort, rp.Slot); err != nil {
			return nil, err
		}
	}
	return rc.Devices, nil
}

func (rc *RootComplex) enumBridge(e *enumState, id tlp.ID, t PortType, slot int) error {
	if e.nextBus > 255 {
		return fmt.Errorf("host: enumerate %v: out of bus numbers", id)
	}
	sec := uint8(e.nextBus)
	e.nextBus++
	if err := rc.CfgWrite32(id, pcie.CfgPrimaryBus, uint32(id.Bus())|uint32(sec)<<8|0xff<<16); err != nil {
		return fmt.Errorf("host: enumerate %v: bus numbers: %w", id, err)
	}
	if err := rc.setDevCtl(id, PortCapPCIe, false); err != nil {
		return err
	}
	memStart, prefStart := e.mem, e.pref
	if t == UpstreamPort {
		// The switch's internal bus: every device number can hold a port.
		for d := uint8(0); d < 32; d++ {
			child := tlp.NewID(sec, d, 0)
			v, err := rc.CfgRead32(child, pcie.CfgVendorID)
			if err != nil || v&0xffff == 0xffff {
				continue
			}
			pt, err := rc.portType(child)
			if err != nil {
				return err
			}
			s, _ := rc.CfgRead32(child, PortCapPCIe+PCIeSlotCap)
			if err := rc.enumBridge(e, child, pt, int(s>>19)); err != nil {
				return err
			}
		}
	} else if child, isBridge := rc.bridgeBelow(sec); isBridge {
		// A switch behind this port (the host-side bridge of the fabric):
		// its windows are the union of what its ports need.
		if err := rc.enumBridge(e, child, UpstreamPort, 0); err != nil {
			return err
		}
	} else {
		// A root or downstream port: a slot with fixed reserved windows.
		si := &slotInfo{port: id, num: slot, bus: sec, mem: alignUp(e.mem, e.cfg.SlotMem), pref: alignUp(e.pref, e.cfg.SlotPref)}
		memStart, prefStart = si.mem, si.pref
		e.mem = si.mem + e.cfg.SlotMem
		e.pref = si.pref + e.cfg.SlotPref
		if e.mem-1 > Mem32Limit {
			return fmt.Errorf("host: enumerate %v: 32-bit MMIO space exhausted", id)
		}
		e.slots[id] = si
		if err := rc.probeSlot(e, si); err != nil {
			return err
		}
	}
	if err := rc.programWindows(id, memStart, e.mem, prefStart, e.pref); err != nil {
		return err
	}
	sub := uint8(e.nextBus - 1)
	if err := rc.CfgWrite(id, pcie.CfgSubordinate, 0x4, uint32(sub)<<16); err != nil {
		return err
	}
	return rc.CfgWrite(id, pcie.CfgCommand, 0x3, pcie.CmdMemory|pcie.CmdBusMaster)
}

// bridgeBelow reports whether device 0 on bus is a PCI-to-PCI bridge.
func (rc *RootComplex) bridgeBelow(bus uint8) (tlp.ID, bool) {
	id := tlp.NewID(bus, 0, 0)
	v, err := rc.CfgRead32(id, pcie.CfgVendorID)
	if err != nil || v&0xffff == 0xffff {
		return id, false
	}
	ht, err := rc.CfgRead32(id, 0x0c)
	return id, err == nil && ht>>16&0x7f == 1
}

func (rc *RootComplex) portType(id tlp.ID) (PortType, error) {
	v, err := rc.CfgRead32(id, PortCapPCIe)
	if err != nil {
		return 0, fmt.Errorf("host: enumerate %v: PCIe capability: %w", id, err)
	}
	return PortType(v >> 20 & 0xf), nil
}

func (rc *RootComplex) programWindows(id tlp.ID, mem, memEnd, pref, prefEnd uint64) error {
	memReg := uint32(0x0000fff0) // closed: base > limit
	if memEnd > mem {
		memReg = uint32(mem>>16&0xfff0) | uint32((memEnd-1)>>16&0xfff0)<<16
	}
	prefReg := uint32(0x0001fff1)
	var pbU, plU uint32
	if prefEnd > pref {
		prefReg = uint32(pref>>16&0xfff0|1) | uint32((prefEnd-1)>>16&0xfff0|1)<<16
		pbU, plU = uint32(pref>>32), uint32((prefEnd-1)>>32)
	}
	for _, w := range []struct {
		off uint16
		v   uint32
	}{{pcie.CfgMemBase, memReg}, {pcie.CfgPrefBase, prefReg}, {pcie.CfgPrefBaseUpper, pbU}, {pcie.CfgPrefLimUpper, plU}} {
		if err := rc.CfgWrite32(id, w.off, w.v); err != nil {
			return fmt.Errorf("host: enumerate %v: windows: %w", id, err)
		}
	}
	return nil
}

// setDevCtl programs MPS (and, for endpoints, MRRS) in Device Control and
// 10-bit tags in Device Control 2.
func (rc *RootComplex) setDevCtl(id tlp.ID, capOff uint16, endpoint bool) error {
	v, err := rc.CfgRead32(id, capOff+8)
	if err != nil {
		return fmt.Errorf("host: enumerate %v: device control: %w", id, err)
	}
	ctl := uint16(v)
	ctl = ctl&^(7<<5) | uint16(log2(rc.enum.cfg.MPS/128))<<5
	if endpoint {
		ctl = ctl&^(7<<12) | uint16(log2(rc.enum.cfg.MRRS/128))<<12
	}
	if err := rc.CfgWrite(id, capOff+8, 0x3, uint32(ctl)); err != nil {
		return err
	}
	cap2, err := rc.CfgRead32(id, capOff+0x24)
	if err != nil {
		return err
	}
	ctl2, err := rc.CfgRead32(id, capOff+0x28)
	if err != nil {
		return err
	}
	ctl2 &^= 1 << 12
	if rc.enum.cfg.TenBitTags && cap2&(1<<17) != 0 {
		ctl2 |= 1 << 12
	}
	return rc.CfgWrite(id, capOff+0x28, 0x3, ctl2&0xffff)
}

// probeSlot configures the device behind a slot, if one is there.
func (rc *RootComplex) probeSlot(e *enumState, si *slotInfo) error {
	id := tlp.NewID(si.bus, 0, 0)
	v, err := rc.CfgRead32(id, pcie.CfgVendorID)
	if err != nil || v&0xffff == 0xffff {
		return nil // empty slot
	}
	ht, err := rc.CfgRead32(id, 0x0c)
	if err != nil {
		return err
	}
	if ht>>16&0x7f != 0 {
		return fmt.Errorf("host: enumerate %v: bridges behind a slot are not supported", id)
	}
	class, err := rc.CfgRead32(id, 0x08)
	if err != nil {
		return err
	}
	dev := &Device{ID: id, Vendor: uint16(v), DeviceID: uint16(v >> 16), Class: class >> 8, Port: si.port, Slot: si.num, Present: true}
	if err := rc.sizeBARs(dev); err != nil {
		return err
	}
	// Largest BARs first so each lands aligned inside the slot's windows.
	sort.SliceStable(dev.BARs, func(i, j int) bool { return dev.BARs[i].Size > dev.BARs[j].Size })
	mem, pref := si.mem, si.pref
	for i := range dev.BARs {
		b := &dev.BARs[i]
		if b.Prefetch && b.Is64 {
			b.Addr = alignUp(pref, b.Size)
			pref = b.Addr + b.Size
			if pref > si.pref+e.cfg.SlotPref {
				return fmt.Errorf("host: enumerate %v: BAR%d of %d bytes does not fit the slot's prefetchable window", id, b.Index, b.Size)
			}
		} else {
			b.Addr = alignUp(mem, b.Size)
			mem = b.Addr + b.Size
			if mem > si.mem+e.cfg.SlotMem {
				return fmt.Errorf("host: enumerate %v: BAR%d of %d bytes does not fit the slot's window", id, b.Index, b.Size)
			}
		}
		off := uint16(pcie.CfgBAR0 + 4*b.Index)
		if err := rc.CfgWrite32(id, off, uint32(b.Addr)); err != nil {
			return err
		}
		if b.Is64 {
			if err := rc.CfgWrite32(id, off+4, uint32(b.Addr>>32)); err != nil {
				return err
			}
		}
	}
	sort.SliceStable(dev.BARs, func(i, j int) bool { return dev.BARs[i].Index < dev.BARs[j].Index })
	capOff, err := rc.findCap(id, pcie.CapPCIe)
	if err != nil {
		return err
	}
	if capOff != 0 {
		if err := rc.setDevCtl(id, capOff, true); err != nil {
			return err
		}
	}
	if msi, err := rc.findCap(id, pcie.CapMSI); err == nil && msi != 0 {
		dev.MSIData = e.nextMSI
		e.nextMSI++
		for _, w := range []struct {
			off uint16
			v   uint32
		}{{msi + 4, MSIBase}, {msi + 8, 0}, {msi + 12, dev.MSIData}} {
			if err := rc.CfgWrite32(id, w.off, w.v); err != nil {
				return err
			}
		}
		if err := rc.CfgWrite(id, msi, 0x4, 1<<16); err != nil {
			return err
		}
	}
	if err := rc.CfgWrite(id, pcie.CfgCommand, 0x3, pcie.CmdMemory|pcie.CmdBusMaster); err != nil {
		return err
	}
	rc.Devices = append(rc.Devices, dev)
	return nil
}

// sizeBARs writes all ones to each BAR and reads back its size mask.
func (rc *RootComplex) sizeBARs(dev *Device) error {
	for i := 0; i < 6; i++ {
		off := uint16(pcie.CfgBAR0 + 4*i)
		orig, err := rc.CfgRead32(dev.ID, off)
		if err != nil {
			return err
		}
		if err := rc.CfgWrite32(dev.ID, off, 0xffffffff); err != nil {
			return err
		}
		lo, err := rc.CfgRead32(dev.ID, off)
		if err != nil {
			return err
		}
		if orig&1 != 0 {
			continue // IO BAR: GPUs have none worth assigning here
		}
		b := BARInfo{Index: i, Is64: lo&0x6 == 0x4, Prefetch: lo&0x8 != 0}
		mask := uint64(lo &^ 0xf)
		if b.Is64 {
			if err := rc.CfgWrite32(dev.ID, off+4, 0xffffffff); err != nil {
				return err
			}
			hi, err := rc.CfgRead32(dev.ID, off+4)
			if err != nil {
				return err
			}
			mask |= uint64(hi) << 32
		} else {
			mask |= 0xffffffff00000000
		}
		if mask == 0 || (!b.Is64 && lo&^0xf == 0) {
			if err := rc.CfgWrite32(dev.ID, off, orig); err != nil {
				return err
			}
			continue // unimplemented
		}
		b.Size = ^mask + 1
		dev.BARs = append(dev.BARs, b)
		if b.Is64 {
			i++
		}
	}
	return nil
}

func (rc *RootComplex) findCap(id tlp.ID, capID uint8) (uint16, error) {
	v, err := rc.CfgRead32(id, pcie.CfgCapPtr)
	if err != nil {
		return 0, err
	}
	off := uint16(v & 0xfc)
	for n := 0; off != 0 && n < 48; n++ {
		h, err := rc.CfgRead32(id, off)
		if err != nil {
			return 0, err
		}
		if uint8(h) == capID {
			return off, nil
		}
		off = uint16(h>>8) & 0xfc
	}
	return 0, nil
}

// HotplugEvent records a presence change reported by the port with ID port
// (the downstream port's hot-plug interrupt). Removal takes effect at once;
// an addition is configured by the next ServiceHotplug.
func (rc *RootComplex) HotplugEvent(port tlp.ID, present bool) {
	if !present {
		for _, d := range rc.Devices {
			if d.Port == port && d.Present {
				d.Present = false
				if rc.OnRemove != nil {
					rc.OnRemove(d)
				}
			}
		}
	}
	if rc.enum != nil {
		rc.enum.hotplug = append(rc.enum.hotplug, hotplugEvent{port, present})
	}
}

// ServiceHotplug is the host's hot-plug thread: it configures devices
// added since the last call in their slots' reserved windows and returns
// them.
func (rc *RootComplex) ServiceHotplug() ([]*Device, error) {
	e := rc.enum
	if e == nil {
		return nil, fmt.Errorf("host: hot-plug before enumeration")
	}
	events := e.hotplug
	e.hotplug = nil
	var added []*Device
	for _, ev := range events {
		if !ev.present {
			continue
		}
		si := e.slots[ev.port]
		if si == nil {
			return added, fmt.Errorf("host: hot-plug on %v, which enumeration did not see as a slot", ev.port)
		}
		// Clear the latched slot status bits (write one to clear).
		if err := rc.CfgWrite(ev.port, PortCapPCIe+PCIeSlotSta, 0xc, uint32(SlotStaPDC|SlotStaDLLSC)<<16); err != nil {
			return added, err
		}
		n := len(rc.Devices)
		if err := rc.probeSlot(e, si); err != nil {
			return added, err
		}
		added = append(added, rc.Devices[n:]...)
	}
	return added, nil
}

func alignUp(a, n uint64) uint64 { return (a + n - 1) / n * n }

func log2(n int) int {
	k := 0
	for n > 1 {
		n >>= 1
		k++
	}
	return k
}
