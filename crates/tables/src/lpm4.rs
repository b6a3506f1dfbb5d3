//! IPv4 longest-prefix match: DIR-24-8 (Gupta, Lin, McKeown, "Routing lookups in hardware
//! at memory access speeds", 1998; the layout of DPDK's rte_lpm).
//!
//! A first level of 2^24 entries indexed by the top 24 bits answers every prefix up to
//! /24 in one memory access; an entry may instead point to a group of 256 second-level
//! entries indexed by the last byte, for prefixes longer than /24 (two accesses).
//!
//! Each entry is 4 bytes: 0 = no route more specific than the table's /0 default;
//! otherwise bit 31 set = index of a second-level group, bit 31 clear = the depth (prefix
//! length, bits 24-29) and next hop + 1 (bits 0-23) of the prefix that wrote it. Keeping
//! the depth in the entry lets inserts skip entries owned by longer prefixes and lets
//! removes find exactly the entries a prefix wrote, without a second structure.
//!
//! Many VRFs hold few routes: the first level is allocated zeroed (calloc, so the
//! kernel's zero pages back it until written) and the default route lives in a field, so
//! a VRF with a /0 and a few subnets costs a few pages, not 64 MiB.

use crate::fasthash::FastMap;
use crate::ids::NextHopId;
use crate::prefetch::prefetch;
use core::net::Ipv4Addr;

const EXT: u32 = 1 << 31;
const DEPTH_SHIFT: u32 = 24;
const NH_MASK: u32 = (1 << 24) - 1;
const GROUP: usize = 256;

/// The largest next-hop id an LPM table stores.
pub const MAX_NEXTHOP: u32 = NH_MASK - 1;

/// Why a route was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LpmError {
    #[error("prefix length {0} is longer than the address")]
    BadLength(u8),
    #[error("the address has bits set past the prefix length")]
    HostBits,
    #[error("next hop {0} is beyond what the table stores ({MAX_NEXTHOP})")]
    NextHopOutOfRange(u32),
}

/// Checks a route before it is installed: the length fits the address width, no bits
/// are set past it (`host_bits`, asked only once the length is known to fit), and the
/// next hop fits an entry. Shared by the IPv4 and IPv6 tables.
pub(crate) fn check_route(
    len: u8,
    width: u8,
    host_bits: impl FnOnce() -> bool,
    nh: NextHopId,
) -> Result<(), LpmError> {
    if len > width {
        return Err(LpmError::BadLength(len));
    }
    if host_bits() {
        return Err(LpmError::HostBits);
    }
    if nh.0 > MAX_NEXTHOP {
        return Err(LpmError::NextHopOutOfRange(nh.0));
    }
    Ok(())
}

#[inline]
fn mask(len: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0)
}

#[inline]
fn leaf(nh: NextHopId, depth: u8) -> u32 {
    (u32::from(depth) << DEPTH_SHIFT) | (nh.0 + 1)
}

#[inline]
fn depth(e: u32) -> u8 {
    ((e >> DEPTH_SHIFT) & 0x3f) as u8
}

#[inline]
fn resolve(e: u32, default: Option<NextHopId>) -> Option<NextHopId> {
    if e == 0 {
        default
    } else {
        Some(NextHopId((e & NH_MASK) - 1))
    }
}

/// An IPv4 FIB.
#[derive(Clone)]
pub struct Lpm4 {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
    free_groups: Vec<u32>,
    default: Option<NextHopId>,
    /// Every installed prefix: (address, length) → next hop. The control plane's RIB,
    /// used to find the covering prefix when a prefix is removed.
    rib: FastMap<(u32, u8), NextHopId>,
}

impl Default for Lpm4 {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Lpm4 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lpm4")
            .field("prefixes", &self.len())
            .field("groups", &self.groups_in_use())
            .finish()
    }
}

impl Lpm4 {
    pub fn new() -> Self {
        Self {
            tbl24: vec![0; 1 << 24],
            tbl8: Vec::new(),
            free_groups: Vec::new(),
            default: None,
            rib: FastMap::default(),
        }
    }

    /// Number of prefixes, the default route included.
    pub fn len(&self) -> usize {
        self.rib.len() + usize::from(self.default.is_some())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Second-level groups in use.
    pub fn groups_in_use(&self) -> usize {
        self.tbl8.len() / GROUP - self.free_groups.len()
    }

    /// Memory the table really uses: the second-level groups plus the first-level pages
    /// that hold a route (untouched pages are the kernel's shared zero page). Scans the
    /// first level: for reports, not for the hot path.
    pub fn memory_bytes(&self) -> usize {
        let touched_pages = self
            .tbl24
            .chunks(1024)
            .filter(|p| p.iter().any(|e| *e != 0))
            .count();
        touched_pages * 4096 + self.tbl8.len() * 4
    }

    /// The next hop of exactly `prefix/len`.
    pub fn exact(&self, prefix: Ipv4Addr, len: u8) -> Option<NextHopId> {
        if len == 0 {
            return self.default;
        }
        self.rib.get(&(u32::from(prefix), len)).copied()
    }

    /// Every route, the default first, then in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Ipv4Addr, u8, NextHopId)> + '_ {
        let d = self.default.map(|nh| (Ipv4Addr::UNSPECIFIED, 0, nh));
        d.into_iter().chain(
            self.rib
                .iter()
                .map(|((p, l), nh)| (Ipv4Addr::from(*p), *l, *nh)),
        )
    }

    /// The longest-prefix match for `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<NextHopId> {
        let mut e = self.tbl24[(addr >> 8) as usize];
        if e & EXT != 0 {
            e = self.tbl8[(e & !EXT) as usize * GROUP + (addr & 0xff) as usize];
        }
        resolve(e, self.default)
    }

    /// Looks up every address of `addrs` into `out` (as many as the shorter of the two).
    /// All first-level loads are issued before any is used, so their cache misses
    /// overlap; then the second-level loads likewise.
    pub fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<NextHopId>]) {
        const CHUNK: usize = 64;
        for (addrs, out) in addrs.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            for a in addrs {
                prefetch(&self.tbl24[(a >> 8) as usize]);
            }
            let mut e = [0u32; CHUNK];
            for (i, a) in addrs.iter().enumerate() {
                e[i] = self.tbl24[(a >> 8) as usize];
                if e[i] & EXT != 0 {
                    prefetch(&self.tbl8[(e[i] & !EXT) as usize * GROUP + (a & 0xff) as usize]);
                }
            }
            for (i, (a, o)) in addrs.iter().zip(out.iter_mut()).enumerate() {
                let mut v = e[i];
                if v & EXT != 0 {
                    v = self.tbl8[(v & !EXT) as usize * GROUP + (a & 0xff) as usize];
                }
                *o = resolve(v, self.default);
            }
        }
    }

    /// Adds or replaces `prefix/len`, returning the next hop it replaced.
    pub fn insert(
        &mut self,
        prefix: Ipv4Addr,
        len: u8,
        nh: NextHopId,
    ) -> Result<Option<NextHopId>, LpmError> {
        let p = u32::from(prefix);
        check_route(len, 32, || p & !mask(len) != 0, nh)?;
        if len == 0 {
            return Ok(self.default.replace(nh));
        }
        let old = self.rib.insert((p, len), nh);
        let new = leaf(nh, len);
        // Overwrite the entries whose current owner is no longer than this prefix.
        let overwrite = |e: &mut u32| {
            if depth(*e) <= len {
                *e = new;
            }
        };
        if len <= 24 {
            let first = (p >> 8) as usize;
            for i in first..first + (1 << (24 - len)) {
                let e = self.tbl24[i];
                if e & EXT != 0 {
                    self.group_mut(e).iter_mut().for_each(overwrite);
                } else {
                    overwrite(&mut self.tbl24[i]);
                }
            }
        } else {
            let i = (p >> 8) as usize;
            let g = self.extend(i);
            let first = (p & 0xff) as usize;
            self.group_mut(g)[first..first + (1 << (32 - len))]
                .iter_mut()
                .for_each(overwrite);
        }
        Ok(old)
    }

    /// Removes `prefix/len`, restoring the next covering prefix where it ruled.
    pub fn remove(&mut self, prefix: Ipv4Addr, len: u8) -> Option<NextHopId> {
        let p = u32::from(prefix);
        if len == 0 {
            return self.default.take();
        }
        let old = self.rib.remove(&(p, len))?;
        let cover = (1..len)
            .rev()
            .find_map(|l| self.rib.get(&(p & mask(l), l)).map(|nh| leaf(*nh, l)))
            .unwrap_or(0);
        let restore = |e: &mut u32| {
            if depth(*e) == len {
                *e = cover;
            }
        };
        if len <= 24 {
            let first = (p >> 8) as usize;
            for i in first..first + (1 << (24 - len)) {
                let e = self.tbl24[i];
                if e & EXT != 0 {
                    self.group_mut(e).iter_mut().for_each(restore);
                    self.try_collapse(i);
                } else {
                    restore(&mut self.tbl24[i]);
                }
            }
        } else {
            let i = (p >> 8) as usize;
            let e = self.tbl24[i];
            if e & EXT != 0 {
                let first = (p & 0xff) as usize;
                self.group_mut(e)[first..first + (1 << (32 - len))]
                    .iter_mut()
                    .for_each(restore);
                self.try_collapse(i);
            }
        }
        Some(old)
    }

    fn group_mut(&mut self, ext_entry: u32) -> &mut [u32] {
        let g = (ext_entry & !EXT) as usize * GROUP;
        &mut self.tbl8[g..g + GROUP]
    }

    /// Makes first-level entry `i` point to a group (filled with what the entry held),
    /// returning the pointing entry.
    fn extend(&mut self, i: usize) -> u32 {
        let e = self.tbl24[i];
        if e & EXT != 0 {
            return e;
        }
        let g = match self.free_groups.pop() {
            Some(g) => g,
            None => {
                self.tbl8.resize(self.tbl8.len() + GROUP, 0);
                (self.tbl8.len() / GROUP - 1) as u32
            }
        };
        let ext = EXT | g;
        self.group_mut(ext).fill(e);
        self.tbl24[i] = ext;
        ext
    }

    /// Folds a group back into its first-level entry once no prefix longer than /24
    /// remains in it (all 256 entries equal and of depth ≤ 24).
    fn try_collapse(&mut self, i: usize) {
        let ext = self.tbl24[i];
        let grp = self.group_mut(ext);
        let v = grp[0];
        if depth(v) <= 24 && grp.iter().all(|e| *e == v) {
            self.tbl24[i] = v;
            self.free_groups.push(ext & !EXT);
        }
    }
}

#[cfg(test)]
mod tests;
