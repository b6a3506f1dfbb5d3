//! IPv6 longest-prefix match: one hash table per prefix length, and for every /20 a
//! bitmap of the prefix lengths that can match inside it.
//!
//! A lookup reads the bitmap of its address's /20 (one access), then probes only the
//! lengths set there, longest first; the first hit is the longest match. In a BGP-like
//! table a /20 holds a handful of lengths, not the ~30 of the whole table, and an address
//! under no route costs the one bitmap read.
//!
//! Why this shape for now: it holds 500K prefixes in tens of MiB (a DIR-24-8-style
//! expansion with 8-bit strides needs several 1 KiB groups per /48: gigabytes), inserts
//! and removes cost O(1) plus, for prefixes shorter than /20, one bit per /20 they cover,
//! and it is easy to show correct. A compressed multibit trie (tree bitmap, poptrie) is
//! the next step if lookups must get faster still; see bench/RESULTS.md.

use crate::fasthash::FastMap;
use crate::ids::NextHopId;
use crate::lpm4::{LpmError, check_route};
use crate::prefetch::prefetch;
use core::net::Ipv6Addr;

type Table = FastMap<u128, NextHopId>;

#[inline]
fn mask(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

/// Bits of the address that index the length bitmaps.
const SLOT_BITS: u8 = 20;

#[inline]
fn slot(addr: u128) -> usize {
    (addr >> (128 - u32::from(SLOT_BITS))) as usize
}

/// An IPv6 FIB.
#[derive(Clone)]
pub struct Lpm6 {
    /// by_len[l]: prefixes of length l (1..=128).
    by_len: Vec<Table>,
    /// For each /20: bit l-1 set when a prefix of length l may match inside it.
    /// Allocated zeroed (calloc): only the /20s with routes take memory.
    lengths: Vec<u128>,
    /// For lengths ≥ 20: how many prefixes of that length lie in each /20, so that a
    /// remove knows when to clear the bit. (Shorter prefixes of one length never overlap,
    /// so they need no count.)
    in_slot: FastMap<(u32, u8), u32>,
    default: Option<NextHopId>,
    count: usize,
}

impl Default for Lpm6 {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Lpm6 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lpm6")
            .field("prefixes", &self.len())
            .field("lengths", &self.lengths)
            .finish()
    }
}

impl Lpm6 {
    pub fn new() -> Self {
        Self {
            by_len: (0..=128).map(|_| Table::default()).collect(),
            lengths: vec![0; 1 << SLOT_BITS],
            in_slot: FastMap::default(),
            default: None,
            count: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.count + usize::from(self.default.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Approximate heap bytes of the hash tables.
    pub fn memory_bytes(&self) -> usize {
        self.by_len
            .iter()
            .map(|t| t.capacity() * (16 + 4 + 1))
            .sum()
    }

    pub fn exact(&self, prefix: Ipv6Addr, len: u8) -> Option<NextHopId> {
        if len == 0 {
            return self.default;
        }
        self.by_len
            .get(usize::from(len))?
            .get(&u128::from(prefix))
            .copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Ipv6Addr, u8, NextHopId)> + '_ {
        let d = self.default.map(|nh| (Ipv6Addr::UNSPECIFIED, 0, nh));
        d.into_iter()
            .chain(self.by_len.iter().enumerate().flat_map(|(l, t)| {
                t.iter()
                    .map(move |(p, nh)| (Ipv6Addr::from(*p), l as u8, *nh))
            }))
    }

    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<NextHopId> {
        self.lookup_in(addr, self.lengths[slot(addr)])
    }

    #[inline]
    fn lookup_in(&self, addr: u128, mut bits: u128) -> Option<NextHopId> {
        while bits != 0 {
            let l = (128 - bits.leading_zeros()) as u8;
            if let Some(nh) = self.by_len[usize::from(l)].get(&(addr & mask(l))) {
                return Some(*nh);
            }
            bits &= !(1u128 << (l - 1));
        }
        self.default
    }

    /// Looks up every address of `addrs` into `out`, prefetching the length bitmaps of
    /// the whole batch first so that those misses overlap. (The hash tables give no handle
    /// to prefetch their buckets.)
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<NextHopId>]) {
        for a in addrs {
            prefetch(&self.lengths[slot(*a)]);
        }
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup_in(*a, self.lengths[slot(*a)]);
        }
    }

    /// Marks (or, on removal, unmarks) length `len` in the /20s that `p` covers.
    fn mark(&mut self, p: u128, len: u8, add: bool) {
        let bit = 1u128 << (len - 1);
        if len >= SLOT_BITS {
            let s = slot(p);
            let n = self.in_slot.entry((s as u32, len)).or_default();
            if add {
                *n += 1;
            } else {
                *n = n.saturating_sub(1);
            }
            if *n == 0 {
                self.in_slot.remove(&(s as u32, len));
                self.lengths[s] &= !bit;
            } else {
                self.lengths[s] |= bit;
            }
        } else {
            let first = slot(p);
            for b in &mut self.lengths[first..first + (1 << (SLOT_BITS - len))] {
                if add {
                    *b |= bit;
                } else {
                    *b &= !bit;
                }
            }
        }
    }

    /// Adds or replaces `prefix/len`, returning the next hop it replaced.
    pub fn insert(
        &mut self,
        prefix: Ipv6Addr,
        len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, LpmError> {
        let p = u128::from(prefix);
        check_route(len, 128, || p & !mask(len) != 0, nh)?;
        if len == 0 {
            return Ok(self.default.replace(nh));
        }
        let old = self.by_len[usize::from(len)].insert(p, nh);
        if old.is_none() {
            self.count += 1;
            self.mark(p, len, true);
        }
        Ok(old)
    }

    pub fn remove(&mut self, prefix: Ipv6Addr, len: u8) -> Option<NextHopId> {
        if len == 0 {
            return self.default.take();
        }
        let p = u128::from(prefix);
        let old = self.by_len.get_mut(usize::from(len))?.remove(&p)?;
        self.count -= 1;
        self.mark(p, len, false);
        Some(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn a(s: &str) -> u128 {
        u128::from(s.parse::<Ipv6Addr>().unwrap())
    }

    #[test]
    fn longest_match_and_remove() {
        let mut t = Lpm6::new();
        t.insert(Ipv6Addr::UNSPECIFIED, 0, NextHopId(1)).unwrap();
        t.insert("2001:db8::".parse().unwrap(), 32, NextHopId(2))
            .unwrap();
        t.insert("2001:db8:1::".parse().unwrap(), 48, NextHopId(3))
            .unwrap();
        t.insert("2001:db8:1::1".parse().unwrap(), 128, NextHopId(4))
            .unwrap();
        assert_eq!(t.lookup(a("2001:db8:1::1")), Some(NextHopId(4)));
        assert_eq!(t.lookup(a("2001:db8:1::2")), Some(NextHopId(3)));
        assert_eq!(t.lookup(a("2001:db8:2::2")), Some(NextHopId(2)));
        assert_eq!(t.lookup(a("3000::")), Some(NextHopId(1)));
        assert_eq!(
            t.remove("2001:db8:1::".parse().unwrap(), 48),
            Some(NextHopId(3))
        );
        assert_eq!(t.lookup(a("2001:db8:1::2")), Some(NextHopId(2)));
        assert_eq!(
            t.insert("2001:db8::1".parse().unwrap(), 32, NextHopId(1)),
            Err(LpmError::HostBits)
        );
        assert_eq!(
            t.insert("2001:db8::".parse().unwrap(), 129, NextHopId(1)),
            Err(LpmError::BadLength(129))
        );
        assert_eq!(t.len(), 3);
    }

    fn oracle(m: &HashMap<(u128, u8), u32>, addr: u128) -> Option<NextHopId> {
        m.iter()
            .filter(|((p, l), _)| addr & mask(*l) == *p)
            .max_by_key(|((_, l), _)| *l)
            .map(|(_, n)| NextHopId(*n))
    }

    proptest! {
        #[test]
        fn agrees_with_a_linear_scan(ops in proptest::collection::vec((any::<bool>(), 0u128..64, 0u8..=128, 0u32..50), 1..60),
                                     probes in proptest::collection::vec(any::<u128>(), 16)) {
            let mut t = Lpm6::new();
            let mut m = HashMap::new();
            let mut interesting = probes;
            for (add, jitter, len, nh) in ops {
                let p = ((0x2001_0db8u128 << 96) ^ (jitter << 70) ^ (jitter << 120)) & mask(len);
                if add {
                    prop_assert_eq!(t.insert(p.into(), len, NextHopId(nh)).unwrap().map(|n| n.0), m.insert((p, len), nh));
                    interesting.extend([p, p | !mask(len), p.wrapping_sub(1)]);
                } else {
                    prop_assert_eq!(t.remove(p.into(), len).map(|n| n.0), m.remove(&(p, len)));
                }
            }
            let mut out = vec![None; interesting.len()];
            t.lookup_batch(&interesting, &mut out);
            for (x, o) in interesting.iter().zip(out) {
                prop_assert_eq!(o, oracle(&m, *x));
            }
            prop_assert_eq!(t.len(), m.len());
        }
    }
}
