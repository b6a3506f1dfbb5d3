//! Flow-table lookups at 1K, 64K, 256K and 1M flows (single and in batches of 64, in
//! random order), misses, and the insert rate into an empty 1M table.
//!
//! `cargo bench -p ovr-tables --bench flow`

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ovr_tables::flow::{FlowAction, FlowKey, FlowTable};
use ovr_tables::ids::NextHopId;
use ovr_tables::synthetic::{Rng, flow_keys};
use std::hint::black_box;

const BATCH: usize = 64;
const ACTION: FlowAction = FlowAction::Forward {
    next_hop: NextHopId(1),
};

fn lookups(c: &mut Criterion) {
    let all = flow_keys(1 << 20, 1);
    for n in [1 << 10, 1 << 16, 1 << 18, 1 << 20] {
        let mut t = FlowTable::new(n);
        for k in &all[..n] {
            t.insert(*k, ACTION, 0).unwrap();
        }
        // Probe in random order: 4M draws from the installed keys.
        let mut r = Rng::new(2);
        let probes: Vec<FlowKey> = (0..1 << 22)
            .map(|_| all[r.next_u64() as usize % n])
            .collect();
        let misses = flow_keys(1 << 16, 99);
        let mut g = c.benchmark_group(format!("flow_{}K", n >> 10));
        g.throughput(Throughput::Elements(1));
        let mut i = 0;
        g.bench_function("lookup", |b| {
            b.iter(|| {
                i = (i + 1) & (probes.len() - 1);
                black_box(t.lookup(&probes[i]))
            })
        });
        g.throughput(Throughput::Elements(BATCH as u64));
        let mut out = [None; BATCH];
        let mut at = 0;
        g.bench_function("lookup_batch64", |b| {
            b.iter(|| {
                at = (at + BATCH) & (probes.len() - 1);
                t.lookup_batch(&probes[at..at + BATCH], &mut out);
                black_box(&out);
            })
        });
        let mut at = 0;
        g.bench_function("miss_batch64", |b| {
            b.iter(|| {
                at = (at + BATCH) & (misses.len() - 1);
                t.lookup_batch(&misses[at..at + BATCH], &mut out);
                black_box(&out);
            })
        });
        g.finish();
    }
}

fn inserts(c: &mut Criterion) {
    let keys = flow_keys(1 << 20, 4);
    let mut g = c.benchmark_group("flow_insert");
    g.sample_size(10);
    g.throughput(Throughput::Elements(keys.len() as u64));
    g.bench_function("fill_1M", |b| {
        b.iter_batched(
            || FlowTable::new(1 << 20),
            |mut t| {
                for k in &keys {
                    t.insert(*k, ACTION, 0).unwrap();
                }
                t
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, lookups, inserts);
criterion_main!(benches);
