//! LPM lookups: IPv4 with 1M BGP-like prefixes, IPv6 with 200K and 500K; single and in
//! batches of 64 over more random addresses than any cache holds; and raw update cost.
//!
//! `cargo bench -p ovr-tables --bench lpm`

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main,
};
use ovr_tables::ids::NextHopId;
use ovr_tables::lpm4::Lpm4;
use ovr_tables::lpm6::Lpm6;
use ovr_tables::synthetic::{Rng, ipv4_prefixes, ipv6_prefixes};
use std::hint::black_box;
use std::time::Instant;

const BATCH: usize = 64;
const ADDRS: usize = 1 << 22;

/// Single lookups, then batches of 64, walking `addrs` (more than any cache holds).
fn lookups<A: Copy>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    addrs: &[A],
    single: impl Fn(A) -> Option<NextHopId>,
    batch: impl Fn(&[A], &mut [Option<NextHopId>]),
) {
    g.throughput(Throughput::Elements(1));
    let mut i = 0;
    g.bench_function("lookup", |b| {
        b.iter(|| {
            i = (i + 1) % addrs.len();
            black_box(single(addrs[i]))
        })
    });
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut out = [None; BATCH];
    let mut at = 0;
    g.bench_function("lookup_batch64", |b| {
        b.iter(|| {
            at = (at + BATCH) % (addrs.len() - BATCH);
            batch(&addrs[at..at + BATCH], &mut out);
            black_box(&out);
        })
    });
}

fn ipv4(c: &mut Criterion) {
    let routes = ipv4_prefixes(1_000_000, 7);
    let mut t = Lpm4::new();
    let start = Instant::now();
    for (i, (p, l)) in routes.iter().enumerate() {
        t.insert(*p, *l, NextHopId(i as u32 % 4096)).unwrap();
    }
    eprintln!(
        "lpm4: 1M prefixes built in {:.2} s, {} groups, {} MiB",
        start.elapsed().as_secs_f64(),
        t.groups_in_use(),
        t.memory_bytes() >> 20
    );
    let mut r = Rng::new(3);
    let addrs: Vec<u32> = (0..ADDRS).map(|_| r.next_u32()).collect();
    let mut g = c.benchmark_group("lpm4_1M");
    lookups(&mut g, &addrs, |a| t.lookup(a), |a, o| t.lookup_batch(a, o));
    // An insert and a remove of a /24 not in the table: what one route update costs.
    g.throughput(Throughput::Elements(2));
    let mut k = 0u32;
    g.bench_function("insert_remove_24", |b| {
        b.iter(|| {
            k = k.wrapping_add(0x9e37_79b9);
            let p = (k & 0xffff_ff00).into();
            if t.insert(p, 24, NextHopId(1)).unwrap().is_none() {
                t.remove(p, 24);
            }
        })
    });
    g.finish();
}

fn ipv6(c: &mut Criterion) {
    ipv6_at(c, 200_000, "lpm6_200K");
    ipv6_at(c, 500_000, "lpm6_500K");
}

fn ipv6_at(c: &mut Criterion, n: usize, name: &str) {
    let routes = ipv6_prefixes(n, 9);
    let mut t = Lpm6::new();
    let start = Instant::now();
    for (i, (p, l)) in routes.iter().enumerate() {
        t.insert(*p, *l, NextHopId(i as u32 % 4096)).unwrap();
    }
    let took = start.elapsed().as_secs_f64();
    eprintln!(
        "{name}: built in {took:.2} s ({:.2} M inserts/s), ~{} MiB",
        n as f64 / took / 1e6,
        t.memory_bytes() >> 20
    );
    // Half the addresses inside routed prefixes, half random (mostly unrouted).
    let mut r = Rng::new(5);
    let addrs: Vec<u128> = (0..ADDRS)
        .map(|i| {
            let noise = (u128::from(r.next_u64()) << 64) | u128::from(r.next_u64());
            if i % 2 == 0 {
                let (p, l) = routes[r.next_u64() as usize % routes.len()];
                u128::from(p) | (noise & !(u128::MAX.checked_shl(128 - u32::from(l)).unwrap_or(0)))
            } else {
                noise
            }
        })
        .collect();
    let mut g = c.benchmark_group(name);
    lookups(&mut g, &addrs, |a| t.lookup(a), |a, o| t.lookup_batch(a, o));
    // An insert and a remove of a /48 not in the table, under the /24 of a routed prefix:
    // what one route update costs.
    g.throughput(Throughput::Elements(2));
    let mut k = 0u64;
    g.bench_function("insert_remove_48", |b| {
        b.iter(|| {
            k = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let base = u128::from(routes[(k >> 40) as usize % routes.len()].0);
            let p = ((base >> 104) << 104 | u128::from(k & 0xff_ffff) << 80).into();
            if t.insert(p, 48, NextHopId(1)).unwrap().is_none() {
                t.remove(p, 48);
            }
        })
    });
    g.finish();
}

fn build(c: &mut Criterion) {
    let routes = ipv4_prefixes(100_000, 13);
    let mut g = c.benchmark_group("lpm4_build");
    g.sample_size(10);
    g.throughput(Throughput::Elements(routes.len() as u64));
    g.bench_function("insert_100K", |b| {
        b.iter_batched(
            Lpm4::new,
            |mut t| {
                for (p, l) in &routes {
                    t.insert(*p, *l, NextHopId(1)).unwrap();
                }
                t
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, ipv4, ipv6, build);
criterion_main!(benches);
