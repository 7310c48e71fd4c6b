// Package gpudrv is the host driver of dxpu's emulated GPU (package
// emu/gpu), written once for every host it runs on: the emulated root
// complex of package emu/host (through emu/cuda, in virtual or wall-clock
// time) and a real Linux kernel (the guest tool of `dxpu vm`, through
// sysfs). A Host gives it the four things a driver needs from a CPU: DMA-able
// memory, stores and loads to it, and 32-bit stores to BAR0.
//
// A Channel is one GPFIFO channel: a ring of GPFIFO entries and a
// pushbuffer, programmed into the channel's registers (GP_BASE,
// GP_ENTRIES). Submit writes the commands and a tracking semaphore release
// into the pushbuffer, appends a GPFIFO entry and rings the doorbell
// (GP_PUT); the GPU writes the submission's sequence number to the
// semaphore in host memory when the work is done, and Completed reads it.
// The formats are in package emu/gpu's doc.
//
// # Where the commands live
//
// ChannelConfig.Commands places the ring and the pushbuffer:
//
//   - HostMemory (the default): CPU stores into host memory; the GPU
//     fetches the ring entry, then the segment, with DMA reads. Per launch
//     and sync: one posted write down (the doorbell), two reads up and
//     their completions down, one posted write up (the semaphore). Across
//     a fabric that is three round trips.
//   - DeviceMemory: the ring and the pushbuffer sit in VRAM at
//     ChannelConfig.VRAM, which the driver writes through BAR1 with posted
//     writes (a Host that is also a BARWriter), and GP_APERTURE tells the
//     GPU to fetch them locally. Per launch and sync: three posted writes
//     down (segment, entry, doorbell; PCIe keeps them in order), one
//     posted write up, no read: one round trip. This is what a driver for
//     fabric-attached GPUs does to keep the command path on the GPU's side
//     of the fabric; the completion semaphore stays in host memory, where
//     the CPU polls it locally.
//
// The guest tool of `dxpu vm` keeps HostMemory: QEMU's proxy device shows
// the guest BAR0 only (no 64-bit BAR1), so it has no aperture to write
// commands through.
package gpudrv
