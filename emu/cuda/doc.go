// Package cuda is a driver-like API on an emulated host. Every call turns
// into the PCIe traffic a real CUDA driver causes:
//
//   - work goes into a pushbuffer in host memory (CPU stores, no PCIe), a
//     GPFIFO entry points at it, and a posted MMIO write to the channel's
//     GP_PUT register in BAR0 rings the doorbell;
//   - the GPU fetches the GPFIFO entry and the pushbuffer by DMA reads;
//   - every submission ends with a semaphore release: a posted DMA write of
//     the submission's sequence number into host memory, which the CPU spins
//     on (SyncSpin) or waits for through an MSI (SyncBlocking);
//   - events are semaphore releases with a GPU timestamp, and
//     cudaStreamWaitEvent is a semaphore acquire in the waiting channel.
//
// With Config.Commands gpudrv.DeviceMemory (or Device.NewStreamPlaced) a
// stream's GPFIFO ring and pushbuffer live in VRAM instead: the CPU writes
// them through BAR1 with posted writes and the GPU fetches them locally,
// so a launch and its sync cross a fabric in one round trip rather than
// three (package emu/gpudrv). Host memory stays the default.
//
// The API has two layers: Stream.Submit and Stream.OnDone are asynchronous
// and usable from simulator callbacks (the replay engine drives them); the
// methods of Context block the calling host thread by running the
// simulation, for workloads written as straight-line Go.
package cuda
