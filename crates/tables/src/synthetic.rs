//! Deterministic synthetic tables for benchmarks and demos: BGP-like prefix sets and
//! flow keys, from a fixed-seed generator so that every run measures the same table.

use crate::flow::FlowKey;
use crate::ids::VrfId;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// xorshift64* (Vigna, 2016): small, fast and good enough for test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, (self.next_u64() % (i as u64 + 1)) as usize);
        }
    }
}

/// An IPv4 prefix length from a BGP-table-like mix: about 60% /24, 30% /16-/23,
/// 7% /8-/15, 3% /25-/32.
pub fn bgp_like_len_v4(r: &mut Rng) -> u8 {
    let x = r.next_u64();
    let pick = (x >> 8) as u8 % 8;
    match x % 100 {
        0..60 => 24,
        60..90 => 16 + pick,
        90..97 => 8 + pick,
        _ => 25 + pick,
    }
}

/// `n` distinct IPv4 prefixes (address, length), host bits clear.
pub fn ipv4_prefixes(n: usize, seed: u64) -> Vec<(Ipv4Addr, u8)> {
    let mut r = Rng::new(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let len = bgp_like_len_v4(&mut r);
        let a = r.next_u32() & u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
        if seen.insert((a, len)) {
            out.push((Ipv4Addr::from(a), len));
        }
    }
    out
}

/// `n` distinct IPv6 prefixes shaped like the IPv6 BGP table: mostly /48 and /32-/44
/// under a few thousand /20-/32 allocations, some /56 and /64, a few /128.
pub fn ipv6_prefixes(n: usize, seed: u64) -> Vec<(Ipv6Addr, u8)> {
    let mut r = Rng::new(seed);
    let allocations: Vec<u128> = (0..4096)
        .map(|_| {
            (0x2000u128 | (r.next_u64() as u128 & 0x1fff)) << 112 | (r.next_u64() as u128) << 64
        })
        .collect();
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let x = r.next_u64();
        let len: u8 = match x % 100 {
            0..50 => 48,
            50..75 => 32 + ((x >> 8) % 13) as u8,
            75..85 => 20 + ((x >> 8) % 12) as u8,
            85..93 => 56,
            93..99 => 64,
            _ => 128,
        };
        let base = allocations[(x >> 20) as usize % allocations.len()];
        let a = (base ^ (u128::from(r.next_u64()) << 40) ^ u128::from(r.next_u64()))
            & u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
        if seen.insert((a, len)) {
            out.push((Ipv6Addr::from(a), len));
        }
    }
    out
}

/// `n` distinct IPv4 UDP flow keys spread over 16 VRFs.
pub fn flow_keys(n: usize, seed: u64) -> Vec<FlowKey> {
    let mut r = Rng::new(seed);
    (0..n as u32)
        .map(|i| {
            let x = r.next_u64();
            FlowKey::new(
                VrfId(i % 16),
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | (i & 0x00ff_ffff))),
                IpAddr::V4(Ipv4Addr::from(x as u32)),
                17,
                (x >> 32) as u16 | 1024,
                (i >> 24) as u16 + 4789,
            )
        })
        .collect()
}
