// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//
// A packet-rate policer in the kernel, in front of ovr's socket: a frame over an
// interface's rate is dropped before ovr's worker reads it (which would cost about as
// much as forwarding it), and counted here for ovr to report as `policed`.
//
// The bucket is kept as GCRA (the "virtual scheduling" form of a token bucket, ITU-T
// I.371): one theoretical arrival time, so that a compare-and-swap updates it from any
// CPU without a lock. A frame at `now` passes if tat - now <= tolerance, and then moves
// tat on by one interval; `burst` frames may pass at once (tolerance = (burst - 1)
// intervals), then one per interval. The layouts are mirrored in src/police.rs.

#ifndef OVR_POLICE_H
#define OVR_POLICE_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// Written by ovr only. interval_ns 0: no policer.
struct ovr_police_conf {
    __u64 interval_ns;
    __u64 tolerance_ns;
};

// Written by the program only.
struct ovr_police_state {
    __u64 tat;
    __u64 dropped;
    __u64 dropped_bytes;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct ovr_police_conf);
} ovr_police_conf SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct ovr_police_state);
} ovr_police_state SEC(".maps");

// Whether a frame of `len` bytes arriving now is within the rate (counted if not).
static __always_inline int ovr_police_pass(__u32 len)
{
    __u32 zero = 0;
    struct ovr_police_conf *c = bpf_map_lookup_elem(&ovr_police_conf, &zero);
    struct ovr_police_state *s = bpf_map_lookup_elem(&ovr_police_state, &zero);
    if (!c || !s)
        return 1;
    __u64 interval = c->interval_ns, tolerance = c->tolerance_ns;
    if (interval == 0)
        return 1;
    __u64 now = bpf_ktime_get_ns();
    // Another CPU moving tat between the read and the swap makes this one try again;
    // after a few tries (a storm on every CPU at once) the frame passes, so that the
    // error is a few frames over the rate, never a stall.
    for (int i = 0; i < 4; i++) {
        __u64 tat = *(volatile __u64 *)&s->tat;
        __u64 t = tat > now ? tat : now;
        if (t - now > tolerance) {
            __sync_fetch_and_add(&s->dropped, 1);
            __sync_fetch_and_add(&s->dropped_bytes, len);
            return 0;
        }
        if (__sync_val_compare_and_swap(&s->tat, tat, t + interval) == tat)
            return 1;
    }
    return 1;
}

#endif
