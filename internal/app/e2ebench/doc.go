// Package e2ebench measures the real-time path end to end and, in the same
// run, the network under it: `dxpu bench e2e`. An emulated host and an
// emulated GPU on the wall clock (package emu/realtime) are joined by a
// dxpu bridge pair as the bridges run in production (bridge/driver over
// UDP); beside them, a UDP echo between the same two endpoints and a
// lossless bridge pair flooded with writes give the baselines every
// figure is judged against. In namespace mode the host side, the XDP
// switch and the GPU side each live in their own network namespace (root
// only); in loopback mode both ends use 127.0.0.1.
//
// The echo that MMIO reads are judged against is timed in turns with them,
// an echo then a read, after 200 untimed turns: on a shared machine the
// tail of any round trip comes and goes with what else runs (on this
// project's 2-core VM, phases of a few milliseconds in which one round
// trip in five took 15-30 us more, on both paths alike), so a baseline
// timed before the reads compared their tail with another moment's.
//
// The JSON result, times in microseconds and rates in Gbit/s:
//
//	echo_p50_us, echo_p99_us          UDP echo round trip (the baseline),
//	                                  timed in turns with the MMIO reads
//	mmio_read_p50_us, _p99_us         a BAR0 register read, CPU to CPU
//	dma_read_p50_us, _p99_us          one 512-byte DMA read on the copy engine
//	launch_sync_us                    empty kernel launch + stream sync (p50),
//	                                  commands in device memory (BAR1 writes)
//	native_launch_sync_us             the same with the GPU on native PCIe
//	launch_sync_host_cmds_us          launch + sync, commands in host memory
//	native_launch_sync_host_cmds_us   the same on native PCIe
//	copies                            one object per --sizes entry, in that
//	                                  order: {"size_bytes": 65536,
//	                                  "h2d_gbps": rate, "d2h_gbps": rate},
//	                                  each the median of --copies copies
//	link_goodput_gbps                 the flooded lossless bridge pair
//	cpu_s_per_gb                      process CPU seconds per GB copied
//	udp_goodput_gbps                  two plain UDP sockets at the bridges'
//	                                  endpoints flooded with MTU-sized
//	                                  datagrams on the same path: the mean
//	                                  of udp_before_gbps (before the world
//	                                  over the pair) and udp_after_gbps
//	                                  (after the link pair); their ratio
//	                                  udp_drift_ratio > 1.25 is warned of
//	tcp_goodput_gbps                  one TCP connection (loopback only)
//	udp_same_frames_goodput_gbps      UDP again with datagrams of the link
//	                                  pair's mean frame (link_frame_bytes)
//	ratios                            each figure over its baseline; the
//	                                  launch+sync target's ratio uses the
//	                                  device-memory placement, the host one
//	                                  is beside it; pair_over_udp and
//	                                  h2d/d2h_largest_over_udp judge the
//	                                  link and copies against raw UDP
package e2ebench
