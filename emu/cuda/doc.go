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
// A channel that stops on a fault (a command fetch or a copy's DMA read
// answered with an error status, a malformed pushbuffer; package emu/gpu)
// posts the fault to its error notifier, next to the stream's semaphore in
// host memory: the driver then fails every wait on the device whose work
// is not done, and every later submission, with a *ChannelError naming
// the device, the stream and the cause (errors.Is ErrChannelStopped), as
// CUDA's sticky errors do. A wait whose simulation runs out of events
// first fails with ErrStalled, naming what it waited for.
//
// The API has two layers: Stream.Submit and Stream.OnDone are asynchronous
// and usable from simulator callbacks (the replay engine drives them); the
// methods of Context block the calling host thread by running the
// simulation, for workloads written as straight-line Go.
package cuda
