package host

import (
	"github.com/dxpu/dxpu/emu/pcie"
	"github.com/dxpu/dxpu/tlp"
)

// PortType is the role of a type 1 function, as the PCI Express capability
// encodes it.
type PortType uint8

const (
	RootPort       PortType = 4
	UpstreamPort   PortType = 5
	DownstreamPort PortType = 6
)

// Offsets in a port's config space.
const (
	PortCapPCIe      = 0x40
	PortCapMSI       = 0x80
	PCIeLinkCtl      = 0x10
	PCIeLinkSta      = 0x12
	PCIeSlotCap      = 0x14
	PCIeSlotCtl      = 0x18
	PCIeSlotSta      = 0x1a
	PCIeDevCap2      = 0x24
	PCIeDevCtl2      = 0x28
	LinkStaDLLActive = 1 << 13
	SlotStaPresence  = 1 << 6
	SlotStaPDC       = 1 << 3
	SlotStaDLLSC     = 1 << 8
	SlotCapHotPlug   = 1 << 6
	SlotCapSurprise  = 1 << 5
)

// Identity of the bridge functions the emulator exposes.
const (
	RootPortVendor = 0x8086 // a generic host root port
	RootPortDevice = 0x347a
	SwitchVendor   = 0x10b5 // the virtual switch on dxpu's host-side bridge
	SwitchDevice   = 0xc040
)

// Port is a PCI-to-PCI bridge function: a root port, or the upstream or a
// downstream port of a switch. Its config space holds the bus numbers and
// memory windows that route TLPs.
type Port struct {
	Type PortType
	Cfg  *pcie.ConfigSpace
	Slot int // physical slot number (root and downstream ports)
}

// NewPort builds the config space of a port.
func NewPort(t PortType, vendor, device uint16, slot int, hotplug bool) *Port {
	c := &pcie.ConfigSpace{}
	c.Set16(pcie.CfgVendorID, vendor)
	c.Set16(pcie.CfgDeviceID, device)
	c.Writable16(pcie.CfgCommand, 0x0547)
	c.Set8(pcie.CfgClassCode+1, 0x04) // PCI-to-PCI bridge
	c.Set8(pcie.CfgClassCode+2, 0x06)
	c.Set8(pcie.CfgHeaderType, 0x01)
	c.Writable(pcie.CfgPrimaryBus, 0xff, 3)
	c.Set16(pcie.CfgMemBase, 0xfff0) // window closed until programmed
	c.Writable16(pcie.CfgMemBase, 0xfff0)
	c.Writable16(pcie.CfgMemLimit, 0xfff0)
	c.Set16(pcie.CfgPrefBase, 0xfff1) // 64-bit prefetchable window
	c.Set16(pcie.CfgPrefLimit, 0x0001)
	c.Writable16(pcie.CfgPrefBase, 0xfff0)
	c.Writable16(pcie.CfgPrefLimit, 0xfff0)
	c.Writable32(pcie.CfgPrefBaseUpper, 0xffffffff)
	c.Writable32(pcie.CfgPrefLimUpper, 0xffffffff)
	c.Writable16(pcie.CfgBridgeControl, 0x0043)
	p := uint16(PortCapPCIe)
	c.AddCap(pcie.CfgCapPtr, p, pcie.CapPCIe)
	capReg := uint16(2) | uint16(t)<<4
	if t != UpstreamPort {
		capReg |= 1 << 8 // slot implemented
	}
	c.Set16(p+2, capReg)
	c.Set32(p+4, 0x1|1<<15) // MPS 256 supported
	c.Writable16(p+8, 0x7fff)
	c.Set32(p+0x0c, 5|16<<4|1<<20) // 32 GT/s x16, DLL active reporting
	c.Writable16(p+PCIeLinkCtl, 0x0fc3)
	if t != UpstreamPort {
		slotCap := uint32(slot) << 19
		if hotplug {
			slotCap |= SlotCapHotPlug | SlotCapSurprise
		}
		c.Set32(p+PCIeSlotCap, slotCap)
		c.Writable16(p+PCIeSlotCtl, 0x17ff)
		c.W1C[p+PCIeSlotSta] = 0x1f
		c.W1C[p+PCIeSlotSta+1] = 0x01
	}
	c.Set32(p+PCIeDevCap2, 0xf|1<<16|1<<17) // 10-bit tag completer and requester
	c.Writable16(p+PCIeDevCtl2, 0x141f)
	return &Port{Type: t, Cfg: c, Slot: slot}
}

// Secondary and Subordinate return the bus range behind the port.
func (p *Port) Secondary() uint8   { return p.Cfg.Get8(pcie.CfgSecondaryBus) }
func (p *Port) Subordinate() uint8 { return p.Cfg.Get8(pcie.CfgSubordinate) }

// BusBehind reports whether bus is in the port's secondary..subordinate range.
func (p *Port) BusBehind(bus uint8) bool {
	sec, sub := p.Secondary(), p.Subordinate()
	return sec != 0 && bus >= sec && bus <= sub
}

// MemWindow returns the non-prefetchable window [base, limit].
func (p *Port) MemWindow() (base, limit uint64) {
	b := uint64(p.Cfg.Get16(pcie.CfgMemBase)&0xfff0) << 16
	l := uint64(p.Cfg.Get16(pcie.CfgMemLimit)&0xfff0)<<16 | 0xfffff
	return b, l
}

// PrefWindow returns the prefetchable window [base, limit].
func (p *Port) PrefWindow() (base, limit uint64) {
	b := uint64(p.Cfg.Get16(pcie.CfgPrefBase)&0xfff0)<<16 | uint64(p.Cfg.Get32(pcie.CfgPrefBaseUpper))<<32
	l := uint64(p.Cfg.Get16(pcie.CfgPrefLimit)&0xfff0)<<16 | 0xfffff | uint64(p.Cfg.Get32(pcie.CfgPrefLimUpper))<<32
	return b, l
}

// ClaimsAddress reports whether a memory request to addr goes through.
func (p *Port) ClaimsAddress(addr uint64) bool {
	if b, l := p.MemWindow(); b <= l && addr >= b && addr <= l {
		return true
	}
	if b, l := p.PrefWindow(); b <= l && addr >= b && addr <= l {
		return true
	}
	return false
}

// Claims reports whether a TLP travelling downstream is routed through the
// port: config requests and completions by bus, memory requests by address.
func (p *Port) Claims(v tlp.View) bool {
	k := v.Kind()
	switch {
	case k.IsConfig():
		return p.BusBehind(v.TargetID().Bus())
	case k.IsCompletion():
		return p.BusBehind(v.RequesterID().Bus())
	case k.IsMemory():
		return p.ClaimsAddress(v.Address())
	}
	return false
}

// SetLinkUp sets or clears Data Link Layer Link Active and Presence Detect
// and latches the change bits, as a hot-plug slot does.
func (p *Port) SetLinkUp(up bool) {
	c := p.Cfg
	ls := c.Get16(PortCapPCIe + PCIeLinkSta)
	ss := c.Get16(PortCapPCIe + PCIeSlotSta)
	if up {
		ls |= LinkStaDLLActive
		ss |= SlotStaPresence
	} else {
		ls &^= LinkStaDLLActive
		ss &^= SlotStaPresence
	}
	ss |= SlotStaPDC | SlotStaDLLSC
	c.Set16(PortCapPCIe+PCIeLinkSta, ls)
	c.Set16(PortCapPCIe+PCIeSlotSta, ss)
}

// LinkUp reports Data Link Layer Link Active.
func (p *Port) LinkUp() bool {
	return p.Cfg.Get16(PortCapPCIe+PCIeLinkSta)&LinkStaDLLActive != 0
}

// toType0 rewrites a type 1 config request in place into type 0, as the port
// whose secondary bus is the target does.
func toType0(b []byte) { b[0] &^= 0x01 }

// PortID returns the routing ID of downstream port i on a switch whose
// internal bus is bus.
func PortID(bus uint8, i int) tlp.ID { return tlp.NewID(bus, uint8(i), 0) }
