// Package scalebench measures many bridge pairs at once: `dxpu bench
// scale`. Every pair is two shipped `dxpu bridge` processes, a host side
// whose PCIe side is a NetTLP adapter and a GPU side whose PCIe side is a
// memory device, sealed with a pair key of their own as daemons run. This
// process is every host's NetTLP adapter: for each pair it keeps a few
// DMA reads outstanding (one per NetTLP tag port, --readers), each read
// answered by the GPU side's memory through the pair, and counts the
// completion bytes that come back: the pair's goodput, GPU to host. While
// all pairs are flooded it times single 4-byte reads on the first pair,
// in turns with a UDP echo on the same machine (the baseline, timed in
// the same moments), and it reads the bridges' CPU time from /proc.
//
// Scenarios, each with its own processes, in the order run:
//
//	pairs-N     N pairs, each host borrowing one GPU of its own box (the
//	            sweep, default 1, 2, 4, 8, 16, 32)
//	borrow-N    one host borrowing N GPUs from N/4 boxes (at least 2;
//	            default 8 and 32)
//	lend-N      one box lending N GPUs to N hosts (default 8)
//	switch-N    N pairs through one XDP switch (default 64; namespaces
//	            only, skipped with --loopback)
//
// With --loopback every host, box and adapter is its own 127.x address;
// as root without it, the host sides and this process live in one network
// namespace and the GPU sides in another, joined only by the XDP switch
// of package labnet (one pair ID and UDP port per pair), whose drops are
// reported. On loopback the host and box scenarios differ only in how
// the addresses are shared; per-host and per-box goodput are reported.
//
// JSON keys (rates in Gbit/s of completion payload, times in us):
//
//	aggregate_gbps        all pairs together over the window
//	pair_gbps             each pair; min_/max_pair_gbps
//	jain_fairness         Jain's index of pair_gbps: (sum x)^2 / (n sum x^2),
//	                      1 when every pair moves the same
//	host_gbps, box_gbps   summed by host and by box
//	scaling_over_linear   aggregate_gbps / (pairs x the 1-pair sweep point
//	                      of the same run), when that point ran
//	mmio_read_p50_us, _p99_us    4-byte read on pair 1 under the load
//	echo_p50_us, _p99_us         UDP echo, in turns with those reads
//	mmio_read_idle_p50_us, _p99_us  the same read before the load
//	cpu_s_per_gb          the bridge processes' CPU seconds per GB moved
//	load_cpu_s_per_gb     this process's (the adapters' load) per GB
//	frames_sent, retransmits, credit_stalls  from the bridges' metrics
//	                      (--metrics of each process), summed over the window
//	srtt_mean_us          the bridges' smoothed RTT at its end, mean
//	switch_drops          frames the XDP switch dropped (namespaces only)
//	udp_goodput_gbps      two plain UDP sockets flooded with datagrams of
//	                      the bridges' MTU on the same path, once per run
package scalebench
