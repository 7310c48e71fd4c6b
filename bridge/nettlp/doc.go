// Package nettlp speaks NetTLP, the UDP encapsulation of PCIe TLPs made by
// the NetTLP platform (NSDI 2020) and its libtlp library, on the PCIe side
// of dxpu:
//
//   - Target answers DMA reads and writes into an emulated host's Memory the
//     way a NetTLP adapter in that host would, so that NetTLP's own software
//     (libtlp's dma_read / dma_write and the tools built on them) and
//     devices behind a NetTLP adapter work against it unchanged;
//   - Adapter makes a real host's NetTLP adapter the PCIe side of a
//     host-side bridge: the host's TLPs go up to a Receiver, the GPU's TLPs
//     come down through Link.SendTLP;
//   - Completer is the sans-I/O core of Target (one TLP in, completions
//     out), for simulators and firmware;
//   - Client is a Go twin of libtlp's DMA client, byte for byte on the wire,
//     used to prove the target against libtlp's behaviour.
//
// # Wire format
//
// One datagram carries one TLP: IPv4 / UDP / 6-byte NetTLP header / TLP.
// The UDP port is 0x3000 + (Tag & 0xf) at both ends; on one machine the two
// ends need two addresses (127.0.0.1 and 127.0.0.2), each bound explicitly,
// and replies leave from the port the request came to. All fields are
// big-endian:
//
//	off len field
//	  0   2 sequence number: libtlp sends 0; adapters (and this package)
//	        send a running count per port; receivers ignore it
//	  2   4 timestamp: libtlp sends 0; this package sends nanoseconds
//	        since the socket opened, mod 2^32; receivers ignore it
//	  6   . the TLP: 3DW or 4DW header, payload, no digest in practice
//
// # Worked example
//
// libtlp's dma_read of 6 bytes at 0x1001, tag 2, requester 1b:00.0, sent
// from 127.0.0.1:0x3002 to 127.0.0.2:0x3002:
//
//	00 00 00 00 00 00   NetTLP header: libtlp sends zeros
//	00 00 00 02         MRd, 3DW, Length 2 DW
//	1b 00 02 7e         requester 1b:00.0, tag 2, Last BE 0111, First BE 1110
//	00 00 10 00         address 0x1000 (the DW holding 0x1001)
//
// The target answers from 127.0.0.2:0x3002 with one CplD (it fits in MPS):
//
//	00 00 00 00 2a 3c   NetTLP header: sequence 0, timestamp 0x2a3c
//	4a 00 00 02         CplD, Length 2 DW
//	00 00 00 06         completer 00:00.0, status SC, Byte Count 6
//	1b 00 02 01         requester 1b:00.0, tag 2, Lower Address 0x01
//	m0 m1 .. m7         memory 0x1000..0x1007; libtlp keeps bytes 1..6
//
// libtlp takes a CplD as the last when Length = ((Lower Address & 3) + Byte
// Count + 3) / 4, here 2 = (1 + 6 + 3) / 4.
//
// # libtlp's habits the target allows for
//
//   - A 4096-byte request carries 1024 in a 10-bit Length field, which
//     spills into the AT bits: Length 0 is read as 1024 DW, AT ignored.
//   - dma_read_aligned cuts reads by MRRS only, so a request may cross
//     4 KiB; it is served.
//   - libtlp reassembles an unaligned read correctly only from a single
//     CplD, and reads a CplD of 1024 DW (Length field 0) or Byte Count 4096
//     (field 0) as 0 bytes: a read that fits in MPS is answered by one CplD,
//     none carries 1024 DW (a 4096-byte span is cut at 2048).
//   - dma_write sends a single-DW write that ends before the DW's last byte
//     with three payload bytes, data right-aligned: those bytes are put
//     where the byte enables say. Excess payload bytes are ignored.
//   - A Cpl without data (UR for an address outside memory) is reported by
//     libtlp as a bad message, as with a real adapter.
//   - Posted writes are never acknowledged: each socket asks for an 8 MiB
//     receive buffer (SO_RCVBUFFORCE where permitted), and each port is
//     served in arrival order, so a read returns after the writes before it.
//
// # A host-side bridge with a NetTLP PCIe side
//
// The package bridge/nettlpside joins an Adapter to a bridge runner (and puts
// an emulated GPU, or a memory-backed device, behind the GPU-side one);
// `dxpu bridge` runs either side as a daemon. On one machine, with libtlp
// (or `dxpu nettlp read/write`) on 127.0.0.1 standing for the host:
//
//	dxpu bridge --role gpu --pair 1 --listen 127.0.0.11:7001 --peer 127.0.0.10:7001 --pcie emu-gpu &
//	dxpu bridge --role host --pair 1 --listen 127.0.0.10:7001 --peer 127.0.0.11:7001 \
//	    --pcie nettlp:127.0.0.2:127.0.0.1 --metrics 127.0.0.10:9101 &
//	dxpu nettlp read --remote 127.0.0.2 --local 127.0.0.1 --addr 0x90000000 --size 4
//
// reads the emulated GPU's BOOT_0 register through the pair. The GPU's DMA
// goes to the adapter (127.0.0.1) too; `--pcie nettlp:LOCAL:REMOTE:DMA`
// sends requests to a separate address instead, such as `dxpu nettlp
// serve --addr DMA` standing for the host's memory. The emulated host's own
// NetTLP port is emu/realtime.ServeNetTLP.
package nettlp
