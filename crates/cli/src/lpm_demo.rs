//! `ovrctl lpm-demo`: builds an IPv4 FIB of random BGP-like prefixes and times lookups,
//! so that anyone can see the table's speed on their machine in one command.

use ovr_tables::ids::NextHopId;
use ovr_tables::lpm4::Lpm4;
use std::time::Instant;

/// xorshift64*: a fixed-seed generator, so that every run builds the same table.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A length drawn from a BGP-table-like mix: about 60% /24, 30% /16-/23, 7% /8-/15,
/// 3% /25-/32.
fn bgp_like_len(r: u64) -> u8 {
    match r % 100 {
        0..60 => 24,
        60..90 => 16 + (r / 100 % 8) as u8,
        90..97 => 8 + (r / 100 % 8) as u8,
        _ => 25 + (r / 100 % 8) as u8,
    }
}

pub fn run(prefixes: usize, lookups: usize) -> Result<(), String> {
    let mut rng = Rng(0x6f76_7221);
    let mut fib = Lpm4::new();
    let start = Instant::now();
    let mut installed = 0usize;
    while installed < prefixes {
        let len = bgp_like_len(rng.next());
        let addr = (rng.next() as u32) & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        let nh = NextHopId((rng.next() % 4096) as u32);
        if fib
            .insert(addr.into(), len, nh)
            .map_err(|e| e.to_string())?
            .is_none()
        {
            installed += 1;
        }
    }
    let built = start.elapsed();
    println!(
        "built an IPv4 FIB of {} prefixes in {:.2} s ({:.0}K inserts/s)",
        fib.len(),
        built.as_secs_f64(),
        fib.len() as f64 / built.as_secs_f64() / 1e3
    );

    const BATCH: usize = 64;
    let addrs: Vec<u32> = (0..1 << 16).map(|_| rng.next() as u32).collect();
    let mut out = [None; BATCH];
    let mut hits = 0usize;
    let start = Instant::now();
    let mut done = 0usize;
    while done < lookups {
        let at = done % addrs.len();
        let chunk = &addrs[at..(at + BATCH).min(addrs.len())];
        fib.lookup_batch(chunk, &mut out[..chunk.len()]);
        hits += out[..chunk.len()].iter().filter(|o| o.is_some()).count();
        done += chunk.len();
    }
    let t = start.elapsed();
    println!(
        "{} lookups in batches of {BATCH}: {:.1} ns per lookup ({:.1} M lookups/s), {:.0}% matched a route",
        done,
        t.as_nanos() as f64 / done as f64,
        done as f64 / t.as_secs_f64() / 1e6,
        100.0 * hits as f64 / done as f64
    );
    Ok(())
}
