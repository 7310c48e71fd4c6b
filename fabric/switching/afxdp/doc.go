// Package afxdp is an AF_XDP socket built directly on golang.org/x/sys/unix
// (no AF_XDP library is served here), and the AF_XDP driver of the
// userspace switch.
//
// # The shared memory, byte by byte
//
// A socket owns a UMEM: NumFrames frames of FrameSize bytes, registered with
// setsockopt(SOL_XDP, XDP_UMEM_REG). Four single-producer single-consumer
// rings are mmapped from the socket at the offsets XDP_MMAP_OFFSETS returns:
//
//	ring        producer  consumer  entry (little-endian)
//	fill        us        kernel    u64 UMEM address of a free frame for RX
//	completion  kernel    us        u64 address of a frame whose TX finished
//	rx          kernel    us        16 bytes: addr u64 | len u32 | options u32
//	tx          us        kernel    16 bytes: addr u64 | len u32 | options u32
//
// Each ring is a u32 producer index, a u32 consumer index (free-running,
// masked by size-1) and the entries. A producer writes entries, then
// publishes them with a release store of its index; the consumer reads the
// index with an acquire load. Example: after the kernel received one 60-byte
// frame into the frame at 0x800 (copy mode puts it after 256 bytes of
// headroom), the RX ring holds
//
//	producer = 1, consumer = 0
//	entry 0: 00 09 00 00 00 00 00 00  3c 00 00 00  00 00 00 00
//	         addr 0x900                len 60       options 0
//
// The socket binds to one queue of one interface in copy mode (veth and
// most drivers without zero-copy support); an XDP program redirects frames
// to it through an XSKMAP (package xdp, Options.AllToXSK and SetXSK).
package afxdp
