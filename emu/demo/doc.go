// Package demo is `dxpu demo`: in one process and without root it builds a
// small datacenter (4 hosts, 2 GPU boxes of 8 GPUs), registers it with the
// control plane (fabric/manager, in memory, through its HTTP API), lets the
// hosts ask for different numbers of GPUs, hot-adds the GPUs each host got
// behind the virtual switch of its host-side bridge and enumerates them
// through the fabric, then runs bundled workloads and the shared profiler
// traces natively and over the fabric in virtual time, with the
// performance model's prediction beside each trace.
package demo
