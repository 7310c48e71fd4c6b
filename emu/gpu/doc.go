// Package gpu is an emulated NVIDIA data-center GPU as a PCIe endpoint,
// driven in virtual time by package sim.
//
// # PCIe identity
//
// Config space of a real board (H100 SXM5: 10de:2330, A100 SXM4: 10de:20b0),
// class 0x030200 (3D controller), header type 0:
//
//	BAR0  32-bit non-prefetchable, 16 MiB: registers (below)
//	BAR1  64-bit prefetchable, 128 GiB (H100) or 64 GiB (A100): VRAM aperture
//	      (reads and posted writes of any length land at the same offset
//	      of VRAM: how a driver places commands in device memory)
//	BAR3  64-bit prefetchable, 32 MiB
//	0x60  power management capability
//	0x68  MSI capability, 64-bit address, one vector
//	0x78  PCI Express capability v2, endpoint: DevCap MPS 256, extended tags;
//	      DevCtl (0x80) MPS bits 7:5, MRRS bits 14:12 (default 512);
//	      DevCap2 (0x9c) 10-bit tag completer and requester supported;
//	      DevCtl2 (0xa0) bit 12 enables 10-bit tag requests
//	0x100 AER extended capability
//
// The GPU captures its bus and device number from every type 0 config write,
// answers memory requests only with Memory Space enabled, and issues DMA
// only with Bus Master enabled.
//
// # BAR0 registers (32-bit, little-endian)
//
//	0x000000  BOOT_0       read-only: 0x180000a1 (GH100), 0x170000a1 (GA100)
//	0x000400  SCRATCH      read/write (MMIO latency probes)
//	0x800000 + ch*0x40     channel ch (0..511):
//	  +0x00 GP_BASE_LO, +0x04 GP_BASE_HI  GPFIFO ring address
//	  +0x08 GP_ENTRIES                     ring size in entries (1 to 65536; a doorbell on a larger ring is refused)
//	  +0x0c GP_GET                         read-only: entries fetched
//	  +0x10 GP_PUT                         doorbell: the host's put index
//	  +0x14 ERRORS                         read-only: fetch and decode errors
//	  +0x18 GP_APERTURE                    where the ring is: 0 host memory
//	                                       (GP_BASE a bus address), 1 VRAM
//	                                       (GP_BASE a VRAM offset); a write
//	                                       of GP_BASE_LO resets it to 0
//	  +0x1c NOTIFY_LO, +0x20 NOTIFY_HI     host address of the channel's
//	                                       error notifier (0: none)
//	  +0x24 FAULT                          read-only: 0 while the channel
//	                                       runs; once it stopped, reason in
//	                                       bits 7:0, completion status of a
//	                                       failed read in bits 15:8, bit 16
//	                                       the address is a VRAM offset
//	  +0x28 FAULT_ADDR_LO, +0x2c _HI       read-only: where it failed
//
// # GPFIFO entry (16 bytes, little-endian)
//
//	0  u64 address of a pushbuffer segment: a host bus address, or a VRAM
//	       offset with flag bit 0
//	8  u32 segment length in bytes (at most 8 MiB; longer is an error)
//	12 u32 flags: bit 0 the segment is in VRAM; other bits reserved (0)
//
// A doorbell write makes the command processor read the new entries (one
// read, two if the ring wraps), then every segment they point at; fetching
// runs ahead of execution. What is in host memory is read by DMA across
// PCIe (a round trip each); what is in VRAM is read locally in
// Config.LocalFetchLatency (500 ns by default) with no TLP. A driver that
// places the ring and the pushbuffer in VRAM writes them through BAR1 with
// posted writes before the doorbell; PCIe orders posted writes, so the GPU
// sees them before GP_PUT. A launch then crosses the link as posted writes
// only: no read waits on the host.
//
// # Pushbuffer commands (little-endian)
//
// Each command is a u32 header, opcode in bits 31:24 and the number of
// 32-bit argument words in bits 15:0, then its arguments:
//
//	0x00 NOP          0 words
//	0x01 KERNEL       3: u64 duration ns, u32 marker
//	0x02 COPY        10: u64 src, u64 dst, u64 length, u32 direction
//	                     (1 host-to-device, 2 device-to-host, 3 device-local),
//	                     u64 least duration ns, u32 marker
//	0x03 MEMSET       8: u64 dst, u64 length, u32 byte value, u64 duration ns
//	                     (0: at VRAM speed), u32 marker
//	0x04 SEM_RELEASE  5: u64 address, u64 value, u32 flags (bit 0 host memory,
//	                     else VRAM; bit 1 raise MSI after the write; bit 2
//	                     write the GPU clock in ns after the value)
//	0x05 SEM_ACQUIRE  5: u64 VRAM address, u64 value, u32 flags: wait until
//	                     the word is >= value
//	0x06 WAIT         2: u64 ns the channel idles
//
// Example: a 1 ms kernel with marker 7, then a release of value 5 to host
// address 0x100002000, and the GPFIFO entry pointing at the 40-byte segment
// placed at 0x100400000:
//
//	03 00 00 01  40 42 0f 00 00 00 00 00  07 00 00 00
//	05 00 00 04  00 20 00 00 01 00 00 00  05 00 00 00 00 00 00 00  01 00 00 00
//	GPFIFO: 00 00 40 00 01 00 00 00  28 00 00 00  00 00 00 00
//
// # Channel faults
//
// A channel stops at the first fault in ring order: a GPFIFO or
// pushbuffer read answered with an error status (UR, CA; a bridge answers
// a request it timed out with CA) or outside VRAM, a GPFIFO entry over
// the segment limit, a malformed command, a copy or memset longer than
// VRAM, a host-to-device copy whose DMA read failed. The commands before
// the fault run; nothing after it does, whatever doorbells follow (a
// release behind skipped work would tell the host it was done). ERRORS
// counts the failures, FAULT says which stopped the channel, and the GPU
// posts the 16-byte notifier record (u32 the FAULT word, u32 0, u64 the
// address) to NOTIFY, then raises its MSI if enabled. Posted writes keep
// their order, so the host sees every release before the fault first.
//
// # Engines
//
// Host-to-device copies are DMA reads of at most MRRS bytes that never
// cross 4 KiB, with at most 256 outstanding (tags 0..255) or, once 10-bit
// tags are enabled, 768 (tags 256..1023), capped by Config.MaxOutstanding;
// completions are reassembled by tag and Lower Address. Device-to-host
// copies are posted writes of at most MPS bytes, paced by the path's
// backlog. Command fetches share the tag space with priority over copies.
// Kernels last their given time (plus KernelOverhead); channels run
// concurrently, each in order. A copy longer than Config.MaxSimBytes moves
// that much as TLPs and the rest functionally, timed at the rate its TLPs
// reached in their second half: the event count of a copy stays bounded
// while its time stays that of the TLP stream (within 3% in the tests).
package gpu
