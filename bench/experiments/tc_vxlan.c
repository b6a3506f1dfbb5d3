// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// An experiment, not part of ovrd: how fast VXLAN between two hosts' workloads can be
// when established flows are encapsulated and decapsulated by TC (cls_bpf) programs on
// the veths, keeping the kernel's large (GSO) packets whole, with no forwarder process.
// bench/experiments/tc_vxlan.sh builds the topology, compiles this once per host with
// its addresses (-D below) and measures TCP; bench/RESULTS.md says what it showed and
// what it means for an ovrd fast path. One static tunnel: no flow table, no checks
// beyond what the measurement needs.
//
// -D: WORKLOAD (ifindex of the host side of the workload's veth), UNDERLAY (ifindex of
// the underlay veth), LOCAL_MAC / PEER_MAC (underlay MACs as 6 comma-separated bytes),
// LOCAL_IP / PEER_IP (underlay IPv4, host-order integers), VNI; ENCAP or DECAP: which
// of the two programs the object holds (tc loads the one program of a section).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define HEAD 50 // outer IPv4 + UDP + VXLAN + inner Ethernet, inserted after the MAC header

struct outer {
    struct ethhdr eth;
    struct iphdr ip;
    __u16 sport, dport, len, check;
    __u32 flags, vni;
} __attribute__((packed));

#ifdef ENCAP
static __always_inline __u16 ip_check(const struct iphdr *ip)
{
    const __u16 *h = (const __u16 *)ip;
    __u32 s = 0;
#pragma unroll
    for (int i = 0; i < 10; i++)
        s += h[i];
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return ~s;
}

// From the workload: IPv4 only (ARP is answered by static entries in this experiment).
SEC("tc")
int encap(struct __sk_buff *skb)
{
    if (skb->protocol != bpf_htons(ETH_P_IP))
        return TC_ACT_OK;
    struct ethhdr inner;
    if (bpf_skb_load_bytes(skb, 0, &inner, sizeof(inner)))
        return TC_ACT_SHOT;
    __u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 |
                  BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_ENCAP_L2_ETH |
                  BPF_F_ADJ_ROOM_ENCAP_L2(ETH_HLEN);
    if (bpf_skb_adjust_room(skb, HEAD, BPF_ADJ_ROOM_MAC, flags))
        return TC_ACT_SHOT;
    __u32 len = skb->len;
    struct outer o = {
        .eth = {.h_dest = {PEER_MAC}, .h_source = {LOCAL_MAC}, .h_proto = bpf_htons(ETH_P_IP)},
        // The source port spreads flows over the underlay's paths (RFC 7348, 5).
        .sport = bpf_htons(49152 | (skb->hash & 0x3fff)),
        .dport = bpf_htons(4789),
        .len = bpf_htons(len - ETH_HLEN - 20),
        .check = 0,
        .flags = bpf_htonl(0x08000000),
        .vni = bpf_htonl(VNI << 8),
    };
    struct iphdr ip = {.version = 4, .ihl = 5, .ttl = 64, .protocol = IPPROTO_UDP,
                       .tot_len = bpf_htons(len - ETH_HLEN),
                       .saddr = bpf_htonl(LOCAL_IP), .daddr = bpf_htonl(PEER_IP)};
    ip.check = ip_check(&ip);
    __builtin_memcpy((__u8 *)&o + ETH_HLEN, &ip, sizeof(ip));
    if (bpf_skb_store_bytes(skb, 0, &o, sizeof(o), 0) ||
        bpf_skb_store_bytes(skb, sizeof(o), &inner, sizeof(inner), 0))
        return TC_ACT_SHOT;
    return bpf_redirect(UNDERLAY, 0);
}
#endif

#ifdef DECAP
// From the underlay: VXLAN to this host's address, the one VNI; the rest to the stack.
SEC("tc")
int decap(struct __sk_buff *skb)
{
    struct outer o;
    struct ethhdr inner;
    if (skb->protocol != bpf_htons(ETH_P_IP) ||
        bpf_skb_load_bytes(skb, 0, &o, sizeof(o)) ||
        bpf_skb_load_bytes(skb, sizeof(o), &inner, sizeof(inner)))
        return TC_ACT_OK;
    if (o.ip.protocol != IPPROTO_UDP || o.ip.ihl != 5 ||
        o.ip.daddr != bpf_htonl(LOCAL_IP) || o.dport != bpf_htons(4789) ||
        o.vni != bpf_htonl(VNI << 8))
        return TC_ACT_OK;
    // Takes out the 50 bytes after the outer MAC header (outer IPv4, UDP, VXLAN and the
    // inner Ethernet header), then writes the inner Ethernet header over the outer one.
    if (bpf_skb_adjust_room(skb, -HEAD, BPF_ADJ_ROOM_MAC,
                            BPF_F_ADJ_ROOM_FIXED_GSO) ||
        bpf_skb_store_bytes(skb, 0, &inner, sizeof(inner), 0))
        return TC_ACT_SHOT;
    return bpf_redirect(WORKLOAD, 0);
}
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";
