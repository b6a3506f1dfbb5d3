// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// The AF_XDP driver's XDP program: every frame arriving on a queue that has an ovr
// socket goes to that socket; a queue without one passes frames to the kernel's stack.
// The program is frags-aware ("xdp.frags") only so that it may be attached to a veth
// whose peer has a jumbo MTU; a frame larger than one UMEM chunk is dropped by the
// kernel at the socket and counted there (XDP_STATISTICS rx_dropped).
//
// A policed interface's frames over its rate are dropped here first (police.h).
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include "police.h"

// One entry per receive queue of the interface this copy of the program is attached to.
struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 64);
    __type(key, __u32);
    __type(value, __u32);
} ovr_xsks SEC(".maps");

SEC("xdp.frags")
int ovr_xsk_redirect(struct xdp_md *ctx)
{
    if (!ovr_police_pass(bpf_xdp_get_buff_len(ctx)))
        return XDP_DROP;
    return bpf_redirect_map(&ovr_xsks, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
