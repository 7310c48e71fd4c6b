/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * The few kernel ABI definitions the dxpu XDP programs use, written out so
 * that compiling them needs only clang: no kernel, libc or libbpf headers,
 * and therefore the same object file on every build machine.
 */
#ifndef DXPU_BPF_MINIMAL_H
#define DXPU_BPF_MINIMAL_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;

/* struct xdp_md from include/uapi/linux/bpf.h. */
struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};

enum xdp_action {
	XDP_ABORTED = 0,
	XDP_DROP,
	XDP_PASS,
	XDP_TX,
	XDP_REDIRECT,
};

enum {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_HASH = 5,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_XSKMAP = 17,
	BPF_MAP_TYPE_DEVMAP_HASH = 25,
};

#define BPF_ANY 0

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

/* Helper IDs from enum bpf_func_id. */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static __u32 (*bpf_get_prandom_u32)(void) = (void *)7;
static long (*bpf_xdp_adjust_head)(struct xdp_md *xdp_md, int delta) = (void *)44;
static long (*bpf_redirect_map)(void *map, __u64 key, __u64 flags) = (void *)51;
static __u64 (*bpf_xdp_get_buff_len)(struct xdp_md *xdp_md) = (void *)188;

#define bpf_htons(x) __builtin_bswap16(x)
#define bpf_ntohs(x) __builtin_bswap16(x)

#endif
