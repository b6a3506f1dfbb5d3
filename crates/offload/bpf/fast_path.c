// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// ovr's fast path program, loaded once per ovrd at one of two hooks and attached to
// every interface ovrd forwards on: ovr_xdp (XDP) or ovr_tc (TC ingress, TCX).
//
// 1. The fast path ("offload"): a frame of an established flow that user space has
//    described in ovr_flows is decapsulated, encapsulated or rewritten here and
//    redirected to its egress interface, without waking ovrd.
// 2. Everything else goes where ovrd reads the interface. XDP: the AF_XDP socket of the
//    receive queue (ovr_xsks, from the interface's slot in ovr_ifaces), or, for an
//    interface ovrd reads with AF_PACKET, the kernel's stack (XDP_PASS). TC: on
//    (TC_ACT_OK) to ovrd's AF_PACKET sockets, which the kernel serves after TC.
//
// The fast path handles only what it can do exactly as the user-space pipeline would:
// VXLAN over IPv4 (no options, no fragments, a UDP checksum, if any, that verifies),
// inner untagged IPv4 TCP, UDP and ICMP echo without options or fragments, TTL > 1, no Ethernet
// padding, within the egress MTU. XDP also needs frames in one buffer and (from a workload) a transport checksum
// that verifies: a sender that left its checksum to the NIC (CHECKSUM_PARTIAL on a veth)
// is indistinguishable there from one that sent a bad checksum, and both go to user
// space, which finishes the first (it learns of it through AF_PACKET's virtio-net
// header). TC sees the kernel's skb, which says so itself (see tc_fast).
//
// The layouts below are mirrored byte for byte in crates/offload/src/layout.rs (whose
// tests pin every offset); change both together.
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define OVR_KIND_WORKLOAD 1
#define OVR_KIND_UNDERLAY 2
#define OVR_NO_XSK 0xffffffffu
#define OVR_MAX_ADDRS 4

// Per interface ovrd forwards on (key: ifindex).
struct ovr_iface {
    __u32 kind;
    __u32 xsk_base;               // first slot in ovr_xsks, or OVR_NO_XSK (AF_PACKET)
    __u32 addrs[OVR_MAX_ADDRS];   // underlay: its IPv4 addresses (network order), 0 = none
    __u8 mac[6];                  // underlay: its MAC
    __u16 pad;
};

// What a fast-path flow matches (28 bytes, zero padding).
struct ovr_key {
    __u32 ifindex;   // receiving interface
    __u32 vni;       // from the underlay: the VXLAN VNI; from a workload: 0
    __u32 saddr;     // inner IPv4 source, network order
    __u32 daddr;
    __u16 sport;     // network order
    __u16 dport;
    __u8 dmac[6];    // inner destination MAC
    __u8 proto;
    __u8 pad;
};

#define OVR_TPL_LEN 64
#define OVR_VXLAN_HEAD 50   // Ethernet + IPv4 + UDP + VXLAN

// bpf_skb_adjust_room: on shrinking a UDP-tunnel GSO packet, clear its tunnel marks
// (newer than this machine's headers; a kernel without it refuses the call unchanged).
#define OVR_ADJ_ROOM_DECAP_L4_UDP (1ULL << 10)

#define OVR_F_SET_MAC 1     // inner destination and source MAC from mac[]
#define OVR_F_DEC_TTL 2     // routed into the overlay: TTL - 1, checksum patched
#define OVR_F_CHECK_L4 4    // from a workload: the transport checksum must verify

// What user space decided for the flow, plus its counters. A plain hash with atomic
// counters, not a per-CPU one: per-CPU values come from the kernel's percpu allocator,
// which here refused (ENOMEM) beyond about 110K entries and was slow before that. What
// every packet reads or writes comes first, so that with many flows (entries not in the
// cache) a packet touches as few cache lines as it can. The outer headers are a tunnel's,
// shared by its flows (ovr_tpls): only the UDP source port is the flow's own.
struct ovr_action {
    __u32 generation;     // valid while equal to ovr_gen[0]
    __u32 egress;    // ifindex, a key of ovr_tx
    __u16 strip;     // bytes taken off the front (0 or OVR_VXLAN_HEAD)
    __u16 push;      // bytes of the template put in front (0 or OVR_VXLAN_HEAD)
    __u16 max_len;   // the largest frame the egress interface takes
    __u16 flags;
    __u64 packets;
    __u64 bytes;     // as received
    __u64 last_seen; // bpf_ktime_get_ns()
    __u8 mac[12];    // inner destination then source MAC
    __u32 tpl;       // with push: the outer headers' index in ovr_tpls
    __u16 sport;     // with push: the outer UDP source port (network order)
    __u16 pad;
    __u32 sender;    // from the underlay: the outer IPv4 source it takes (0: any)
};

// A tunnel's outer headers (lengths, checksum and UDP source port patched per frame).
struct ovr_tpl {
    __u8 bytes[OVR_TPL_LEN];
};

// Why a frame went to user space, or that it did not (per-CPU counters).
enum {
    OVR_C_HIT,
    OVR_C_MISS,        // parsed, no entry
    OVR_C_STALE,       // entry of an older generation (the tables changed)
    OVR_C_UNPARSED,    // not a shape the fast path handles (ARP, IPv6, options, ...)
    OVR_C_MULTI_BUFFER,
    OVR_C_TTL,
    OVR_C_CHECKSUM,        // transport checksum does not verify (partial or bad)
    OVR_C_MTU,
    OVR_C_NO_EGRESS,   // egress not in ovr_tx
    OVR_C_REDIRECT_ERROR,
    OVR_C_ROOM,        // TC: the kernel would not make or take room for the tunnel header
    OVR_C_SENDER,      // from another host than the flow's (a moved session: user space)
    OVR_C_TEMPLATE,    // the flow's outer headers are not in ovr_tpls
    OVR_C_MAX,
};

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 256);
    __type(key, __u32);
    __type(value, struct ovr_iface);
} ovr_ifaces SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_XSKMAP);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, __u32);
} ovr_xsks SEC(".maps");

// Sized by ovrd when it loads the program (its flow table's capacity); this is a default.
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 1 << 20);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, struct ovr_key);
    __type(value, struct ovr_action);
} ovr_flows SEC(".maps");

// Outer headers by index (user space keeps which tunnel has which); sized by ovrd when it
// loads the program, this is a default.
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 4096);
    __type(key, __u32);
    __type(value, struct ovr_tpl);
} ovr_tpls SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u32);
} ovr_gen SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_DEVMAP_HASH);
    __uint(max_entries, 256);
    __type(key, __u32);
    __type(value, struct bpf_devmap_val);
} ovr_tx SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, OVR_C_MAX);
    __type(key, __u32);
    __type(value, __u64);
} ovr_counters SEC(".maps");

static __always_inline void count(__u32 what)
{
    __u64 *c = bpf_map_lookup_elem(&ovr_counters, &what);
    if (c)
        *c += 1;
}

static __always_inline __u16 fold(__u64 sum)
{
    sum = (sum & 0xffffffff) + (sum >> 32);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    return (__u16)sum;
}

// The one's-complement sum of a 20-byte IPv4 header (0xffff when its checksum is right).
static __always_inline __u16 ip_sum(const __u16 *h)
{
    __u64 s = 0;
#pragma unroll
    for (int i = 0; i < 10; i++)
        s += h[i];
    return fold(s);
}

static __always_inline int mac_eq(const __u8 *a, const __u8 *b)
{
    return *(const __u32 *)a == *(const __u32 *)b &&
           *(const __u16 *)(a + 4) == *(const __u16 *)(b + 4);
}

// Whether the TCP/UDP checksum of the segment at l4 (len bytes, to the frame's end)
// verifies. At most 2048 bytes are summed (an MTU-sized packet, or a tunnel packet
// carrying one); a longer segment does not verify (user space).
#define OVR_CSUM_MAX_WORDS (2048 / 4)
static __always_inline int l4_csum_ok(const struct iphdr *ip, void *l4, void *end,
                                      __u32 len)
{
    __u64 s = 0;
    s += (ip->saddr >> 16) + (ip->saddr & 0xffff);
    s += (ip->daddr >> 16) + (ip->daddr & 0xffff);
    s += bpf_htons(ip->protocol) + bpf_htons((__u16)len);
    __u32 *w = l4;
    for (int i = 0; i < OVR_CSUM_MAX_WORDS; i++) {
        if ((void *)(w + 1) > end)
            break;
        s += *w;
        w++;
    }
    __u8 *b = (__u8 *)w;
    if ((void *)(b + 2) <= end) {
        s += *(__u16 *)b;
        b += 2;
    }
    if ((void *)(b + 1) <= end) {
        s += *b; // the last odd byte: the high byte in network order (little-endian host)
        b += 1;
    }
    if ((void *)b < end)
        return 0; // longer than what was summed
    return fold(s) == 0xffff;
}

// What parsing a frame found: its key, and where its transport header ends.
struct ovr_parsed {
    struct ovr_key key;
    __u32 l4_len;   // transport header and payload
    __u32 l4_hdr;   // transport header (TCP: with options; UDP: 8)
    int udp_sum;    // the outer UDP header has a checksum (to verify)
    __u32 sender;   // the outer IPv4 source (from the underlay)
};

// Parses the frame at data..end (frame_len bytes in all, which may be more than is
// between data and end: an skb's headers are pulled, its payload need not be) whose
// inner Ethernet header is at `off` (0 or OVR_VXLAN_HEAD), into p. An outer UDP
// checksum is left for the caller to verify (p->udp_sum). Returns 0, or -1 for a frame
// the fast path does not handle (counted).
static __always_inline int parse(void *data, void *end, __u32 frame_len,
                                 const struct ovr_iface *ifc, const int off,
                                 struct ovr_parsed *p)
{
    if (off) {
        if (data + OVR_VXLAN_HEAD > end)
            return count(OVR_C_UNPARSED), -1;
        struct ethhdr *eth = data;
        struct iphdr *ip = data + 14;
        __u8 *udp = data + 34;
        __u8 *vx = data + 42;
        if (!mac_eq(eth->h_dest, ifc->mac) || eth->h_proto != bpf_htons(ETH_P_IP) ||
            *(__u8 *)ip != 0x45 || ip->protocol != IPPROTO_UDP ||
            (ip->frag_off & bpf_htons(0x3fff)) ||
            bpf_ntohs(ip->tot_len) != frame_len - 14)
            return count(OVR_C_UNPARSED), -1;
        if (ip_sum((const __u16 *)ip) != 0xffff)
            return count(OVR_C_UNPARSED), -1;
        int local = 0;
#pragma unroll
        for (int i = 0; i < OVR_MAX_ADDRS; i++)
            local |= ifc->addrs[i] && ifc->addrs[i] == ip->daddr;
        if (!local)
            return count(OVR_C_UNPARSED), -1;
        // UDP: port 4789, length of the IP payload; a checksum, if any, is the caller's.
        if (*(__u16 *)(udp + 2) != bpf_htons(4789) ||
            bpf_ntohs(*(__u16 *)(udp + 4)) != frame_len - 34)
            return count(OVR_C_UNPARSED), -1;
        p->udp_sum = *(__u16 *)(udp + 6) != 0;
        p->sender = ip->saddr;
        // VXLAN: I flag only, reserved bits zero.
        if (*(__u32 *)vx != bpf_htonl(0x08000000) || vx[7] != 0)
            return count(OVR_C_UNPARSED), -1;
        p->key.vni = ((__u32)vx[4] << 16) | ((__u32)vx[5] << 8) | vx[6];
    }

    if (data + off + 34 > end)
        return count(OVR_C_UNPARSED), -1;
    struct ethhdr *eth = data + off;
    struct iphdr *ip = data + off + 14;
    if (eth->h_proto != bpf_htons(ETH_P_IP) || *(__u8 *)ip != 0x45 ||
        (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_UDP &&
         ip->protocol != IPPROTO_ICMP) ||
        (ip->frag_off & bpf_htons(0x3fff)) ||
        bpf_ntohs(ip->tot_len) != frame_len - off - 14)
        return count(OVR_C_UNPARSED), -1;
    if (ip->ttl <= 1)
        return count(OVR_C_TTL), -1;
    if (ip_sum((const __u16 *)ip) != 0xffff)
        return count(OVR_C_UNPARSED), -1;
    __u8 *l4 = data + off + 34;
    p->l4_len = frame_len - off - 34;
    if (ip->protocol == IPPROTO_TCP) {
        if (l4 + 20 > (__u8 *)end)
            return count(OVR_C_UNPARSED), -1;
        p->l4_hdr = (l4[12] >> 4) * 4;
        if (p->l4_hdr < 20 || p->l4_hdr > p->l4_len)
            return count(OVR_C_UNPARSED), -1;
    } else if (ip->protocol == IPPROTO_ICMP) {
        // Echo request (8) and reply (0) only: one flow both ways, keyed by the identifier.
        if (l4 + 8 > (__u8 *)end || (l4[0] != 0 && l4[0] != 8))
            return count(OVR_C_UNPARSED), -1;
        p->l4_hdr = 8;
    } else {
        if (l4 + 8 > (__u8 *)end || bpf_ntohs(*(__u16 *)(l4 + 4)) != p->l4_len)
            return count(OVR_C_UNPARSED), -1;
        p->l4_hdr = 8;
    }
    p->key.saddr = ip->saddr;
    p->key.daddr = ip->daddr;
    if (ip->protocol == IPPROTO_ICMP) {
        // As user space keys an echo: its identifier for both ports.
        p->key.sport = *(__u16 *)(l4 + 4);
        p->key.dport = p->key.sport;
    } else {
        p->key.sport = *(__u16 *)l4;
        p->key.dport = *(__u16 *)(l4 + 2);
    }
    p->key.proto = ip->protocol;
    __builtin_memcpy(p->key.dmac, eth->h_dest, 6);
    return 0;
}

// The entry for the parsed frame, if there is one of the generation in force and the
// frame comes from the host the entry takes (else counted). A flow from the underlay is
// its sender's: a packet of it that another host sent on (the session moved, to a
// service instance there say) goes to user space, which follows the move and offers
// the flow again.
static __always_inline struct ovr_action *find(const struct ovr_parsed *p)
{
    struct ovr_action *a = bpf_map_lookup_elem(&ovr_flows, &p->key);
    if (!a)
        return count(OVR_C_MISS), (void *)0;
    __u32 zero = 0;
    __u32 *gen = bpf_map_lookup_elem(&ovr_gen, &zero);
    if (!gen || a->generation != *gen)
        return count(OVR_C_STALE), (void *)0;
    if (a->sender && a->sender != p->sender)
        return count(OVR_C_SENDER), (void *)0;
    return a;
}

// What the entry does to the inner headers (same for both hooks): MACs, TTL.
static __always_inline void rewrite_inner(struct ethhdr *eth, struct iphdr *ip,
                                          const struct ovr_action *a)
{
    if (a->flags & OVR_F_SET_MAC)
        __builtin_memcpy(eth, a->mac, 12);
    if (a->flags & OVR_F_DEC_TTL) {
        // RFC 1624: the TTL is the high byte of its 16-bit word.
        __u16 old = *(__u16 *)&ip->ttl;
        ip->ttl -= 1;
        __u16 new = *(__u16 *)&ip->ttl;
        __u64 s = (__u16)~ip->check;
        s += (__u16)~old;
        s += new;
        ip->check = ~fold(s);
    }
}

static __always_inline void account(struct ovr_action *a, __u64 packets, __u64 bytes)
{
    __sync_fetch_and_add(&a->packets, packets);
    __sync_fetch_and_add(&a->bytes, bytes);
    a->last_seen = bpf_ktime_get_ns();
}

// The outer headers a flow's frames get (with push), or NULL (counted).
static __always_inline const struct ovr_tpl *template_of(const struct ovr_action *a)
{
    __u32 i = a->tpl;
    const struct ovr_tpl *t = bpf_map_lookup_elem(&ovr_tpls, &i);
    if (!t)
        count(OVR_C_TEMPLATE);
    return t;
}

// Puts the outer headers of a frame just made room for (`hdr`: OVR_VXLAN_HEAD bytes):
// the template's, the flow's UDP source port, and IPv4 total length and checksum and UDP
// length for a frame of out_len bytes.
static __always_inline void write_outer(__u8 *hdr, const struct ovr_tpl *t, __u16 sport,
                                        __u32 out_len)
{
    __builtin_memcpy(hdr, t->bytes, OVR_VXLAN_HEAD);
    struct iphdr *oip = (struct iphdr *)(hdr + 14);
    oip->tot_len = bpf_htons(out_len - 14);
    oip->check = 0;
    oip->check = ~ip_sum((const __u16 *)oip);
    *(__u16 *)(hdr + 34) = sport;
    *(__u16 *)(hdr + 38) = bpf_htons(out_len - 34);
}

// Counts a frame the fast path sends on (a hit; an error too if the redirect, whose
// result is `r`, did not give `ok`) and returns the hook's action.
static __always_inline long sent(long r, long ok)
{
    count(OVR_C_HIT);
    if (r != ok)
        count(OVR_C_REDIRECT_ERROR);
    return r;
}

// XDP: the fast path for a frame whose inner Ethernet header is at `off` (0 or 50).
// Returns an XDP action, or -1 to hand the frame to user space.
static __always_inline int xdp_fast(struct xdp_md *ctx, const struct ovr_iface *ifc,
                                    const int off)
{
    void *data = (void *)(long)ctx->data;
    void *end = (void *)(long)ctx->data_end;
    __u32 frame_len = end - data;
    struct ovr_parsed p = {};
    p.key.ifindex = ctx->ingress_ifindex;
    if (parse(data, end, frame_len, ifc, off, &p))
        return -1;
    if (data + off + 34 > end)
        return -1;
    // An outer UDP checksum is summed here (the frame is whole in one buffer); an
    // unfinished one (a local sender's, over a veth) looks wrong and goes to user space.
    if (p.udp_sum && !l4_csum_ok(data + 14, data + 34, end, frame_len - 34))
        return count(OVR_C_CHECKSUM), -1;
    struct ethhdr *eth = data + off;
    struct iphdr *ip = data + off + 14;
    __u8 *l4 = data + off + 34;
    struct ovr_action *a = find(&p);
    if (!a)
        return -1;
    // A UDP datagram without a checksum (0) is complete; a partial checksum never is 0.
    int no_csum = ip->protocol == IPPROTO_UDP && l4 + 8 <= (__u8 *)end &&
                  *(__u16 *)(l4 + 6) == 0;
    if ((a->flags & OVR_F_CHECK_L4) && !no_csum && !l4_csum_ok(ip, l4, end, p.l4_len))
        return count(OVR_C_CHECKSUM), -1;
    __u32 strip = a->strip == OVR_VXLAN_HEAD ? OVR_VXLAN_HEAD : 0;
    __u32 push = a->push == OVR_VXLAN_HEAD ? OVR_VXLAN_HEAD : 0;
    if (strip != off || frame_len - strip + push > a->max_len)
        return count(OVR_C_MTU), -1;
    __u32 egress = a->egress;
    if (!bpf_map_lookup_elem(&ovr_tx, &egress))
        return count(OVR_C_NO_EGRESS), -1;
    const struct ovr_tpl *t = (void *)0;
    if (push && !(t = template_of(a)))
        return -1;

    // Decided: from here on the frame is changed and leaves by the egress.
    rewrite_inner(eth, ip, a);
    account(a, 1, frame_len);
    if (bpf_xdp_adjust_head(ctx, (int)strip - (int)push))
        return count(OVR_C_REDIRECT_ERROR), XDP_DROP;
    if (t) {
        data = (void *)(long)ctx->data;
        end = (void *)(long)ctx->data_end;
        if (data + OVR_VXLAN_HEAD > end)
            return count(OVR_C_REDIRECT_ERROR), XDP_DROP;
        write_outer(data, t, a->sport, end - data);
    }
    return sent(bpf_redirect_map(&ovr_tx, egress, 0), XDP_REDIRECT);
}

SEC("xdp.frags")
int ovr_xdp(struct xdp_md *ctx)
{
    __u32 ifindex = ctx->ingress_ifindex;
    struct ovr_iface *ifc = bpf_map_lookup_elem(&ovr_ifaces, &ifindex);
    if (!ifc)
        return XDP_PASS;
    if (bpf_xdp_get_buff_len(ctx) != ctx->data_end - ctx->data) {
        count(OVR_C_MULTI_BUFFER);
    } else {
        int r = -1;
        if (ifc->kind == OVR_KIND_WORKLOAD)
            r = xdp_fast(ctx, ifc, 0);
        else if (ifc->kind == OVR_KIND_UNDERLAY)
            r = xdp_fast(ctx, ifc, OVR_VXLAN_HEAD);
        if (r >= 0)
            return r;
    }
    if (ifc->xsk_base == OVR_NO_XSK)
        return XDP_PASS;
    return bpf_redirect_map(&ovr_xsks, ifc->xsk_base + ctx->rx_queue_index, XDP_PASS);
}

// TC (cls_bpf on ingress, attached with TCX): the fast path for a packet whose inner
// Ethernet header is at `off` (0 or 50). Returns a TC action, or -1 to hand the packet
// on (to ovrd's AF_PACKET socket, which the kernel serves after TC, ovr_io::af_packet).
//
// The skb keeps what the kernel knows of it, so TC forwards what XDP cannot: a large
// (GSO) packet crosses whole and is cut where a device needs it (the MTU is checked on
// its segments), and a transport checksum its sender left to the NIC stays so, to be
// finished by the kernel as for any packet it forwards. Hence no checksum check here:
// user space does not verify transport checksums either, it only finishes unfinished
// ones, which XDP cannot tell from wrong ones.
static __always_inline int tc_fast(struct __sk_buff *skb, const struct ovr_iface *ifc,
                                   const int off)
{
    __u32 frame_len = skb->len;
    // The headers (up to a TCP header with options) linear and writable.
    __u32 head = off + 34 + 60;
    if (head > frame_len)
        head = frame_len;
    if (bpf_skb_pull_data(skb, head))
        return count(OVR_C_UNPARSED), -1;
    void *data = (void *)(long)skb->data;
    void *end = (void *)(long)skb->data_end;
    struct ovr_parsed p = {};
    p.key.ifindex = skb->ingress_ifindex;
    if (parse(data, end, frame_len, ifc, off, &p))
        return -1;
    // An outer UDP checksum (the kernel's VXLAN sends one by default) is taken when the
    // kernel has verified it (CHECKSUM_UNNECESSARY: the NIC did), else summed here over
    // the whole frame, pulled in, unless it is a large packet (those go to user space).
    // Decapsulating resets the skb's checksum state, so whoever receives the inner
    // packet still verifies its own checksum.
    if (p.udp_sum && bpf_csum_level(skb, BPF_CSUM_LEVEL_QUERY) < 0) {
        if (skb->gso_size)
            return count(OVR_C_UNPARSED), -1;
        if (bpf_skb_pull_data(skb, frame_len))
            return count(OVR_C_UNPARSED), -1;
        data = (void *)(long)skb->data;
        end = (void *)(long)skb->data_end;
        if (data + 34 > end)
            return -1;
        if (!l4_csum_ok(data + 14, data + 34, end, frame_len - 34))
            return count(OVR_C_CHECKSUM), -1;
    }
    if (data + off + 34 > end)
        return -1;
    struct ethhdr *eth = data + off;
    // Large packets of TCP only: one decapsulated here keeps its tunnel marks (below),
    // harmless where the kernel cuts TCP again, not for UDP (it would be cut as a tunnel).
    if (skb->gso_size && p.key.proto != IPPROTO_TCP)
        return count(OVR_C_UNPARSED), -1;
    struct ovr_action *a = find(&p);
    if (!a)
        return -1;
    __u32 strip = a->strip == OVR_VXLAN_HEAD ? OVR_VXLAN_HEAD : 0;
    __u32 push = a->push == OVR_VXLAN_HEAD ? OVR_VXLAN_HEAD : 0;
    // A large packet leaves as segments of gso_size payload bytes behind its headers;
    // encapsulated whole, its outer IPv4 length must still fit 16 bits.
    __u32 hdrs = off + 34 + p.l4_hdr;
    __u32 seg_len = skb->gso_size ? hdrs + skb->gso_size : frame_len;
    if (strip != off || seg_len - strip + push > a->max_len ||
        frame_len - strip + push - 14 > 0xffff)
        return count(OVR_C_MTU), -1;
    __u32 egress = a->egress;
    if (!bpf_map_lookup_elem(&ovr_ifaces, &egress))
        return count(OVR_C_NO_EGRESS), -1;
    const struct ovr_tpl *t = (void *)0;
    if (push && !(t = template_of(a)))
        return -1;

    // Room is made or taken right after the outer MAC header, so the inner Ethernet
    // header is saved first and written back where it belongs. If the kernel refuses
    // (the packet is then unchanged), the packet goes on to user space.
    struct ethhdr inner;
    __builtin_memcpy(&inner, eth, 14);
    __u32 segs = skb->gso_segs > 1 ? skb->gso_segs : 1;
    if (push) {
        __u64 flags = BPF_F_ADJ_ROOM_FIXED_GSO | BPF_F_ADJ_ROOM_ENCAP_L3_IPV4 |
                      BPF_F_ADJ_ROOM_ENCAP_L4_UDP | BPF_F_ADJ_ROOM_ENCAP_L2_ETH |
                      BPF_F_ADJ_ROOM_ENCAP_L2(14);
        if (bpf_skb_adjust_room(skb, OVR_VXLAN_HEAD, BPF_ADJ_ROOM_MAC, flags))
            return count(OVR_C_ROOM), -1;
    } else if (strip) {
        // A large packet's tunnel marks (gso_type, encapsulation) are cleared with
        // DECAP_L4_UDP where the kernel has it; before (Linux 6.18 and older) they stay,
        // which a local stack ignores (docs/io.md, "Not yet").
        long r = -1;
        if (skb->gso_size)
            r = bpf_skb_adjust_room(skb, -OVR_VXLAN_HEAD, BPF_ADJ_ROOM_MAC,
                                    BPF_F_ADJ_ROOM_FIXED_GSO | OVR_ADJ_ROOM_DECAP_L4_UDP);
        if (r)
            r = bpf_skb_adjust_room(skb, -OVR_VXLAN_HEAD, BPF_ADJ_ROOM_MAC,
                                    BPF_F_ADJ_ROOM_FIXED_GSO);
        if (r)
            return count(OVR_C_ROOM), -1;
    }

    // Decided: from here on the packet is changed and leaves by the egress.
    data = (void *)(long)skb->data;
    end = (void *)(long)skb->data_end;
    if (t) {
        if (data + OVR_VXLAN_HEAD + 34 > end)
            return count(OVR_C_REDIRECT_ERROR), TC_ACT_SHOT;
        write_outer(data, t, a->sport, skb->len);
        __builtin_memcpy(data + OVR_VXLAN_HEAD, &inner, 14);
        rewrite_inner(data + OVR_VXLAN_HEAD, data + OVR_VXLAN_HEAD + 14, a);
    } else {
        if (data + 34 > end)
            return count(OVR_C_REDIRECT_ERROR), TC_ACT_SHOT;
        if (strip)
            __builtin_memcpy(data, &inner, 14);
        rewrite_inner(data, data + 14, a);
    }
    // Bytes as its segments would have arrived one by one (as user space counts).
    account(a, segs, frame_len + (segs - 1) * hdrs);
    return sent(bpf_redirect(egress, 0), TC_ACT_REDIRECT);
}

// "classifier": the section name aya 0.14 knows a TC program by.
SEC("classifier")
int ovr_tc(struct __sk_buff *skb)
{
    __u32 ifindex = skb->ingress_ifindex;
    struct ovr_iface *ifc = bpf_map_lookup_elem(&ovr_ifaces, &ifindex);
    if (!ifc)
        return TC_ACT_OK;
    // A VLAN tag taken off into the skb's metadata is not in the frame: user space.
    if (skb->vlan_present || skb->protocol != bpf_htons(ETH_P_IP)) {
        count(OVR_C_UNPARSED);
        return TC_ACT_OK;
    }
    int r = -1;
    if (ifc->kind == OVR_KIND_WORKLOAD)
        r = tc_fast(skb, ifc, 0);
    else if (ifc->kind == OVR_KIND_UNDERLAY)
        r = tc_fast(skb, ifc, OVR_VXLAN_HEAD);
    return r >= 0 ? r : TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
