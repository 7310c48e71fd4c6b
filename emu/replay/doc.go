// Package replay replays a workload's dependency graph (package model,
// built from a PyTorch profiler trace) on the emulated host and GPUs in
// virtual time, natively or over the fabric, keeping the trace's
// dependencies and durations:
//
//   - every CPU thread runs its CUDA calls in order, with the measured CPU
//     time of each call and the measured gaps between calls;
//   - a call that launched GPU work submits it through package cuda
//     (pushbuffer, GPFIFO entry, doorbell MMIO write) at the moment that
//     makes the operation start natively when it started in the trace: the
//     measured launch delay minus the emulator's own native launch latency
//     (see Calibration);
//   - kernels and memsets last their measured time on the GPU; copies move
//     their bytes by DMA (TLPs, then a functional tail beyond MaxSimBytes)
//     and last at least their measured time (what the host side, such as
//     pageable staging, allowed natively);
//   - a blocking call (stream, device or event synchronization, synchronous
//     copy) returns once the host has seen the completion semaphore of the
//     work it waited for, plus its measured return time;
//   - cross-stream event dependencies become a semaphore release after the
//     recorded operation and an acquire before the waiting one;
//   - calls that read GPU registers make real MMIO reads.
//
// Over the fabric the same schedule meets longer doorbells, fetches,
// notifications, MMIO reads and slower DMA, and the span grows by what
// the fabric costs.
package replay
