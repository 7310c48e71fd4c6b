// Package bridged is `dxpu bridge`: one side of a host-GPU pair as a
// daemon. It assembles the bridge state machine (package bridge) on a
// real-time runner (bridge/driver) over a UDP socket to the peer bridge
// (bridge/udp), and a PCIe side: a real host's NetTLP adapter
// (bridge/nettlp through bridge/nettlpside) on the host side, an emulated
// GPU (emu/realtime) or a memory-backed device on the GPU side. The
// runner's counters, and the NetTLP adapter's, are served to Prometheus.
package bridged
