//! The flow table proper: a bucketised hash with a primary and an overflow bucket.
//!
//! Layout, chosen for a machine where a cache miss costs 120-170 ns and about ten can be
//! in flight (PLATFORM.md): 64-byte buckets of 8 slots, each slot a 16-bit signature and
//! a 32-bit entry index, so one cache line answers "which entry could it be"; entries in
//! a separate array, two cache lines each, the first holding everything a hit of an IPv4
//! flow reads and writes (`super::slot`).
//!
//! A key lives in its primary bucket while that has room, else in its secondary one
//! (chosen by independent bits of its hash); the primary counts the keys it sent away.
//! A lookup therefore reads one bucket line in the common case (the table is sized for a
//! load of at most 50%, so about 2% of buckets ever overflow) and the second only when
//! its primary has sent keys away. There is no displacement (cuckoo kicks): a key whose
//! two buckets are full is refused, counted, and never pushes another flow out.
//! Established flows are therefore never evicted by new ones, whatever arrives.

use super::key::FlowKey;
use super::slot::{EntryMut, FlowHead, Short, Slot};
use crate::hugemem::{HugeArray, Pages};
use crate::ids::NextHopId;
use crate::prefetch::prefetch;

/// Starts loading what a hit of a key needs: an entry's first line, and its second for
/// a key whose addresses are there (IPv6).
#[inline(always)]
fn prefetch_entry(e: &Slot, wide: bool) {
    let p: *const Slot = e;
    prefetch(p);
    if wide {
        prefetch(p.cast::<u8>().wrapping_add(64));
    }
}
use std::collections::HashMap;

const SLOTS: usize = 8;
/// A batch lookup's candidate markers: no candidate; look the key up one by one.
const NONE: u32 = u32::MAX;
const AGAIN: u32 = u32::MAX - 1;

/// Index of a flow in its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowId(pub u32);

/// What the fast path does with a flow's packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowAction {
    Forward {
        next_hop: NextHopId,
    },
    /// Dropped and counted under `reason` (the dataplane's drop-reason index).
    Drop {
        reason: u16,
    },
}

/// Flag bits of an entry.
pub mod flags {
    /// The entry is in use.
    pub const LIVE: u8 = 0x80;
    /// Policy denied this flow: it ages out on the short timeout.
    pub const DENIED: u8 = 0x01;
    /// This is the reverse (reply) direction of a pair.
    pub const REVERSE: u8 = 0x02;
    /// A fast path below the pipeline carries this flow now (its owner marks it when the
    /// flows are read; the table itself never looks at it).
    pub const OFFLOADED: u8 = 0x04;
    /// A reverse flow that goes back to the host its forward direction came from (a
    /// service instance there), not where the route would send it.
    pub const TO_SENDER: u8 = 0x08;
    /// A flow set up from a packet out of a VXLAN tunnel: `FlowEntry::sender` holds the
    /// host that sends it on, and a packet from another host takes the decision of the
    /// pair's way back again (a session moved to a service instance there).
    pub const SENT: u8 = 0x10;
}

/// One flow, as the table lends it out ([`FlowTable::get`], [`FlowTable::get_mut`]); it
/// stores it packed (`super::slot`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowEntry {
    pub key: FlowKey,
    pub flags: u8,
    /// The forwarding-state epoch the action was decided at (the caller's to keep).
    pub epoch: u32,
    pub action: Option<FlowAction>,
    pub packets: u64,
    pub bytes: u64,
    /// Times in the caller's unit (the dataplane passes nanoseconds); the table never
    /// reads a clock.
    pub created: u64,
    pub last_seen: u64,
    pub reverse: Option<FlowId>,
    /// For a bridged flow, the destination MAC its next hop was looked up by.
    pub dst_mac: [u8; 6],
    /// With `flags::SENT`: the VTEP its latest packet came from, IPv4-mapped as in flow
    /// keys.
    pub sender: [u8; 16],
}

/// Why a flow was not installed. Each is counted in [`FlowStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FlowInsertError {
    #[error("flow table full")]
    TableFull,
    #[error("both hash buckets of the flow are full")]
    BucketFull,
    #[error("VRF {vrf} reached its quota of {max} flows")]
    QuotaExceeded { vrf: u32, max: u32 },
    #[error("the flow exists already (id {})", .0.0)]
    Exists(FlowId),
}

/// Counters of the table's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowStats {
    pub inserted: u64,
    pub removed: u64,
    pub aged: u64,
    pub refused_full: u64,
    pub refused_bucket: u64,
    pub refused_quota: u64,
}

/// What one aging pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AgeStats {
    pub scanned: usize,
    pub aged: usize,
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    /// 0 = empty slot.
    sig: [u16; SLOTS],
    idx: [u32; SLOTS],
    /// Keys whose primary bucket this is that live in their secondary one: while 0, a
    /// lookup that misses here need not read the secondary bucket.
    overflowed: u32,
}

impl Bucket {
    /// The slots holding signature `sig`, lowest first.
    #[inline]
    fn find(&self, sig: u16) -> Slots {
        Slots(sig_matches(&self.sig, sig))
    }

    fn free_slots(&self) -> usize {
        self.sig.iter().filter(|s| **s == 0).count()
    }
}

/// A bucket's slots that matched a signature: bit `2 * i` for slot `i` (the layout SSE2's
/// byte mask gives, without compressing it).
#[derive(Clone, Copy)]
struct Slots(u32);

impl Iterator for Slots {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros() as usize / 2;
        self.0 &= self.0 - 1;
        Some(i)
    }
}

/// Which of eight signatures equal `sig`, as [`Slots`]' bits. On x86-64 one SSE2 compare
/// (SSE2 is part of the base ISA): written as a loop, the compiler made 30 instructions
/// of it, a tenth of a flow lookup.
#[inline(always)]
#[allow(unsafe_code)]
fn sig_matches(sigs: &[u16; SLOTS], sig: u16) -> u32 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: every x86-64 CPU has SSE2.
    return unsafe { sig_matches_sse2(sigs, sig) };
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u32;
        for (i, s) in sigs.iter().enumerate() {
            m |= u32::from(*s == sig) << (2 * i);
        }
        m
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
#[allow(unsafe_code)]
fn sig_matches_sse2(sigs: &[u16; SLOTS], sig: u16) -> u32 {
    use core::arch::x86_64::{
        __m128i, _mm_cmpeq_epi16, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi16,
    };
    // SAFETY: `sigs` is 16 readable bytes, and an unaligned load asks nothing more.
    let v = unsafe { _mm_loadu_si128(sigs.as_ptr().cast::<__m128i>()) };
    // Each matching slot sets two mask bits; keep the lower of each pair.
    _mm_movemask_epi8(_mm_cmpeq_epi16(v, _mm_set1_epi16(sig as i16))) as u32 & 0x5555
}

#[derive(Clone, Copy, Default)]
struct Quota {
    max: u32,
    used: u32,
}

/// The flow table.
pub struct FlowTable {
    buckets: HugeArray<Bucket>,
    mask: usize,
    entries: HugeArray<Slot>,
    free: Vec<u32>,
    quotas: HashMap<u32, Quota>,
    /// The quota of VRFs that have none of their own.
    default_quota: u32,
    cursor: usize,
    stats: FlowStats,
    /// Ids of entries removed since the last [`FlowTable::take_removed`], once someone
    /// asked for them ([`FlowTable::log_removals`]).
    removed: Option<Vec<u32>>,
}

impl core::fmt::Debug for FlowTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FlowTable")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[inline]
fn split(h: u64, mask: usize) -> (u16, usize, usize) {
    let sig = ((h >> 48) as u16).max(1);
    (sig, h as usize & mask, (h >> 24) as usize & mask)
}

impl FlowTable {
    /// A table for `capacity` flows. Buckets are sized for a load of at most 50%, so that
    /// two-choice placement almost never finds both buckets full before the table is.
    pub fn new(capacity: usize) -> Self {
        Self::with_pages(capacity, true)
    }

    /// As [`Self::new`]; `huge_pages` puts the buckets and entries on 2 MiB pages where
    /// the system has them ([`crate::hugemem`]: one TLB entry per 2 MiB of table).
    pub fn with_pages(capacity: usize, huge_pages: bool) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize - 1);
        let n = (capacity * 2).div_ceil(SLOTS).next_power_of_two().max(2);
        Self {
            buckets: HugeArray::new(n, huge_pages),
            mask: n - 1,
            entries: HugeArray::new(capacity, huge_pages),
            free: (0..capacity as u32).rev().collect(),
            quotas: HashMap::new(),
            default_quota: u32::MAX,
            cursor: 0,
            stats: FlowStats::default(),
            removed: None,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// What backs the entries (the larger part of the table).
    pub fn pages(&self) -> Pages {
        self.entries.pages()
    }

    pub fn stats(&self) -> FlowStats {
        self.stats
    }

    /// Limits the flows of one VRF (`None` removes the limit).
    pub fn set_vrf_quota(&mut self, vrf: u32, max: Option<u32>) {
        let q = self.quotas.entry(vrf).or_default();
        q.max = max.unwrap_or(u32::MAX);
    }

    /// The quota of every VRF not given one of its own (`None`: unlimited).
    pub fn set_default_quota(&mut self, max: Option<u32>) {
        self.default_quota = max.unwrap_or(u32::MAX);
    }

    /// The flow, whole (both of its lines).
    #[inline]
    pub fn get(&self, id: FlowId) -> Option<FlowEntry> {
        self.slot(id).map(Slot::entry)
    }

    /// The flow, to change (stored back when the returned value goes); not its key.
    #[inline]
    pub fn get_mut(&mut self, id: FlowId) -> Option<EntryMut<'_>> {
        self.entries
            .get_mut(id.0 as usize)
            .filter(|s| s.head.live())
            .map(EntryMut::new)
    }

    /// What a packet of the flow reads: its entry's first line only.
    #[inline]
    pub fn head(&self, id: FlowId) -> Option<&FlowHead> {
        self.slot(id).map(|s| &s.head)
    }

    #[inline]
    fn slot(&self, id: FlowId) -> Option<&Slot> {
        self.entries.get(id.0 as usize).filter(|s| s.head.live())
    }

    /// Counts a packet of `bytes` on the flow and marks it seen at `now`.
    #[inline]
    pub fn touch(&mut self, id: FlowId, bytes: u64, now: u64) {
        if let Some(s) = self.entries.get_mut(id.0 as usize) {
            s.head.touch(bytes, now);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (FlowId, FlowEntry)> + '_ {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, s)| s.head.live())
            .map(|(i, s)| (FlowId(i as u32), s.entry()))
    }

    /// The flow of `key`, if installed.
    #[inline]
    pub fn lookup(&self, key: &FlowKey) -> Option<FlowId> {
        let (sig, b1, b2) = split(key.hash(), self.mask);
        let short = Short::of(key);
        self.probe(b1, sig, &short, key).or_else(|| {
            if self.buckets[b1].overflowed != 0 {
                self.probe(b2, sig, &short, key)
            } else {
                None
            }
        })
    }

    #[inline]
    fn probe(&self, b: usize, sig: u16, short: &Short, key: &FlowKey) -> Option<FlowId> {
        let bucket = &self.buckets[b];
        bucket
            .find(sig)
            .map(|s| bucket.idx[s])
            .find(|&i| self.entries[i as usize].holds(short, key))
            .map(FlowId)
    }

    /// Looks up every key of `keys` into `out`, in groups whose cache misses overlap,
    /// software-pipelined so that no pass waits for the misses it just started: group
    /// i+1's keys are hashed and their primary buckets prefetched (pass 1) between
    /// group i's signature pass (which prefetches each candidate entry, pass 2) and its
    /// key compare (pass 3). What the common case does not settle (a
    /// signature collision, a key sent to its secondary bucket) is looked up again one
    /// by one.
    pub fn lookup_batch(&self, keys: &[FlowKey], out: &mut [Option<FlowId>]) {
        // Enough lookups per group to cover a miss's latency (about ten can be
        // outstanding), few enough that a group's lines (2 per key) stay in L1.
        const CHUNK: usize = 32;
        let mut ahead = [(0u16, 0usize, Short::default()); CHUNK];
        let mut groups = keys.chunks(CHUNK).zip(out.chunks_mut(CHUNK)).peekable();
        if let Some((first, _)) = groups.peek() {
            self.locate(first, &mut ahead);
        }
        while let Some((keys, out)) = groups.next() {
            let loc = ahead;
            let mut cand = [NONE; CHUNK];
            for (&(sig, b, short), c) in loc.iter().zip(cand.iter_mut()).take(keys.len()) {
                let bucket = &self.buckets[b];
                if let Some(s) = bucket.find(sig).next() {
                    *c = bucket.idx[s];
                    prefetch_entry(&self.entries[*c as usize], short.wide());
                } else if bucket.overflowed != 0 {
                    *c = AGAIN;
                }
            }
            if let Some((next, _)) = groups.peek() {
                self.locate(next, &mut ahead);
            }
            for (((k, o), &c), (_, _, short)) in
                keys.iter().zip(out.iter_mut()).zip(&cand).zip(&loc)
            {
                *o = match c {
                    NONE => None,
                    AGAIN => self.lookup(k),
                    c if self.entries[c as usize].holds(short, k) => Some(FlowId(c)),
                    // A signature collision: settle it the slow way.
                    _ => self.lookup(k),
                };
            }
        }
    }

    /// Pass 1 of [`Self::lookup_batch`]: each key's signature, primary bucket (whose
    /// line starts loading) and short form.
    #[inline]
    fn locate(&self, keys: &[FlowKey], loc: &mut [(u16, usize, Short)]) {
        for (k, l) in keys.iter().zip(loc.iter_mut()) {
            let (sig, b1, _) = split(k.hash(), self.mask);
            *l = (sig, b1, Short::of(k));
            prefetch(&self.buckets[b1]);
        }
    }

    /// Installs one flow.
    pub fn insert(
        &mut self,
        key: FlowKey,
        action: FlowAction,
        now: u64,
    ) -> Result<FlowId, FlowInsertError> {
        let r = self.insert_one(key, action, now, 0);
        self.count(&r);
        r
    }

    /// Installs a flow and its reverse, linked both ways, or neither.
    pub fn insert_pair(
        &mut self,
        fwd: (FlowKey, FlowAction),
        rev: (FlowKey, FlowAction),
        now: u64,
    ) -> Result<(FlowId, FlowId), FlowInsertError> {
        let f = self.insert_one(fwd.0, fwd.1, now, 0);
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                self.count(&Err(e));
                return Err(e);
            }
        };
        match self.insert_one(rev.0, rev.1, now, flags::REVERSE) {
            Ok(r) => {
                self.entries[f.0 as usize].set_reverse(Some(r));
                self.entries[r.0 as usize].set_reverse(Some(f));
                self.stats.inserted += 2;
                Ok((f, r))
            }
            Err(e) => {
                self.unlink(f);
                self.count(&Err(e));
                Err(e)
            }
        }
    }

    fn count(&mut self, r: &Result<FlowId, FlowInsertError>) {
        match r {
            Ok(_) => self.stats.inserted += 1,
            Err(FlowInsertError::TableFull) => self.stats.refused_full += 1,
            Err(FlowInsertError::BucketFull) => self.stats.refused_bucket += 1,
            Err(FlowInsertError::QuotaExceeded { .. }) => self.stats.refused_quota += 1,
            Err(FlowInsertError::Exists(_)) => {}
        }
    }

    fn insert_one(
        &mut self,
        key: FlowKey,
        action: FlowAction,
        now: u64,
        extra: u8,
    ) -> Result<FlowId, FlowInsertError> {
        let (sig, b1, b2) = split(key.hash(), self.mask);
        if let Some(id) = self.lookup(&key) {
            return Err(FlowInsertError::Exists(id));
        }
        if let Some(q) = self.quotas.get(&key.vrf).filter(|q| q.used >= q.max) {
            return Err(FlowInsertError::QuotaExceeded {
                vrf: key.vrf,
                max: q.max,
            });
        }
        let Some(&idx) = self.free.last() else {
            return Err(FlowInsertError::TableFull);
        };
        // The primary bucket while it has room (lookups read only it), else the
        // secondary, which the primary then counts.
        let b = if self.buckets[b1].free_slots() > 0 || self.make_room(b1) {
            b1
        } else if b2 != b1 && (self.buckets[b2].free_slots() > 0 || self.make_room(b2)) {
            self.buckets[b1].overflowed += 1;
            b2
        } else {
            return Err(FlowInsertError::BucketFull);
        };
        self.free.pop();
        let bucket = &mut self.buckets[b];
        let slot = bucket.sig.iter().position(|s| *s == 0).unwrap_or(0);
        bucket.sig[slot] = sig;
        bucket.idx[slot] = idx;
        let deny = if matches!(action, FlowAction::Drop { .. }) {
            flags::DENIED
        } else {
            0
        };
        self.entries[idx as usize] = Slot::new(&FlowEntry {
            key,
            action: Some(action),
            reverse: None,
            packets: 0,
            bytes: 0,
            created: now,
            last_seen: now,
            flags: flags::LIVE | deny | extra,
            epoch: 0,
            dst_mac: [0; 6],
            sender: [0; 16],
        });
        self.quotas
            .entry(key.vrf)
            .or_insert(Quota {
                max: self.default_quota,
                used: 0,
            })
            .used += 1;
        Ok(FlowId(idx))
    }

    /// Frees a slot of full bucket `b` by moving one of its flows to the other of that
    /// flow's two buckets, if one has room (a single cuckoo step: the flow keeps its
    /// id and stays installed). Without it, a key's two buckets being full would refuse
    /// flows long before the table is full, since keys prefer their primary bucket.
    fn make_room(&mut self, b: usize) -> bool {
        for s in 0..SLOTS {
            let idx = self.buckets[b].idx[s];
            if self.buckets[b].sig[s] == 0 {
                continue;
            }
            let Some(e) = self.entries.get(idx as usize) else {
                continue;
            };
            let (sig, p, a) = split(e.key().hash(), self.mask);
            let other = if b == p { a } else { p };
            if other == b || self.buckets[other].free_slots() == 0 {
                continue;
            }
            let to = &mut self.buckets[other];
            let free = to.sig.iter().position(|x| *x == 0).unwrap_or(0);
            to.sig[free] = sig;
            to.idx[free] = idx;
            self.buckets[b].sig[s] = 0;
            // Leaving its primary, or going back to it.
            let primary = &mut self.buckets[p];
            if b == p {
                primary.overflowed += 1;
            } else {
                primary.overflowed = primary.overflowed.saturating_sub(1);
            }
            return true;
        }
        false
    }

    /// Removes a flow and, if linked, its reverse. Returns how many entries went.
    pub fn remove(&mut self, id: FlowId) -> usize {
        let Some(reverse) = self.slot(id).map(Slot::reverse) else {
            return 0;
        };
        let mut n = usize::from(self.unlink(id));
        if let Some(r) = reverse {
            n += usize::from(self.unlink(r));
        }
        self.stats.removed += n as u64;
        n
    }

    /// Takes one entry out of its bucket and the quota; false if it was not live.
    fn unlink(&mut self, id: FlowId) -> bool {
        let Some(key) = self.slot(id).map(Slot::key) else {
            return false;
        };
        let (sig, b1, b2) = split(key.hash(), self.mask);
        'buckets: for b in [b1, b2] {
            let bucket = &mut self.buckets[b];
            for s in bucket.find(sig) {
                if bucket.idx[s] == id.0 {
                    bucket.sig[s] = 0;
                    if b != b1 {
                        let primary = &mut self.buckets[b1];
                        primary.overflowed = primary.overflowed.saturating_sub(1);
                    }
                    break 'buckets;
                }
            }
        }
        if let Some(q) = self.quotas.get_mut(&key.vrf) {
            q.used = q.used.saturating_sub(1);
        }
        self.entries[id.0 as usize] = Slot::default();
        self.free.push(id.0);
        if let Some(log) = &mut self.removed {
            log.push(id.0);
        }
        true
    }

    /// From now on, keeps the ids of the entries removed (aged, deleted, replaced) for
    /// [`FlowTable::take_removed`]: whoever keeps state per flow outside the table (the
    /// fast path) learns of its end without checking every flow. The caller must take
    /// them regularly.
    pub fn log_removals(&mut self) {
        self.removed.get_or_insert_with(Vec::new);
    }

    /// The ids removed since the last call (empty unless [`FlowTable::log_removals`]).
    pub fn take_removed(&mut self) -> Vec<u32> {
        self.removed
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Scans up to `budget` entries from where the last call stopped and removes flows
    /// idle for longer than their timeout (`denied_idle` for denied flows). A pair ages
    /// together, on the later of its two directions' last packets.
    pub fn age(&mut self, now: u64, idle: u64, denied_idle: u64, budget: usize) -> AgeStats {
        let mut st = AgeStats::default();
        let n = self.entries.len();
        for _ in 0..budget.min(n) {
            let i = self.cursor;
            self.cursor = (self.cursor + 1) % n;
            st.scanned += 1;
            let e = &self.entries[i];
            if !e.head.live() {
                continue;
            }
            let rev_seen = e
                .reverse()
                .and_then(|r| self.slot(r))
                .map_or(0, Slot::last_seen);
            let timeout = if e.head.flags() & flags::DENIED != 0 {
                denied_idle
            } else {
                idle
            };
            if now.saturating_sub(e.last_seen().max(rev_seen)) > timeout {
                let gone = self.remove(FlowId(i as u32));
                self.stats.removed -= gone as u64;
                self.stats.aged += gone as u64;
                st.aged += gone;
            }
        }
        st
    }
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
