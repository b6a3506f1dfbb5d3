//! IPv6 longest-prefix match: a Poptrie (Asai, Ohara, "Poptrie: a compressed trie with
//! population count for fast and scalable software IP routing table lookup", SIGCOMM
//! 2015) below a direct table of the top 16 bits.
//!
//! The direct table holds, per /16, either a leaf or the index of a root node. A node
//! consumes the next 6 bits of the address (64 slots) and holds two bitmaps: `vector`
//! marks the slots that continue into a child node (children are contiguous, so the
//! child of slot s is `base1` + the number of children before s: a popcount), `leafvec`
//! marks where a run of equal leaves starts (leaves are contiguous from `base0`, so a run
//! of slots sharing a next hop costs one leaf). A lookup reads one node per 6 bits down
//! to the deepest node on the address's path, then one leaf.
//!
//! Two additions keep a lookup of a BGP-like table to about four nodes, of which only the
//! last is usually a cache miss. A node whose leaves are a single next hop (most deep
//! nodes: one route) keeps it inline, so there is no leaf to read. And a node may skip up
//! to four levels that would hold no route and a single child (path compression, with
//! the skipped address bits in the node): a /48 alone below a node at depth 28 is one
//! node at depth 46, not three (34, 40, 46). An address that differs in the skipped bits resolves to the
//! node's `default`.
//!
//! Unlike the paper, leaves hold only the routes of their own node; a node keeps the
//! longest route of its ancestors that covers it in `default`, which a leaf of 0 falls
//! back to. So an update rewrites the leaves of one node, plus the `default` of the
//! descendants it covers, instead of pushing leaves into whole subtrees.
//!
//! Updates go to the copy of the tables no reader sees (left-right), so they modify the
//! arrays in place: a node whose children or leaves change size gets a new contiguous
//! block from per-size free lists. Which routes each node holds is a 126-bit map beside
//! the nodes; the next hops themselves are in the RIB, which `exact` and `iter` read.

use crate::fasthash::FastMap;
use crate::ids::NextHopId;
use crate::lpm4::{LpmError, check_route};
use crate::prefetch::prefetch;
use core::net::Ipv6Addr;

#[cfg(test)]
mod tests;
mod update;

/// Bits of the address that index the direct table.
const DIRECT: u32 = 16;
/// Bits of the address each node consumes.
const STRIDE: u32 = 6;
/// A direct-table entry with this bit set is a root node's index; otherwise a leaf.
const NODE: u32 = 1 << 31;
/// A leaf: 0 = no route (the /0 default then), otherwise next hop + 1.
const LEAF_MASK: u32 = (1 << 24) - 1;
/// Addresses one batch walks in lockstep.
const CHUNK: usize = 64;

/// `Node::base0` with this bit set holds the node's one leaf itself (`leafvec` then
/// marks the slots it covers): no leaf to read for a node with a single next hop.
const INLINE: u32 = 1 << 31;
/// The most levels a node skips (`Node::skip`).
const MAX_SKIP: u32 = 4;

/// One trie node: 32 bytes, two to a cache line.
#[derive(Clone, Copy, Default, Debug)]
#[repr(C, align(32))]
struct Node {
    /// Bit s: slot s continues into a child node.
    vector: u64,
    /// Bit s: a run of equal leaves starts at slot s (bit 0 is always set); with an
    /// `INLINE` leaf, bit s: the slot has that leaf.
    leafvec: u64,
    /// Index of the first child in `nodes`.
    base1: u32,
    /// Index of the first leaf in `leaves`, or `INLINE` | leaf.
    base0: u32,
    /// The leaf for slots that no route of this node covers.
    default: u32,
    /// Path compression: levels (bits 24-26) between the parent's slot and this node
    /// that hold no route and a single child, and the address bits they stand for (6 per
    /// level, bits 0-23). An address that differs there resolves to `default`.
    skip: u32,
}

/// The slots up to and including `s`.
#[inline]
fn upto(s: u32) -> u64 {
    u64::MAX >> (63 - s)
}

/// What a lookup does after visiting a node.
enum Step {
    /// Goes on to this node, at this depth (before its skipped levels).
    Down(u32, u32),
    /// Ends with this leaf.
    Leaf(u32),
    /// Ends with the leaf at this index in `leaves` (or the node's default if it is 0).
    Fetch(usize),
}

impl Node {
    /// A node with no route and no child.
    fn empty(default: u32, skip: u32) -> Self {
        Self {
            leafvec: 0,
            base0: INLINE,
            default,
            skip,
            ..Self::default()
        }
    }

    /// The step of a lookup for `addr` at this node, reached at `depth`.
    #[inline(always)]
    fn step(&self, addr: u128, mut depth: u32) -> Step {
        if self.skip != 0 {
            let w = (self.skip >> 24) * STRIDE;
            if ((addr << depth) >> (128 - w)) as u32 != self.skip & 0xff_ffff {
                return Step::Leaf(self.default);
            }
            depth += w;
        }
        let s = slot(addr, depth);
        if let Some(c) = self.child(s) {
            return Step::Down(c, depth + STRIDE);
        }
        if self.base0 & INLINE == 0 {
            return Step::Fetch(self.leaf_index(s));
        }
        if self.leafvec >> s & 1 != 0 {
            Step::Leaf(self.base0 & LEAF_MASK)
        } else {
            Step::Leaf(self.default)
        }
    }

    #[inline]
    fn child(&self, s: u32) -> Option<u32> {
        (self.vector >> s & 1 != 0).then(|| self.base1 + (self.vector & upto(s)).count_ones() - 1)
    }

    #[inline]
    fn leaf_index(&self, s: u32) -> usize {
        (self.base0 + (self.leafvec & upto(s)).count_ones() - 1) as usize
    }
}

/// The 6-bit slot of `addr` in a node at `depth` (bits past the address read as 0).
#[inline]
fn slot(addr: u128, depth: u32) -> u32 {
    ((addr << depth) >> (128 - STRIDE)) as u32
}

#[inline]
fn top_index(addr: u128) -> usize {
    (addr >> (128 - DIRECT)) as usize
}

#[inline]
fn mask(len: u32) -> u128 {
    u128::MAX.checked_shl(128 - len).unwrap_or(0)
}

#[inline]
fn resolve(leaf: u32, default: Option<NextHopId>) -> Option<NextHopId> {
    if leaf == 0 {
        default
    } else {
        Some(NextHopId(leaf - 1))
    }
}

/// An IPv6 FIB.
#[derive(Clone)]
pub struct Lpm6 {
    /// Per /16: `NODE` | root node index, or a leaf. Allocated zeroed at the first
    /// route longer than /0 (empty until then: a network without IPv6 routes costs
    /// nothing, and a host may have thousands of networks).
    top: Vec<u32>,
    /// Routes of length 1-16 expanded over the /16s as in `Lpm4`'s first level (length
    /// << 24 | leaf): what a /16 resolves to, or its root node's `default`.
    short: Vec<u32>,
    nodes: Vec<Node>,
    /// Beside each node: the routes it holds, bit 2^r - 2 + b for the route r (1-6) bits
    /// longer than the node's depth whose next r bits are b.
    owned: Vec<u128>,
    /// `leaves[0]` is the one leaf (0) of every node that holds no route.
    leaves: Vec<u32>,
    /// Freed blocks of nodes and of leaves, by size (1-64).
    free_nodes: Vec<Vec<u32>>,
    free_leaves: Vec<Vec<u32>>,
    default: Option<NextHopId>,
    /// Every installed prefix but the default: (address, length) → next hop.
    rib: FastMap<(u128, u8), NextHopId>,
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
            .field("nodes", &self.nodes.len())
            .field("leaves", &self.leaves.len())
            .finish()
    }
}

impl Lpm6 {
    pub fn new() -> Self {
        Self {
            top: Vec::new(),
            short: Vec::new(),
            nodes: Vec::new(),
            owned: Vec::new(),
            leaves: vec![0],
            free_nodes: vec![Vec::new(); 65],
            free_leaves: vec![Vec::new(); 65],
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

    /// Bytes that lookups read: the touched pages of the direct table, the nodes and the
    /// leaves (freed blocks included). Scans the direct table: for reports.
    pub fn lookup_bytes(&self) -> usize {
        let touched = self
            .top
            .chunks(1024)
            .filter(|p| p.iter().any(|e| *e != 0))
            .count();
        touched * 4096
            + self.nodes.capacity() * size_of::<Node>()
            + self.leaves.capacity() * size_of::<u32>()
    }

    /// Approximate heap bytes of the whole table: what lookups read, plus the update
    /// side (the expanded short routes, the per-node route maps and the RIB).
    pub fn memory_bytes(&self) -> usize {
        let touched = self
            .short
            .chunks(1024)
            .filter(|p| p.iter().any(|e| *e != 0))
            .count();
        self.lookup_bytes()
            + touched * 4096
            + self.owned.capacity() * size_of::<u128>()
            + self.rib.capacity() * (size_of::<((u128, u8), NextHopId)>() + 1)
    }

    /// The next hop of exactly `prefix/len`.
    pub fn exact(&self, prefix: Ipv6Addr, len: u8) -> Option<NextHopId> {
        if len == 0 {
            return self.default;
        }
        self.rib.get(&(u128::from(prefix), len)).copied()
    }

    /// Every route, the default first, then in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Ipv6Addr, u8, NextHopId)> + '_ {
        let d = self.default.map(|nh| (Ipv6Addr::UNSPECIFIED, 0, nh));
        d.into_iter().chain(
            self.rib
                .iter()
                .map(|((p, l), nh)| (Ipv6Addr::from(*p), *l, *nh)),
        )
    }

    /// The longest-prefix match for `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<NextHopId> {
        let Some(&e) = self.top.get(top_index(addr)) else {
            return self.default;
        };
        if e & NODE == 0 {
            return resolve(e, self.default);
        }
        let mut n = &self.nodes[(e & !NODE) as usize];
        let mut depth = DIRECT;
        loop {
            match n.step(addr, depth) {
                Step::Down(c, d) => (n, depth) = (&self.nodes[c as usize], d),
                Step::Leaf(v) => return resolve(v, self.default),
                Step::Fetch(l) => return resolve(self.fetched(n, l), self.default),
            }
        }
    }

    #[inline]
    fn fetched(&self, n: &Node, l: usize) -> u32 {
        match self.leaves[l] {
            0 => n.default,
            v => v,
        }
    }

    /// Looks up every address of `addrs` into `out` (as many as the shorter of the two).
    /// The addresses of a chunk walk the trie in lockstep, one level per pass, each
    /// prefetching its next node, so the cache misses of the chunk overlap.
    pub fn lookup_batch(&self, addrs: &[u128], out: &mut [Option<NextHopId>]) {
        for (addrs, out) in addrs.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            self.lookup_chunk(addrs, out);
        }
    }

    fn lookup_chunk(&self, addrs: &[u128], out: &mut [Option<NextHopId>]) {
        let n = addrs.len().min(out.len());
        if self.top.is_empty() {
            out[..n].fill(self.default);
            return;
        }
        for a in &addrs[..n] {
            prefetch(&self.top[top_index(*a)]);
        }
        // The node each address is at; the addresses still walking, then those whose
        // leaf is known (by position in `addrs`).
        let mut at = [0u32; CHUNK];
        let mut walking = [0u8; CHUNK];
        let mut w = 0;
        for (i, (a, o)) in addrs.iter().zip(out.iter_mut()).enumerate() {
            let e = self.top[top_index(*a)];
            if e & NODE == 0 {
                *o = resolve(e, self.default);
            } else {
                at[i] = e & !NODE;
                prefetch(&self.nodes[at[i] as usize]);
                walking[w] = i as u8;
                w += 1;
            }
        }
        let mut depth = [DIRECT; CHUNK];
        let mut leaf_at = [0u32; CHUNK];
        let mut ending = [0u8; CHUNK];
        let mut e = 0;
        while w > 0 {
            let mut still = 0;
            for k in 0..w {
                let i = usize::from(walking[k]);
                match self.nodes[at[i] as usize].step(addrs[i], depth[i]) {
                    Step::Down(c, d) => {
                        (at[i], depth[i]) = (c, d);
                        prefetch(&self.nodes[c as usize]);
                        walking[still] = i as u8;
                        still += 1;
                    }
                    Step::Leaf(v) => out[i] = resolve(v, self.default),
                    Step::Fetch(l) => {
                        prefetch(&self.leaves[l]);
                        leaf_at[i] = l as u32;
                        ending[e] = i as u8;
                        e += 1;
                    }
                }
            }
            w = still;
        }
        for &i in &ending[..e] {
            let i = usize::from(i);
            let v = self.fetched(&self.nodes[at[i] as usize], leaf_at[i] as usize);
            out[i] = resolve(v, self.default);
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
        check_route(len, 128, || p & !mask(u32::from(len)) != 0, nh)?;
        if len == 0 {
            return Ok(self.default.replace(nh));
        }
        if self.top.is_empty() {
            self.top = vec![0; 1 << DIRECT];
            self.short = vec![0; 1 << DIRECT];
        }
        let old = self.rib.insert((p, len), nh);
        if old != Some(nh) {
            if u32::from(len) <= DIRECT {
                self.paint_short(p, len, (u32::from(len) << 24) | (nh.0 + 1), false);
            } else {
                self.insert_long(p, u32::from(len));
            }
        }
        Ok(old)
    }

    /// Removes `prefix/len`, returning its next hop.
    pub fn remove(&mut self, prefix: Ipv6Addr, len: u8) -> Option<NextHopId> {
        if len == 0 {
            return self.default.take();
        }
        let p = u128::from(prefix);
        let old = self.rib.remove(&(p, len))?;
        if u32::from(len) <= DIRECT {
            let cover = (1..len)
                .rev()
                .find_map(|l| {
                    let nh = self.rib.get(&(p & mask(u32::from(l)), l))?;
                    Some((u32::from(l) << 24) | (nh.0 + 1))
                })
                .unwrap_or(0);
            self.paint_short(p, len, cover, true);
        } else {
            self.remove_long(p, u32::from(len));
        }
        Some(old)
    }
}
