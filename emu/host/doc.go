// Package host is the emulated host: a root complex with DRAM, root ports
// on bus 0 (00:01.0, 00:02.0, ...), the CPU's view of PCIe (config reads
// and writes, MMIO reads and writes, MSI delivery), enumeration, and the
// virtual PCIe switch of dxpu's host-side bridge.
//
// # Topologies it enumerates
//
// Native: a GPU on each root port (bus 1, 2, ...). Over the fabric: one
// root port leads to the host-side bridge, whose virtual switch has an
// upstream port (bus 1) and hot-plug capable downstream ports (32 by
// default, devices 0..31 on bus 2); each downstream port leads through a
// fabric path to one remote GPU (bus 3 + port). The switch answers config
// requests to its own ports, turns type 1 requests into type 0 at a
// port's secondary bus, and routes memory requests by window and
// completions by bus number, as hardware does.
//
// # Enumeration
//
// Depth first from every root port: bus numbers assigned in order (each
// slot keeps one bus), BARs sized by writing all ones, every slot given a
// fixed window whether occupied or not (32 MiB below 4 GiB from
// 0x80000000, 256 GiB of 64-bit prefetchable space from 1 TiB), BARs
// placed largest first inside it, bridge windows programmed as the union
// of what lies below, then MPS (256), MRRS (512), 10-bit tags where the
// requester supports them (EnumConfig.TenBitTags), MSI to 0xfee00000 with
// a distinct data value per device, and Memory Space and Bus Master.
// Because every slot's windows are reserved up front, a GPU hot-added later
// (HotplugEvent, then ServiceHotplug, the host's pciehp thread) is
// configured in place without moving anything. Surprise removal marks the
// device gone at once and calls OnRemove; requests to it get Unsupported
// Request from the downstream port.
//
// # Host memory map
//
//	0x0000_0000 ..            DRAM (DMA targets)
//	0x8000_0000 - 0xfdff_ffff 32-bit MMIO windows
//	0xfee0_0000 - 0xfeef_ffff MSI: writes here are interrupts
//	0x1_0000_0000 ..          DRAM handed out by Alloc (64-bit DMA)
//	0x100_0000_0000 ..        64-bit prefetchable MMIO windows
//
// DMA reads are answered after Config.MemLatency with completions split at
// the root port's MPS and the root complex's RCB (64 bytes). The CPU-side
// calls come in two forms: asynchronous (callbacks, usable from simulator
// events) and blocking (CfgRead32, MMIORead32, ...), which run the
// simulation until the answer arrives: code written as straight-line Go is
// the host CPU.
//
// The root complex's PCIe side is the pcie.Receiver/pcie.Sender pair of
// each root port: the seam where a NetTLP adapter (a real host's TLPs in
// NetTLP frames) can stand in for the emulated CPU.
package host
