// Package xdp is the fast path of the dxpu switch: an XDP program
// (switch.c, compiled by bpf2go into xdpswitch_bpfel.{go,o}, committed) that
// forwards dxpu frames between the bridges of each host-GPU pair, and its Go
// loader: Load, Attach (driver mode, else generic), Detach, Reconcile (maps
// = table), counters, BPF_PROG_TEST_RUN (TestRun, Replay, Bench), the Go
// slow path that forwards the bridges' CONTROL messages (SlowPath), and the
// AF_XDP userspace switch (NewAFXDPSwitch).
//
// The program makes exactly the decision that fabric/switching (package
// switching) specifies and implements in Go; the tests run every frame of
// the replay corpus through both and compare verdicts, rewritten bytes and
// counters.
//
// # Maps
//
//	pair_index  ARRAY, mmapped   key id/32      value u16[32]: rule slot+1 of pair id (0: none)
//	rules       ARRAY            key slot       value struct pair (112 bytes, below)
//	pair_stats  PERCPU_ARRAY     key ctr slot   value struct counters: packets[11], bytes[11] (u64)
//	port_stats  PERCPU_ARRAY     key port slot  value struct counters (slot 0: unmanaged interfaces)
//	port_slots  HASH             key ifindex    value port slot
//	tx_ports    DEVMAP_HASH      key ifindex    value ifindex (redirect targets)
//	xsks        XSKMAP           key port slot*64 + RX queue   value AF_XDP socket
//
// A lookup is two array accesses, not a hash: the index gives the slot of
// the pair's rule. The loader never rewrites a rule in place. A new or
// changed pair is written to a fresh slot, then its index entry is switched
// with one atomic 32-bit store through the mmapped index, so a frame sees
// the old rule or the new one, never a mix. Slots left behind are reused
// only after a 50 ms quarantine, long past any program run that read them.
// Reconcile deletes removed pairs (index entry 0) before it does anything
// else, adds ports (devmap, slots) before the pairs that use them and
// removes ports after: no window in which a removed pair still forwards.
//
// Forwarded frames are counted once, on their pair, as received (reason
// to_gpu/to_host); the program adds to the bytes of tx_to_gpu/tx_to_host
// only the 4 bytes a pushed tag adds or a popped one removes, and the
// loader derives the transmitted counts from these (two fewer per-CPU
// increments per frame: 13 -> 12 ns raw Ethernet, 16-17 -> 15 ns UDP). The
// loader attributes the counts to the pair's ports when it reads them,
// keeping the counts of removed pairs.
// Other verdicts are counted on the pair (spoofed, fault) and on the
// ingress port.
//
// # struct pair, byte by byte
//
// Integers in host order (little-endian here), addresses and the UDP port
// in network order.
//
//	off len  field                       dir[0] = host -> GPU, dir[1] = GPU -> host
//	  0  48  dir[0]:
//	           0  4 in_ifindex           accepted only on this port
//	           4  4 out_ifindex          redirected to this port
//	           8  6 src_mac              accepted only from this MAC
//	          14  6 dst_mac              new destination MAC (far endpoint)
//	          20  6 port_mac             new source MAC (egress port)
//	          26  2 dst_port             UDP: new destination port
//	          28  4 src_ip               UDP: accepted only from this address (0: any)
//	          32  4 new_src_ip           UDP: new source (egress port's address; 0: keep)
//	          36  4 new_dst_ip           UDP: new destination (far endpoint; 0: keep)
//	          40  4 in_slot              ingress port counter slot
//	          44  4 csum_add             UDP: sum of the 16-bit words of both new addresses
//	 48  48  dir[1]
//	 96   4  slot                        counter slot
//	100   2  vlan                        egress VLAN ID (0: untagged)
//	102   2  padding
//	104   4  drop_ppm                    fault injection, drops per million
//	108   4  padding
//
// # Worked example
//
// Pair 0x000102 with VLAN 100, counter slot 5; host 02:00:00:00:00:01
// (10.0.0.1) behind port h (ifindex 2, slot 1, 02:5e:00:00:00:01,
// 10.255.0.1); GPU 02:00:00:00:00:02 (10.0.0.2, UDP port 9000) behind port g
// (ifindex 3, slot 2, 02:5e:00:00:00:02, 10.255.0.2). Its rule:
//
//	 0  02 00 00 00 03 00 00 00 02 00 00 00 00 01 02 00   in 2, out 3, src_mac, dst_mac...
//	16  00 00 00 02 02 5e 00 00 00 02 23 28 0a 00 00 01   ...port_mac g, dst_port 9000, src_ip 10.0.0.1
//	32  0a ff 00 02 0a 00 00 02 01 00 00 00 14 03 01 00   new_src 10.255.0.2, new_dst 10.0.0.2, slot 1, csum_add
//	48  03 00 00 00 02 00 00 00 02 00 00 00 00 02 02 00   dir[1]: in 3, out 2, ...
//	64  00 00 00 01 02 5e 00 00 00 01 22 97 0a 00 00 02   ...dst_port 8855 (the default), src_ip 10.0.0.2
//	80  0a ff 00 01 0a 00 00 01 02 00 00 00 14 01 01 00
//	96  05 00 00 00 64 00 00 00 00 00 00 00 00 00 00 00   slot 5, vlan 100, drop_ppm 0
//
// and pair_index element 0x000102/32 = 8 holds slot+1 in lane 0x102%32 = 2.
//
// # Generated code
//
// `go generate ./xdp/...` runs bpf2go (the version go.mod pins) with fixed
// flags (-target bpfel, -mcpu=v3) on switch.c, which includes only
// bpf_minimal.h: the output does not depend on the build machine's headers.
// xdp/check-generate.sh checks that the committed files are reproduced byte
// for byte.
package xdp
