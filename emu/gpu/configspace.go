package gpu

import "github.com/dxpu/dxpu/emu/pcie"

// Capability offsets in the GPU's config space (as on real boards: power
// management, MSI, PCI Express, then AER in extended space).
const (
	CapPMOff   = 0x60
	CapMSIOff  = 0x68
	CapPCIeOff = 0x78
	ExtAEROff  = 0x100

	// PCIe capability registers, relative to CapPCIeOff.
	PCIeDevCap  = 0x04
	PCIeDevCtl  = 0x08
	PCIeLinkCap = 0x0c
	PCIeLinkSta = 0x12
	PCIeDevCap2 = 0x24
	PCIeDevCtl2 = 0x28

	DevCtlExtTag       = 1 << 8
	DevCtl2TenBitTagEn = 1 << 12
	DevCap2TenBitCpl   = 1 << 16
	DevCap2TenBitReq   = 1 << 17

	// MSI registers, relative to CapMSIOff (64-bit MSI).
	MSICtl    = 0x02
	MSIAddrLo = 0x04
	MSIAddrHi = 0x08
	MSIData   = 0x0c
)

func buildConfig(m Model) *pcie.ConfigSpace {
	c := &pcie.ConfigSpace{}
	c.Set16(pcie.CfgVendorID, 0x10de)
	c.Set16(pcie.CfgDeviceID, m.DeviceID)
	c.Set16(pcie.CfgCommand, 0)
	c.Writable16(pcie.CfgCommand, 0x0546) // memory, bus master, parity, SERR, INTx disable
	c.Set16(pcie.CfgStatus, 0x0010)
	c.Writable16(pcie.CfgStatus, 0)
	c.W1C[pcie.CfgStatus+1] = 0xf9
	c.Set8(pcie.CfgRevision, m.Revision)
	c.Set8(pcie.CfgClassCode, 0x00)   // prog-if
	c.Set8(pcie.CfgClassCode+1, 0x02) // 3D controller
	c.Set8(pcie.CfgClassCode+2, 0x03) // display
	c.Set8(pcie.CfgHeaderType, 0x00)
	c.DefineBAR(pcie.BAR{Index: 0, Size: m.BAR0Size})
	c.DefineBAR(pcie.BAR{Index: 1, Size: m.BAR1Size, Is64: true, Prefetch: true})
	c.DefineBAR(pcie.BAR{Index: 3, Size: m.BAR3Size, Is64: true, Prefetch: true})
	c.Set16(pcie.CfgSubsystem, 0x10de)
	c.Set16(pcie.CfgSubsystem+2, m.SubsysID)
	c.Set8(pcie.CfgIntPin, 1)
	c.Writable(pcie.CfgIntLine, 0xff, 1)

	// Power management.
	c.AddCap(pcie.CfgCapPtr, CapPMOff, pcie.CapPM)
	c.Set16(CapPMOff+2, 0x0003)
	c.Writable16(CapPMOff+4, 0x0003)

	// MSI: 64-bit, one vector.
	c.AddCap(CapPMOff, CapMSIOff, pcie.CapMSI)
	c.Set16(CapMSIOff+MSICtl, 0x0080)
	c.Writable16(CapMSIOff+MSICtl, 0x0071)
	c.Writable32(CapMSIOff+MSIAddrLo, 0xfffffffc)
	c.Writable32(CapMSIOff+MSIAddrHi, 0xffffffff)
	c.Writable16(CapMSIOff+MSIData, 0xffff)

	// PCI Express capability, version 2, endpoint.
	p := uint16(CapPCIeOff)
	c.AddCap(CapMSIOff, p, pcie.CapPCIe)
	c.Set16(p+2, 0x0002)
	// DevCap: MPS supported 256 B (1), phantom 0, extended tag, role-based error.
	c.Set32(p+PCIeDevCap, 0x1|1<<5|1<<15)
	// DevCtl: MPS 128 (0), extended tags on, MRRS 512 (2), relaxed ordering on.
	c.Set16(p+PCIeDevCtl, 2<<12|DevCtlExtTag|1<<4)
	c.Writable16(p+PCIeDevCtl, 0x7fff)
	c.W1C[p+PCIeDevCtl+2] = 0x0f // device status
	speed := uint32(m.LinkGen)
	c.Set32(p+PCIeLinkCap, speed|uint32(m.LinkWidth)<<4)
	c.Writable16(p+0x10, 0x0fc3)
	c.Set16(p+PCIeLinkSta, uint16(speed)|uint16(m.LinkWidth)<<4|1<<12)
	// DevCap2: completion timeout ranges ABCD, 10-bit tag completer and requester.
	c.Set32(p+PCIeDevCap2, 0xf|DevCap2TenBitCpl|DevCap2TenBitReq)
	c.Writable16(p+PCIeDevCtl2, 0x141f)

	// AER, extended space.
	c.Set32(ExtAEROff, uint32(pcie.ExtCapAER)|2<<16)
	c.W1C[ExtAEROff+4] = 0xff
	c.W1C[ExtAEROff+5] = 0xff
	c.W1C[ExtAEROff+6] = 0xff
	return c
}

// MPS returns the Max Payload Size the host programmed, in bytes.
func mpsOf(c *pcie.ConfigSpace) int {
	return 128 << (c.Get16(CapPCIeOff+PCIeDevCtl) >> 5 & 7)
}

func mrrsOf(c *pcie.ConfigSpace) int {
	return 128 << (c.Get16(CapPCIeOff+PCIeDevCtl) >> 12 & 7)
}

func tenBitTags(c *pcie.ConfigSpace) bool {
	return c.Get16(CapPCIeOff+PCIeDevCtl2)&DevCtl2TenBitTagEn != 0
}
