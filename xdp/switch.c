//go:build ignore

// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * dxpu switch fast path. Forwards dxpu frames (EtherType 0x88B5 with or
 * without one 802.1Q tag, or IPv4/UDP to dxpu_udp_port) between the two
 * bridges of a host-GPU pair. The behaviour is specified by
 * fabric/switch (package switching) Forwarder.Forward; the Go path and this
 * program must agree byte for byte, which xdp's tests check on every frame
 * of the replay corpus.
 */
#include "bpf_minimal.h"

char __license[] SEC("license") = "Dual BSD/GPL";

/* Why a frame got its verdict; the index into struct counters. Keep in
 * step with switching.Reason. The forwarding path's four come first, so
 * that its counter updates share cache lines. */
enum reason {
	REASON_TO_GPU = 0,       /* forwarded host -> GPU */
	REASON_TO_HOST = 1,      /* forwarded GPU -> host */
	REASON_TX_TO_GPU = 2,    /* transmitted towards a GPU */
	REASON_TX_TO_HOST = 3,   /* transmitted towards a host */
	REASON_SPOOFED = 4,      /* known pair, wrong port/MAC/IP: dropped */
	REASON_FAULT = 5,        /* dropped by drop_ppm fault injection */
	REASON_CONTROL = 6,      /* CONTROL message: slow path */
	REASON_UNKNOWN_PAIR = 7, /* no such pair: slow path */
	REASON_MALFORMED = 8,    /* dxpu frame too short or wrong version: dropped */
	REASON_NOT_DXPU = 9,     /* not a dxpu frame: kernel stack */
	REASON_NO_ROOM = 10,     /* VLAN push/pop failed: dropped */
	REASON_MAX = 11,
};

struct counters {
	__u64 packets[REASON_MAX];
	__u64 bytes[REASON_MAX];
};

/* One direction of a pair: what is accepted and how it is rewritten. The
 * loader precomputes it from the table and the ports, so forwarding needs a
 * single hash lookup. MACs and addresses are in wire order. */
struct direction {
	__u32 in_ifindex;  /* accepted only on this port ... */
	__u32 out_ifindex; /* ... and redirected to this one */
	__u8 src_mac[6];   /* accepted only from this MAC */
	__u8 dst_mac[6];   /* new destination MAC: the far endpoint */
	__u8 port_mac[6];  /* new source MAC: the egress port */
	__be16 dst_port;   /* new UDP destination port */
	__be32 src_ip;     /* UDP: accepted only from this address (0: any) */
	__be32 new_src_ip; /* UDP: new source address (0: keep) */
	__be32 new_dst_ip; /* UDP: new destination address (0: keep) */
	__u32 in_slot;     /* ingress port counter slot */
	__u32 csum_add;    /* UDP: words(new_src_ip) + words(new_dst_ip) when both are set, else 0 */
};

struct pair {
	struct direction dir[2]; /* 0: host -> GPU, 1: GPU -> host */
	__u32 slot;              /* pair counter slot */
	__u16 vlan;              /* egress VLAN ID, 0: untagged */
	__u16 _pad;
	__u32 drop_ppm;
	__u32 _pad2;
};

#define MAX_PORTS 256
#define PAIR_LANES 32
#define BPF_F_MMAPABLE (1U << 10)

/* Pair lookup is two array lookups, not a hash: pair_index maps a pair ID
 * to the slot of its rule in rules (slot+1; 0: no such pair), 32 IDs per
 * element. The loader writes index entries with single atomic stores
 * through mmap and never rewrites a rule in place: a changed pair gets a
 * fresh slot, then its index entry is flipped, so no frame ever sees a torn
 * or stale-and-removed rule. */
struct pair_index_chunk {
	__u16 slot[PAIR_LANES];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct pair_index_chunk);
	__uint(max_entries, (1 << 24) / PAIR_LANES);
} pair_index SEC(".maps");

/* Sized by the loader (2 x MaxPairs: room for the generation scheme). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__type(key, __u32);
	__type(value, struct pair);
	__uint(max_entries, 8192);
} rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(max_entries, 8192);
} pair_stats SEC(".maps");

/* Port counters by slot; slot 0 collects ports the switch does not manage. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(max_entries, MAX_PORTS);
} port_stats SEC(".maps");

/* Counters of the benchmark baseline program. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__type(key, __u32);
	__type(value, struct counters);
	__uint(max_entries, 1);
} baseline_stats SEC(".maps");

/* ifindex -> port counter slot, for frames that have no pair entry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_PORTS);
} port_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_PORTS);
} tx_ports SEC(".maps");

/* AF_XDP sockets, keyed by port slot * XSK_QUEUES + RX queue: the slow
 * path (or, with all_to_xsk, every dxpu frame) goes to the socket of its
 * port and queue; with none there, to the kernel stack. */
#define XSK_QUEUES 64
struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, MAX_PORTS * XSK_QUEUES);
} xsks SEC(".maps");

/* Set by the loader for the AF_XDP userspace switch (mode afxdp): every
 * dxpu frame goes to the port's AF_XDP socket, Go decides. */
volatile const __u8 all_to_xsk = 0;

/* The UDP destination port of dxpu frames in network order (8855 =
 * 0x2297); the loader sets it. */
volatile const __be16 dxpu_udp_port = 0x9722;

#define ETH_HLEN 14
#define VLAN_HLEN 4
#define ETH_P_8021Q 0x8100
#define ETH_P_IP 0x0800
#define ETH_P_DXPU 0x88B5
#define DXPU_HLEN 40
#define DXPU_VERSION 1
#define DXPU_MSG_CONTROL 5
#define IPPROTO_UDP 17
/* Below this, a frame's linear part is all of it (drivers and veth put at
 * least a page minus headroom and skb_shared_info there). */
#define LINEAR_MIN 2048

static __always_inline void count(void *map, __u32 slot, __u32 reason, __u64 bytes)
{
	struct counters *c = bpf_map_lookup_elem(map, &slot);
	if (c && reason < REASON_MAX) {
		c->packets[reason]++;
		c->bytes[reason] += bytes;
	}
}

/* Counts a frame that takes no forwarding path: it may be a multi-buffer
 * (jumbo) frame, so its length comes from the helper. */
static __always_inline void count_port(struct xdp_md *ctx, __u32 reason)
{
	__u32 ifindex = ctx->ingress_ifindex;
	__u64 bytes = bpf_xdp_get_buff_len(ctx);
	__u32 slot = 0;
	__u32 *s = bpf_map_lookup_elem(&port_slots, &ifindex);
	if (s)
		slot = *s;
	count(&port_stats, slot, reason, bytes);
}

/* A 16-bit field as it lies in memory; compare with bpf_htons(constant). */
static __always_inline __u16 raw16(const __u8 *p)
{
	return *(const __u16 *)p;
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
	return *(const __u32 *)a == *(const __u32 *)b &&
	       *(const __u16 *)(a + 4) == *(const __u16 *)(b + 4);
}

static __always_inline void mac_copy(__u8 *dst, const __u8 *src)
{
	*(__u32 *)dst = *(const __u32 *)src;
	*(__u16 *)(dst + 4) = *(const __u16 *)(src + 4);
}

/* RFC 1624 incremental update: HC' = ~(~HC + ~m + m'), over 16-bit words
 * in memory order (one's complement sums do not depend on byte order). */
static __always_inline __u16 csum_fold(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)s;
}

/* The sum of the 16-bit words of a 32-bit value, and of its complement. */
static __always_inline __u32 words(__u32 v)
{
	return (v & 0xffff) + (v >> 16);
}

static __always_inline __u32 not_words(__u32 v)
{
	return words(~v);
}

static __always_inline int slow_path(struct xdp_md *ctx)
{
	/* An AF_XDP socket on this port and queue takes it, otherwise the
	 * stack (an AF_PACKET listener) does. */
	__u32 ifindex = ctx->ingress_ifindex;
	__u32 *slot = bpf_map_lookup_elem(&port_slots, &ifindex);
	if (!slot || ctx->rx_queue_index >= XSK_QUEUES)
		return XDP_PASS;
	return bpf_redirect_map(&xsks, *slot * XSK_QUEUES + ctx->rx_queue_index, XDP_PASS);
}

/* The decision for a dxpu frame whose header starts at h; ip and udp are
 * the IPv4 and UDP headers of a dxpu-udp frame, NULL for dxpu-eth. */
static __always_inline int forward(struct xdp_md *ctx, __u8 *data, __u8 *end, __u8 *h,
				   __u8 *ip, __u8 *udp, int tagged)
{
	__u32 in = ctx->ingress_ifindex;
	__u64 len = end - data;

	if (all_to_xsk)
		return slow_path(ctx);
	if (h + DXPU_HLEN > end || (h[0] >> 4) != DXPU_VERSION) {
		count_port(ctx, REASON_MALFORMED);
		return XDP_DROP;
	}
	if (h[1] == DXPU_MSG_CONTROL) {
		count_port(ctx, REASON_CONTROL);
		return slow_path(ctx);
	}

	__u32 id = (__u32)h[2] << 16 | (__u32)h[3] << 8 | h[4];
	__u32 chunk = id / PAIR_LANES;
	struct pair_index_chunk *ix = bpf_map_lookup_elem(&pair_index, &chunk);
	__u32 slot = ix ? ix->slot[id % PAIR_LANES] : 0;
	struct pair *p = 0;
	if (slot) {
		slot--;
		p = bpf_map_lookup_elem(&rules, &slot);
	}
	if (!p) {
		count_port(ctx, REASON_UNKNOWN_PAIR);
		return slow_path(ctx);
	}

	__u32 src_ip = ip ? *(__u32 *)(ip + 12) : 0;
	struct direction *d;
	__u32 reason;
	if (in == p->dir[0].in_ifindex && mac_eq(data + 6, p->dir[0].src_mac) &&
	    (!ip || !p->dir[0].src_ip || src_ip == p->dir[0].src_ip)) {
		d = &p->dir[0];
		reason = REASON_TO_GPU;
	} else if (in == p->dir[1].in_ifindex && mac_eq(data + 6, p->dir[1].src_mac) &&
		   (!ip || !p->dir[1].src_ip || src_ip == p->dir[1].src_ip)) {
		d = &p->dir[1];
		reason = REASON_TO_HOST;
	} else {
		count(&pair_stats, p->slot, REASON_SPOOFED, bpf_xdp_get_buff_len(ctx));
		count_port(ctx, REASON_SPOOFED);
		return XDP_DROP;
	}


	if (p->drop_ppm && bpf_get_prandom_u32() % 1000000 < p->drop_ppm) {
		len = bpf_xdp_get_buff_len(ctx);
		count(&pair_stats, p->slot, REASON_FAULT, len);
		count(&port_stats, d->in_slot, REASON_FAULT, len);
		return XDP_DROP;
	}

	if (ip) {
		__u16 *ipcheck = (__u16 *)(ip + 10);
		__u16 *udpcheck = (__u16 *)(udp + 6);
		__u16 ucheck = *udpcheck;
		__u32 old_src = *(__u32 *)(ip + 12);
		__u32 old_dst = *(__u32 *)(ip + 16);
		__u32 new_src, new_dst;
		__u32 delta = not_words(old_src) + not_words(old_dst);
		if (d->csum_add) { /* both addresses rewritten: sum precomputed */
			new_src = d->new_src_ip;
			new_dst = d->new_dst_ip;
			delta += d->csum_add;
		} else {
			new_src = d->new_src_ip ? d->new_src_ip : old_src;
			new_dst = d->new_dst_ip ? d->new_dst_ip : old_dst;
			delta += words(new_src) + words(new_dst);
		}
		__u16 old_sport = *(__u16 *)udp, old_dport = *(__u16 *)(udp + 2);
		__u16 new_sport = dxpu_udp_port;

		/* One update per checksum: ~HC + sum(~old) + sum(new). */
		*ipcheck = (__u16)~csum_fold((__u16)~*ipcheck + delta);
		*(__u32 *)(ip + 12) = new_src;
		*(__u32 *)(ip + 16) = new_dst;
		*(__u16 *)udp = new_sport;
		*(__u16 *)(udp + 2) = d->dst_port;
		if (ucheck) { /* 0: no UDP checksum, keep it that way */
			delta += (__u16)~old_sport + (__u16)~old_dport + new_sport + d->dst_port;
			ucheck = (__u16)~csum_fold((__u16)~ucheck + delta);
			*udpcheck = ucheck ? ucheck : 0xffff;
		}
	}

	if (tagged && p->vlan) {
		data[14] = (data[14] & 0xf0) | (__u8)(p->vlan >> 8);
		data[15] = (__u8)p->vlan;
	} else if (tagged != !!p->vlan) {
		/* Pop (+4) or push (-4) the tag; the Ethernet addresses
		 * are rewritten below, so only the EtherType must land right. */
		if (bpf_xdp_adjust_head(ctx, tagged ? VLAN_HLEN : -VLAN_HLEN)) {
			count(&port_stats, d->in_slot, REASON_NO_ROOM, len);
			return XDP_DROP;
		}
		data = (__u8 *)(long)ctx->data;
		end = (__u8 *)(long)ctx->data_end;
		if (data + ETH_HLEN + VLAN_HLEN > end)
			return XDP_DROP;
		if (!tagged) {
			data[12] = ETH_P_8021Q >> 8;
			data[13] = ETH_P_8021Q & 0xff;
			data[14] = (__u8)(p->vlan >> 8);
			data[15] = (__u8)p->vlan;
		}
		/* The transmitted bytes differ from the received ones by the
		 * tag: counted here, off the common path (see below). */
		struct counters *c = bpf_map_lookup_elem(&pair_stats, &p->slot);
		if (c)
			c->bytes[reason + REASON_TX_TO_GPU] += tagged ? -VLAN_HLEN : VLAN_HLEN;
	}
	if (data + ETH_HLEN > end)
		return XDP_DROP;
	mac_copy(data, d->dst_mac);
	mac_copy(data + 6, d->port_mac);

	/* A pushed tag adds 4 bytes, a popped one removes 4. */
	__s64 grown = tagged == !!p->vlan ? 0 : tagged ? -VLAN_HLEN : VLAN_HLEN;
	/* The whole frame's length is the linear part unless the frame is
	 * multi-buffer, which only happens beyond a page (the helper that
	 * tells is not free, and is called last so nothing lives across it). */
	if (len > LINEAR_MIN)
		len = bpf_xdp_get_buff_len(ctx) - grown;
	/* The forwarding path counts once, on the pair, and only what it
	 * received (reason): every such frame is also transmitted, with as
	 * many bytes plus a pushed or minus a popped tag. That difference is
	 * added where a tag is pushed or popped (above), as a signed
	 * (wrapping) sum in bytes[reason + REASON_TX_TO_GPU]; packets[] of
	 * the tx reasons stay zero. The loader derives the transmitted counts
	 * and adds it all to the ports' counters, which would cost a lookup
	 * here. Two increments fewer per frame: about 1 ns of 13. */
	struct counters *c = bpf_map_lookup_elem(&pair_stats, &p->slot);
	if (c) {
		c->packets[reason]++;
		c->bytes[reason] += len;
	}
	return bpf_redirect_map(&tx_ports, d->out_ifindex, XDP_DROP);

}

SEC("xdp.frags")
int dxpu_switch(struct xdp_md *ctx)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	__u8 *l3, *ip, *udp;
	__u16 proto;
	int tagged = 0;

	if (data + ETH_HLEN > end)
		goto not_dxpu;
	proto = raw16(data + 12);
	l3 = data + ETH_HLEN;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		if (data + ETH_HLEN + VLAN_HLEN > end)
			goto not_dxpu;
		proto = raw16(data + 16);
		l3 = data + ETH_HLEN + VLAN_HLEN;
		tagged = 1;
	}
	if (proto == bpf_htons(ETH_P_DXPU)) {
		/* Two inlined copies of forward(): each specialised for its
		 * encapsulation, with fewer branches and register spills. */
		return forward(ctx, data, end, l3, 0, 0, tagged);
	} else if (proto == bpf_htons(ETH_P_IP)) {
		__u32 ihl;
		ip = l3;
		if (ip + 20 > end)
			goto not_dxpu;
		if (ip[0] == 0x45) { /* no IP options: constant offsets */
			if (ip[9] != IPPROTO_UDP || (raw16(ip + 6) & bpf_htons(0x3fff)) ||
			    ip + 28 > end || raw16(ip + 22) != dxpu_udp_port)
				goto not_dxpu;
			return forward(ctx, data, end, ip + 28, ip, ip + 20, tagged);
		}
		ihl = (ip[0] & 0x0f) * 4;
		if ((ip[0] >> 4) != 4 || ihl < 20 || ip[9] != IPPROTO_UDP)
			goto not_dxpu;
		if (raw16(ip + 6) & bpf_htons(0x3fff)) /* MF or fragment offset */
			goto not_dxpu;
		udp = ip + ihl;
		if (udp + 8 > end)
			goto not_dxpu;
		if (raw16(udp + 2) != dxpu_udp_port)
			goto not_dxpu;
		return forward(ctx, data, end, udp + 8, ip, udp, tagged);
	}

not_dxpu:
	count_port(ctx, REASON_NOT_DXPU);
	return XDP_PASS;
}

/* The benchmark baseline: the least an XDP forwarder does, after the
 * kernel's samples/bpf xdp_redirect_map: bounds check, a per-CPU packet
 * counter, swap the Ethernet addresses, redirect through a devmap. */
SEC("xdp.frags")
int dxpu_redirect_baseline(struct xdp_md *ctx)
{
	__u8 *data = (__u8 *)(long)ctx->data;
	__u8 *end = (__u8 *)(long)ctx->data_end;
	__u8 tmp[6];

	if (data + ETH_HLEN > end)
		return XDP_DROP;
	count(&baseline_stats, 0, REASON_TX_TO_GPU, end - data);
	mac_copy(tmp, data);
	mac_copy(data, data + 6);
	mac_copy(data + 6, tmp);
	return bpf_redirect_map(&tx_ports, ctx->ingress_ifindex, XDP_DROP);
}

/* For the far ends of veth pairs: a veth drops redirected frames unless its
 * peer runs an XDP program. */
SEC("xdp.frags")
int dxpu_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}
