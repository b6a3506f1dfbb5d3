//! IPv6 longest-prefix match: one hash table per prefix length present, probed from the
//! longest length down to the shortest; the first hit is the longest match.
//!
//! Why this shape for now: it holds 500K BGP-like prefixes in tens of MiB (a DIR-24-8-style
//! expansion with 8-bit strides needs several 1 KiB groups per /48 and runs to gigabytes),
//! inserts and removes are O(1), and it is obviously correct. Its cost is one probe per
//! distinct length present (about 20 in a BGP-like table) for an address that matches
//! nothing long. The next step, measured in bench/RESULTS.md, is binary search on lengths
//! with markers (Waldvogel et al., 1997) or a compressed multibit trie (tree bitmap).

use crate::fasthash::FastMap;
use crate::ids::NextHopId;
use crate::lpm4::{LpmError, MAX_NEXTHOP};
use crate::prefetch::prefetch;
use core::net::Ipv6Addr;

type Table = FastMap<u128, NextHopId>;

#[inline]
fn mask(len: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0)
}

/// An IPv6 FIB.
#[derive(Clone, Default)]
pub struct Lpm6 {
    /// by_len[l]: prefixes of length l (1..=128).
    by_len: Vec<Table>,
    /// Lengths that hold at least one prefix, longest first.
    lengths: Vec<u8>,
    default: Option<NextHopId>,
    count: usize,
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
            ..Default::default()
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
        for &l in &self.lengths {
            if let Some(nh) = self.by_len[usize::from(l)].get(&(addr & mask(l))) {
                return Some(*nh);
            }
        }
        self.default
    }

    /// Looks up every address of `addrs` into `out`. The hash tables give no handle to
    /// prefetch their buckets, so this prefetches the addresses only; see the module note.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<NextHopId>]) {
        for a in addrs.iter().step_by(4) {
            prefetch(a);
        }
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(*a);
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
        if len > 128 {
            return Err(LpmError::BadLength(len));
        }
        if p & !mask(len) != 0 {
            return Err(LpmError::HostBits);
        }
        if nh.0 > MAX_NEXTHOP {
            return Err(LpmError::NextHopOutOfRange(nh.0));
        }
        if len == 0 {
            return Ok(self.default.replace(nh));
        }
        let old = self.by_len[usize::from(len)].insert(p, nh);
        if old.is_none() {
            self.count += 1;
            if let Err(at) = self.lengths.binary_search_by(|l| len.cmp(l)) {
                self.lengths.insert(at, len);
            }
        }
        Ok(old)
    }

    pub fn remove(&mut self, prefix: Ipv6Addr, len: u8) -> Option<NextHopId> {
        if len == 0 {
            return self.default.take();
        }
        let t = self.by_len.get_mut(usize::from(len))?;
        let old = t.remove(&u128::from(prefix))?;
        self.count -= 1;
        if t.is_empty() {
            self.lengths.retain(|l| *l != len);
        }
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
