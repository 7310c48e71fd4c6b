package gpu

// BAR0 register map. Offsets are bytes from the start of BAR0; every
// register is 32 bits, little-endian.
const (
	RegBoot0   = 0x000000 // PMC_BOOT_0, read-only: architecture/implementation
	RegScratch = 0x000400 // read/write scratch register (MMIO latency probes)

	// Channel (stream) registers: ChannelBase + ch*ChannelStride + reg.
	ChannelBase   = 0x800000
	ChannelStride = 0x40
	MaxChannels   = 512
	// MaxGPEntries bounds a GPFIFO ring: a doorbell on a larger ring is
	// refused (counted in ChErrors), so a register write cannot make the
	// GPU fetch gigabytes of ring for one doorbell.
	MaxGPEntries = 1 << 16

	ChGPBaseLo  = 0x00 // GPFIFO ring address in host memory, low 32 bits
	ChGPBaseHi  = 0x04 // high 32 bits
	ChGPEntries = 0x08 // ring size in entries, 1 to MaxGPEntries
	ChGPGet     = 0x0c // read-only: entries fetched
	ChGPPut     = 0x10 // doorbell: the host writes its put index here
	ChErrors    = 0x14 // read-only: pushbuffer decode errors and failed DMA reads of copies on this channel
	// ChGPAperture says where the GPFIFO ring lives: ApertureHost (GP_BASE
	// is a host bus address, fetched by DMA) or ApertureVRAM (GP_BASE is
	// an offset in the GPU's memory, fetched locally). Writing GP_BASE_LO
	// resets it to ApertureHost, so a driver that never writes it gets the
	// ring in host memory whatever the channel held before.
	ChGPAperture = 0x18
	// ChNotifyLo/Hi hold the host address of the channel's error notifier
	// (0: none): when the channel stops on a fault the GPU posts the
	// NotifierBytes record there, then raises its MSI if enabled.
	ChNotifyLo = 0x1c
	ChNotifyHi = 0x20
	// ChFault is read-only: 0 while the channel runs, the fault word
	// (ChannelFault.Word) once it stopped; ChFaultAddrLo/Hi the fault's
	// address.
	ChFault       = 0x24
	ChFaultAddrLo = 0x28
	ChFaultAddrHi = 0x2c
)

// Apertures of the GPFIFO ring (ChGPAperture).
const (
	ApertureHost = 0
	ApertureVRAM = 1
)

// ChannelReg returns the BAR0 offset of register reg of channel ch.
func ChannelReg(ch int, reg uint64) uint64 {
	return ChannelBase + uint64(ch)*ChannelStride + reg
}
