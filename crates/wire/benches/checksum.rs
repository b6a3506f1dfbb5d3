//! The Internet checksum over what ovr sums per packet when it cuts offloaded TCP: one
//! segment's payload (1448 bytes, odd-aligned too), a 64-byte header run, and a whole
//! 64 KB frame.
//!
//! `cargo bench -p ovr-wire --bench checksum`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ovr_wire::checksum::accumulate;
use std::hint::black_box;

fn sums(c: &mut Criterion) {
    let data: Vec<u8> = (0..65536u32 + 1)
        .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    let mut g = c.benchmark_group("checksum");
    for (name, range) in [
        ("64B", 0..64),
        ("1448B", 0..1448),
        ("1448B_odd_start", 1..1449),
        ("64KB", 0..65536),
    ] {
        g.throughput(Throughput::Bytes(range.len() as u64));
        g.bench_function(name, |b| {
            b.iter(|| accumulate(0, black_box(&data[range.clone()])))
        });
    }
    g.finish();
}

criterion_group!(benches, sums);
criterion_main!(benches);
