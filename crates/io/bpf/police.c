// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// The AF_PACKET driver's policer: socket filters over one bucket (police.h), attached
// to each receiving socket of a policed interface. A socket filter returns how many
// bytes of the frame the socket takes: 0 drops it.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "police.h"

// A socket that takes every frame.
SEC("socket")
int ovr_police(struct __sk_buff *skb)
{
    return ovr_police_pass(skb->len) ? skb->len : 0;
}

// The socket that takes every EtherType but IPv4, beside one bound to IPv4 (the
// driver behind a TC program): it refuses IPv4 as its classic filter did, which this
// program replaces, and polices the rest. The EtherType is read where that filter
// read it, from the Ethernet header.
SEC("socket")
int ovr_police_not_ipv4(struct __sk_buff *skb)
{
    __u16 type;
    if (bpf_skb_load_bytes(skb, 12, &type, sizeof(type)) < 0)
        return 0;
    if (type == bpf_htons(ETH_P_IP))
        return 0;
    return ovr_police_pass(skb->len) ? skb->len : 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
