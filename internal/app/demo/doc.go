// Package demo is `dxpu demo`: in one process and without root it builds a
// small datacenter (4 hosts, 2 GPU boxes of 8 GPUs: H100 and A100),
// registers it with the control plane (fabric/manager, in memory, through
// its HTTP API with a bearer token), lets the hosts ask for 1, 2, 4 and 8
// GPUs, hot-adds the GPUs each host got behind the virtual switch of its
// host-side bridge and enumerates them through real dxpu bridge pairs
// (checking every config space byte against the GPU model's), then shows
// the rest of an allocation's life: an over-large request refused, a GPU
// failure turned into a surprise removal on its host only, a release
// turned into a hot removal. Finally it runs bundled workloads (written
// against emu/cuda) and the shared profiler traces natively and over the
// fabric in virtual time, and sets the performance model's prediction
// beside each: for traces from the trace itself, for bundled workloads
// from the emulator's own profile of their native run.
package demo
