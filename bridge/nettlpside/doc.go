// Package nettlpside puts NetTLP on the PCIe side of a dxpu bridge pair,
// end to end: a real host whose NetTLP adapter carries its TLPs over UDP,
// a host-side bridge, the fabric, a GPU-side bridge and a GPU.
//
//	real host, NetTLP adapter     host-side bridge          GPU-side bridge      GPU
//	(libtlp or nettlp.Client) <-> Host: nettlp.Adapter  <-> driver.Runner    <-> GPU: emu/gpu on a
//	                              + driver.Runner           (role gpu)           realtime.Clock,
//	         NetTLP over UDP      (role host)   dxpu frames over UDP      TLPs   or MemoryDevice
//
// Host joins a nettlp.Adapter to the host-side runner: the host's MMIO
// requests and the completions of the GPU's DMA reads go up into the
// bridge; the bridge's TLPs (MMIO completions with the host's tags
// restored, the GPU's DMA reads and writes with wire tags, MSIs) go down
// as NetTLP datagrams on the port of their tag.
//
// GPU runs an emulated GPU behind the GPU-side runner on the wall clock,
// configured as enumeration would (a NetTLP host sends no config
// requests): BAR0 registers, BAR1 VRAM, DMA engines that read and write
// the host's memory back through the pair.
//
// MemoryDevice is a memory-backed completer in the GPU's place.
//
// On one machine the host is played by a libtlp-like client doing its
// MMIO and a NetTLP target serving its memory, on two addresses
// (nettlp.AdapterConfig.DMARemote sends the GPU's requests to the second):
// a nettlp.Target over any Memory, or emu/realtime.ServeNetTLP over an
// emulated host's DRAM.
//
// Wiring one pair on one machine (see the tests and `dxpu bridge`):
//
//	hr := driver.New(hostBridge, hostUDP)
//	a, _ := nettlp.NewAdapter(nettlp.AdapterConfig{Local: bridgeAddr, Remote: adapterAddr})
//	h, _ := nettlpside.NewHost(hr, a, nil)      // before hr.Run
//	go hr.Run(ctx); go h.Run(ctx)
//
//	gr := driver.New(gpuBridge, gpuUDP)
//	g, _ := nettlpside.NewGPU(gr, nettlpside.GPUConfig{})
//	go gr.Run(ctx); go g.Run(ctx)
//
// NetTLP's datagrams are described in package bridge/nettlp, the pair's
// frames in package bridge.
package nettlpside
