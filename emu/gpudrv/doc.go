// Package gpudrv is the host driver of dxpu's emulated GPU (package
// emu/gpu), written once for every host it runs on: the emulated root
// complex of package emu/host (through emu/cuda, in virtual or wall-clock
// time) and a real Linux kernel (the guest tool of `dxpu vm`, through
// sysfs). A Host gives it the four things a driver needs from a CPU: DMA-able
// memory, stores and loads to it, and 32-bit stores to BAR0.
//
// A Channel is one GPFIFO channel: a ring of GPFIFO entries and a
// pushbuffer in host memory, programmed into the channel's registers
// (GP_BASE, GP_ENTRIES). Submit writes the commands and a tracking
// semaphore release into the pushbuffer, appends a GPFIFO entry and rings
// the doorbell (GP_PUT); the GPU writes the submission's sequence number to
// the semaphore in host memory when the work is done, and Completed reads
// it. The formats are in package emu/gpu's doc.
package gpudrv
