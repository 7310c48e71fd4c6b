// Package nettlpside puts NetTLP on the PCIe side of a dxpu bridge pair:
// a real host whose NetTLP adapter carries its TLPs over UDP, a host-side
// bridge, the fabric, a GPU-side bridge and a device behind it.
//
//	real host, NetTLP adapter     host-side bridge          GPU-side bridge      device
//	(libtlp or nettlp.Client) <-> Host: nettlp.Adapter  <-> driver.Runner    <-> MemoryDevice, or
//	                              + driver.Runner           (role gpu)           emu/realtime.BridgedGPU
//	         NetTLP over UDP      (role host)   dxpu frames over UDP      TLPs   (an emulated GPU)
//
// Host joins a nettlp.Adapter to the host-side runner: the host's MMIO
// requests and the completions of the device's DMA reads go up into the
// bridge; the bridge's TLPs (MMIO completions with the host's tags
// restored, the device's DMA reads and writes with wire tags, MSIs) go
// down as NetTLP datagrams on the port of their tag.
//
// MemoryDevice is the simplest GPU side: a memory-backed completer. The
// emulated GPU (BAR0 registers, BAR1 VRAM, DMA engines that reach the
// host's memory back through the pair) is not here: it lives in the
// emulator, as emu/realtime.BridgedGPU, so that this package does not
// depend on the emulator.
//
// On one machine the host is played by a libtlp-like client doing its
// MMIO and a NetTLP target serving its memory, on two addresses
// (nettlp.AdapterConfig.DMARemote sends the device's requests to the
// second): a nettlp.Target over any Memory, or emu/realtime.ServeNetTLP
// over an emulated host's DRAM.
//
// Wiring one pair on one machine (see emu/realtime's tests and `dxpu
// bridge`):
//
//	hr := driver.New(hostBridge, hostUDP)
//	a, _ := nettlp.NewAdapter(nettlp.AdapterConfig{Local: bridgeAddr, Remote: adapterAddr})
//	h, _ := nettlpside.NewHost(hr, a, logger)  // before hr.Run; nil logger: none
//	go hr.Run(ctx); go h.Run(ctx)
//
//	gr := driver.New(gpuBridge, gpuUDP)
//	d, _ := nettlpside.NewMemoryDevice(gr, mem, nettlp.CompleterConfig{})
//	go gr.Run(ctx); go d.Run(ctx)
//
// NetTLP's datagrams are described in package bridge/nettlp, the pair's
// frames in package bridge.
package nettlpside
