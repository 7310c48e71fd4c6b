// Package topo builds emulated worlds: one host root complex and its GPUs,
// either native (each GPU on its own root port) or over the fabric (the
// host's root port reaches dxpu's host-side bridge, whose virtual switch has
// a hot-plug downstream port per remote GPU; each port reaches its GPU
// through a fabric path: host bridge, network, GPU bridge, the GPU box's
// PCIe link).
//
// # Latencies and rates
//
// Native: one hop of 150 ns each way (root port, link, the GPU's port) at
// PCIe Gen5 x16 (Gen4 for A100) with 12 bytes of framing per TLP; host DRAM
// answers DMA reads after 250 ns. A 512-byte DMA read then takes 0.56 us
// and an MMIO read 0.6 us; H2D copies reach 57.6 GB/s on Gen5 (256-byte
// completions).
//
// Fabric: the native hop to the host-side bridge, then per pair one way:
// host bridge (250 ns) + Fabric.RTT/2 + GPU bridge (250 ns) + the box's
// PCIe hop (150 ns), at min(Fabric.BytesPerSec, PCIe) with 32 bytes of
// framing per TLP (Ethernet and dxpu headers shared by batched TLPs).
// Fabric.AddedRoundTrip is what this adds to a native round trip, and
// AddedRTT builds a fabric for a given added round trip (the model's RTT).
//
// # Paths
//
// The fabric path is pluggable (Options.Path, a PathFactory). By default it
// is a latency and bandwidth pipe (two pcie.Links). BridgePaths puts a real
// pair of dxpu bridges (package bridge, via bridge/vpair on the same
// simulator) on every pair: frames with sequence numbers, acks, credits,
// tag tracking and ID translation, over an in-memory link that can lose
// frames (Fabric.Loss). Without loss both give the same times to the
// nanosecond on every demo workload: the bridges' processing takes no
// virtual time and their framing is what the pipe charges per TLP. The
// bridges cost about 5-15x the wall time, so the demo enumerates through
// bridge pairs and runs its workloads on the pipe unless asked (--bridge).
// The package emu/realtime supplies a third path: the bridge pair over real UDP
// sockets, on the wall clock.
package topo
