//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * The AF_XDP bridge transport's XDP program: a dxpu frame (EtherType
 * 0x88B5, behind at most two 802.1Q/802.1ad tags) goes to the AF_XDP
 * socket of its RX queue; everything else, and dxpu frames on a queue
 * without a socket, goes on to the kernel stack untouched.
 */
#include "../../xdp/bpf_minimal.h"

char __license[] SEC("license") = "Dual BSD/GPL";

#define ETH_P_DXPU 0x88B5
#define ETH_P_8021Q 0x8100
#define ETH_P_8021AD 0x88A8
#define MAX_QUEUES 64

/* AF_XDP sockets by RX queue. */
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_QUEUES);
} xsks SEC(".maps");

SEC("xdp")
int dxpu_xsk_redirect(struct xdp_md *ctx)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	__u8 *p = data + 12; /* the EtherType after two MACs */

	if (p + 2 > end)
		return XDP_PASS;
	__be16 type = *(__be16 *)p;
#pragma unroll
	for (int i = 0; i < 2; i++) {
		if (type != bpf_htons(ETH_P_8021Q) && type != bpf_htons(ETH_P_8021AD))
			break;
		p += 4;
		if (p + 2 > end)
			return XDP_PASS;
		type = *(__be16 *)p;
	}
	if (type != bpf_htons(ETH_P_DXPU))
		return XDP_PASS;
	/* No socket on this queue: the default action (the flags' low bits). */
	return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
}
