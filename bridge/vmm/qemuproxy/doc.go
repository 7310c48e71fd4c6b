// Package qemuproxy speaks QEMU's multi-process proxy protocol, the wire of
// the x-pci-proxy-dev device (QEMU 5.2 to 10.x; hw/remote/mpqemu-link.c):
// QEMU forwards a guest PCI function's config and BAR accesses over a UNIX
// stream socket to a process outside the VMM, and hands it the guest's RAM
// as memfds so that the device's DMA reaches guest memory directly. dxpu's
// host-side bridge is that process (package bridge/vmm).
//
// # Messages
//
// x86-64 byte order (little endian). Every message is a 16-byte header and
// exactly size bytes of payload; file descriptors travel only as
// SCM_RIGHTS ancillary data of the header's sendmsg:
//
//	off len field
//	  0   4 cmd (int32): 0 SYNC_SYSMEM, 1 RET, 2 PCI_CFGWRITE, 3 PCI_CFGREAD,
//	                     4 BAR_WRITE, 5 BAR_READ, 6 SET_IRQFD, 7 DEVICE_RESET
//	  4   4 padding
//	  8   8 size (uint64): payload bytes that follow
//
// Payloads:
//
//	PCI_CFGREAD/PCI_CFGWRITE (12): u32 addr (config offset) | u32 val | i32 len (1, 2 or 4)
//	BAR_READ/BAR_WRITE (24):       u64 addr (absolute guest-physical address) | u64 val |
//	                               u32 size (1, 2, 4 or 8) | u8 memory (1: MMIO, 0: I/O port) | 3 padding
//	SYNC_SYSMEM (192):             u64 gpas[8] | u64 sizes[8] | i64 offsets[8], one fd per region
//	SET_IRQFD (0):                 two eventfds (INTx and its resample), no payload
//	DEVICE_RESET (0)
//	RET (8):                       u64 value, QEMU's answer-wait
//
// PCI_CFGREAD, PCI_CFGWRITE, BAR_READ, BAR_WRITE and DEVICE_RESET each wait
// for one RET; SYNC_SYSMEM and SET_IRQFD get none. QEMU sends SYNC_SYSMEM
// from its main thread whenever the guest's memory map changes (dozens of
// times in a boot), so it can arrive between a request and its RET.
//
// # Worked example: a BAR read
//
// The guest reads 4 bytes at guest-physical 0xfc000000 (BAR0 + 0, the
// GPU's BOOT_0 register):
//
//	05 00 00 00  00 00 00 00             cmd 5 BAR_READ, padding
//	18 00 00 00 00 00 00 00              size 24
//	00 00 00 fc 00 00 00 00              addr 0xfc000000
//	00 00 00 00 00 00 00 00              val (unused on reads)
//	04 00 00 00  01  00 00 00            size 4, memory, padding
//
// and the answer, the register's value 0x180000a1:
//
//	01 00 00 00  00 00 00 00  08 00 00 00 00 00 00 00   cmd 1 RET, size 8
//	a1 00 00 18 00 00 00 00                             value
//
// Both are checked byte for byte by TestDocExample.
//
// # When QEMU goes away
//
// QEMU closes the socket when the device is unplugged, when it quits and
// when it dies; the socket cannot tell these apart. Server.Run ends:
//
//   - nil when the stream ends between messages (the clean case; a
//     launcher that knows QEMU died says so by cancelling Run's context
//     with a cause, which Run returns: see internal/app/vm);
//   - ErrQEMUGone wrapping io.ErrUnexpectedEOF, naming the header or the
//     command's payload, when it ends inside a message;
//   - ErrQEMUGone naming the access when QEMU died while its vCPU waited
//     for a RET (counted in LostAnswers). Such an access ends first, as
//     any does, by its completion or the port's completion timeout.
//
// The device does not know: its DMA goes on arriving. Until Run returns
// it lands in guest RAM as before, inside the addressed range only (an
// access not wholly inside one region of the guest's memory map gets UR
// and touches nothing). From then on every TLP of the bridge is dropped
// and counted (ServerStats.DroppedAfterEnd), touching no guest memory; a
// device read among them gets no completion and ends in the device's own
// completion timeout. Run leaves no goroutine behind. The guest's memfds
// stay mapped until the owner's GuestRAM.Close, which waits for any access
// in progress; an access after it finds no RAM (ErrOutsideRAM, UR). Shown
// by TestQEMUDiesMidDMA.
package qemuproxy
