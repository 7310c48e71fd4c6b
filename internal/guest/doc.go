// Package guest is the library of dxpu-guest, the tool that runs inside a
// Linux guest (or on any Linux host) that borrows a remote GPU: it finds the
// GPU's PCI function through sysfs, maps its BAR0, pins DMA memory in 2 MiB
// hugepages and drives the GPU with the same driver code as the emulator
// (package emu/gpudrv), over a gpudrv.Host made of sysfs and mmap.
//
// Nothing here needs a driver in the kernel: sysfs `config` gives the
// config space, `resource0` maps BAR0, `enable` turns on memory decoding,
// and /proc/self/pagemap gives the physical address of pinned hugepages,
// which is the bus address when there is no IOMMU (a QEMU guest has none).
// Interrupts are not used: completion is seen by polling a semaphore the
// GPU writes into host memory.
//
// # Output
//
// `dxpu-guest run` prints one JSON object (type Report):
//
//	{"pci":[{"bdf":"0000:01:00.0","vendor":"10de","device":"2330","class":"0302",
//	         "resources":[{"bar":0,"start":"0xfc000000","size":16777216}]}],
//	 "gpu":"0000:01:00.0","config":"<hex of the config bytes sysfs gave>","config_bytes":256,
//	 "copy_bytes":67108864,"h2d_ok":true,"d2h_ok":true,"src_crc32c":"0x1234abcd","launch_sync_ok":true,
//	 "mmio_read_us":{"boot0":120.5,"scratch":118.0},"h2d_gbps":1.2,"d2h_gbps":2.1,
//	 "duration_s":3.2,"error":""}
//
// Here h2d_ok means every host-to-device copy completed (its semaphore was
// released); the bytes are checked by reading them back (d2h_ok: the 64 MiB
// read back equal the 64 MiB sent, byte for byte) and, by whoever can see
// the GPU's memory, against src_crc32c. A non-empty "error" comes with a
// non-zero exit status.
//
// Between markers on a console, with events while it runs:
//
//	DXPU-EVENT {"event":"copying"}
//	DXPU-RESULT-BEGIN
//	{...report...}
//	DXPU-RESULT-END
package guest
