// Package topo builds emulated worlds: one host root complex and its GPUs,
// either native (each GPU on its own root port) or over the fabric (the
// host's root port reaches dxpu's host-side bridge, whose virtual switch has
// a hot-plug downstream port per remote GPU; each port reaches its GPU
// through a fabric path: host bridge, network, GPU bridge, the GPU box's
// PCIe link).
package topo
