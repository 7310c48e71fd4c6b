// Package fabricbench runs the microbenchmarks a GPU disaggregation paper reports
// on the emulated path, in virtual time: MMIO read latency, host-to-device
// and device-to-host bandwidth by copy size (as CUDA's bandwidthTest
// measures it, between two events on the copy's stream), and the latency of
// an empty kernel launch followed by a stream synchronization. Every figure
// comes for the native topology and for the fabric.
package fabricbench
