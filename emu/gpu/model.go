package gpu

// Model is the identity and geometry of one NVIDIA data-center GPU as it
// appears on PCIe.
type Model struct {
	Name      string
	DeviceID  uint16
	SubsysID  uint16
	Revision  uint8
	Boot0     uint32 // PMC_BOOT_0 at BAR0 offset 0: architecture and implementation
	BAR0Size  uint64 // registers, 32-bit non-prefetchable
	BAR1Size  uint64 // VRAM aperture, 64-bit prefetchable
	BAR3Size  uint64 // RAMIN / usermode, 64-bit prefetchable
	MemBytes  uint64
	LinkGen   int // 4: 16 GT/s, 5: 32 GT/s
	LinkWidth int
}

// Models of real GPUs. Device and subsystem IDs and BAR sizes are those
// lspci shows for these boards.
var (
	H100SXM = Model{Name: "H100-SXM5-80GB", DeviceID: 0x2330, SubsysID: 0x16c1, Revision: 0xa1,
		Boot0: 0x180000a1, BAR0Size: 16 << 20, BAR1Size: 128 << 30, BAR3Size: 32 << 20,
		MemBytes: 80 << 30, LinkGen: 5, LinkWidth: 16}
	A100SXM = Model{Name: "A100-SXM4-40GB", DeviceID: 0x20b0, SubsysID: 0x134f, Revision: 0xa1,
		Boot0: 0x170000a1, BAR0Size: 16 << 20, BAR1Size: 64 << 30, BAR3Size: 32 << 20,
		MemBytes: 40 << 30, LinkGen: 4, LinkWidth: 16}
)

// ModelByName returns a known model by its Name or a short alias
// ("h100", "a100").
func ModelByName(name string) (Model, bool) {
	switch name {
	case "h100", "H100", H100SXM.Name:
		return H100SXM, true
	case "a100", "A100", A100SXM.Name:
		return A100SXM, true
	}
	return Model{}, false
}
