// Package afxdp carries dxpu frames in Ethernet frames (EtherType 0x88B5,
// the dxpu header right after the Ethernet header, like package afpacket)
// over an AF_XDP socket: a kernel-bypass transport for the bridges, built
// directly on golang.org/x/sys/unix (no AF_XDP library is served here) and
// a small XDP program loaded with cilium/ebpf. Conn implements
// driver.Transport, BatchSender, BatchReceiver and Poller; the bridge
// daemon uses it for `dxpu bridge --ether IFACE:MAC --ether-driver afxdp`. The
// sans-I/O bridge does not know which transport it runs on.
//
// # Rings and UMEM
//
// A Conn owns a UMEM of Config.Frames frames of 4096 bytes (default 4096
// frames, 16 MiB), registered with XDP_UMEM_REG. The first half receives,
// the second half sends; a frame never changes sides. Four
// single-producer single-consumer rings are mmapped from the socket
// (XDP_MMAP_OFFSETS, XDP_PGOFF_*), each as large as its half, so that a
// producer never finds one full:
//
//	ring        producer  consumer  entry (little-endian)
//	fill        Conn      kernel    u64 address of an RX frame to fill
//	rx          kernel    Conn      addr u64 | len u32 | options u32
//	tx          Conn      kernel    addr u64 | len u32 | options u32
//	completion  kernel    Conn      u64 address of a TX frame sent
//
// Each ring is a u32 producer index, a u32 consumer index (free-running,
// masked by size-1) and the entries; a producer writes entries, then
// publishes them with an atomic store of its index.
//
// # How frames flow
//
// Receiving: the XDP program (redirect.c, bpf2go output committed)
// runs on the interface, in native mode where the driver has it (veth
// does, up to an MTU of about 3500) and generic mode otherwise; it
// redirects dxpu frames (behind at most two VLAN tags) into the XSKMAP
// slot of their RX queue and passes every other frame to the kernel
// stack. The kernel copies the frame into an RX frame it took from the
// fill ring (copy mode; a zero-copy driver DMAs it there) and posts it on
// the RX ring. RecvBatch polls the socket, copies each frame from the
// peer's MAC address out (after its Ethernet header and tags) and puts its
// frame straight back on the fill ring; frames from other addresses are
// counted (Stats.Foreign, which driver.Runner exports as
// bridge.Counters.DroppedForeignSource: ForeignDropped) and dropped.
//
// Sending: SendBatch takes a free TX frame per dxpu frame, writes the
// Ethernet header (the peer's MAC, the interface's, 0x88B5) and the frame
// into it, posts the descriptors on the TX ring and kicks the kernel
// once with sendto; copy mode sends 32 frames per call, so the kick
// repeats until the ring is drained. Frames the kernel finished with come
// back on the completion ring, which SendBatch reaps when it runs out of
// free frames; when all are in flight it waits for completions.
//
// Listen binds zero-copy first and falls back to copy mode (veth, and
// NICs without AF_XDP support in their driver); Mode says which. One
// socket serves one RX queue (Config.Queue): on a multi-queue NIC, steer
// EtherType 0x88B5 to it. Frames are at most one UMEM frame (MTU at most
// 3818: no multi-buffer frames).
//
// Waiting: the socket is non-blocking and sits in Go's netpoller (epoll),
// so a Recv with nothing to take parks its goroutine and a frame makes it
// runnable, as on the UDP and AF_PACKET sockets. A blocking poll(2) cost
// a bridge pair over veth 5x its goodput: the woken thread then queued
// for a processor.
//
// Concurrency: Send and Recv may run on different goroutines (each ring
// has one user); Close wakes a waiting Recv (a read deadline in the past)
// and unmaps only once no call is inside the rings. Nothing on the send
// or receive path allocates.
package afxdp
