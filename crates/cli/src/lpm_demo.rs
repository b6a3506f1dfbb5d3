//! `ovrctl lpm-demo`: builds an IPv4 FIB of random BGP-like prefixes and times lookups,
//! so that anyone can see the table's speed on their machine in one command.

use ovr_tables::ids::NextHopId;
use ovr_tables::lpm4::Lpm4;
use ovr_tables::synthetic::{Rng, ipv4_prefixes};
use std::time::Instant;

pub fn run(prefixes: usize, lookups: usize, json: bool) -> Result<(), String> {
    let routes = ipv4_prefixes(prefixes, 7);
    let mut fib = Lpm4::new();
    let start = Instant::now();
    for (i, (p, l)) in routes.iter().enumerate() {
        fib.insert(*p, *l, NextHopId(i as u32 % 4096))
            .map_err(|e| e.to_string())?;
    }
    let built = start.elapsed().as_secs_f64();
    if !json {
        outln!(
            "built an IPv4 FIB of {} BGP-like prefixes in {built:.2} s ({:.1}M inserts/s), {} second-level groups, {} MiB",
            fib.len(),
            fib.len() as f64 / built / 1e6,
            fib.groups_in_use(),
            fib.memory_bytes() >> 20
        );
    }

    const BATCH: usize = 64;
    let mut rng = Rng::new(11);
    // More addresses than any cache holds, so that lookups really miss (a small set
    // repeated would measure the cache).
    let addrs: Vec<u32> = (0..lookups.min(1 << 24)).map(|_| rng.next_u32()).collect();
    let mut out = [None; BATCH];
    let (mut hits, mut done) = (0usize, 0usize);
    let start = Instant::now();
    while done < lookups {
        let at = done % addrs.len();
        let chunk = &addrs[at..(at + BATCH).min(addrs.len())];
        fib.lookup_batch(chunk, &mut out[..chunk.len()]);
        hits += out[..chunk.len()].iter().filter(|o| o.is_some()).count();
        done += chunk.len();
    }
    let t = start.elapsed().as_secs_f64();
    if json {
        let v = serde_json::json!({
            "prefixes": fib.len(),
            "build_seconds": built,
            "inserts_per_sec": fib.len() as f64 / built,
            "groups": fib.groups_in_use(),
            "memory_bytes": fib.memory_bytes(),
            "lookups": done,
            "batch": BATCH,
            "ns_per_lookup": t * 1e9 / done as f64,
            "lookups_per_sec": done as f64 / t,
            "matched": hits,
        });
        outln!("{v}");
        return Ok(());
    }
    outln!(
        "{done} random lookups in batches of {BATCH}: {:.1} ns per lookup ({:.1}M lookups/s), {:.0}% matched a route",
        t * 1e9 / done as f64,
        done as f64 / t / 1e6,
        100.0 * hits as f64 / done as f64
    );
    Ok(())
}
