// Package pcie is the plumbing of dxpu's emulated PCIe world: links that
// carry TLP bytes between components in virtual time (package sim), with a
// one-way latency and a serialization rate per direction; the Path seam
// through which a host reaches a device (a native link, a latency and
// bandwidth pipe through a fabric, or a pair of real dxpu bridges); sparse
// memories for host DRAM and VRAM; config spaces with write masks (BAR
// sizing works by masks alone); and builders for the few TLPs the models
// exchange (MRd, MWr, Cpl, CplD, CfgRd/CfgWr), with the splitting rules:
// reads by MRRS and 4 KiB, completions by MPS and RCB.
//
// Components meet through two interfaces: a Receiver takes TLPs (the bytes
// are valid only during the call), a Sender sends them and reports its
// backlog. Everything the host side sees of the PCIe world passes through
// them, which is the seam where a NetTLP adapter (real TLPs in UDP from a
// NetTLP board or libtlp) can replace the emulated root complex later.
//
// Wire format: TLPs are PCIe transaction layer packets, big-endian DWs, as
// ../shared/reference/pcie-tlp.md describes. Example, a 512-byte read of
// host address 0x100000000 by 03:00.0 with tag 5 (4-DW header, Length 128,
// Last BE 0xf, First BE 0xf):
//
//	20 00 00 80  03 00 05 ff  00 00 00 01  00 00 00 00
package pcie
