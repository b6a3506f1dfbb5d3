//! Rings: their layout in a region, and the four ways a side moves frames through one.
//!
//! A ring (`memif_ring_t`) is a 128-byte header — `cookie` u32 at 0, `flags` u16 at 4,
//! `head` u16 at 6, `tail` u16 at 64 (its own cache line) — followed by `1 << log2`
//! descriptors of 16 bytes. Head and tail are free-running u16 counters, masked by the
//! ring size. The client owns every buffer:
//!
//! - C2S: the client writes descriptors and moves `head`; the server reads up to `head`
//!   and moves `tail` to give the slots back.
//! - S2C: the client offers empty buffers by moving `head`; the server fills them and
//!   moves `tail`; the client reads up to `tail`.
//!
//! The peer's counter is read with acquire ordering and ours written with release. The
//! distance between them is checked against the ring size before anything is read (a
//! violation is returned, and the link torn down); every descriptor the peer wrote is
//! read once and checked (`desc::check`) before its buffer is touched.

use crate::desc::{self, DESC_LEN, Desc, DescError, MAX_CHAIN};
use crate::sys::Mapping;
use std::sync::atomic::Ordering;

pub const HDR_LEN: usize = 128;
const COOKIE_OFF: usize = 0;
const FLAGS_OFF: usize = 4;
const HEAD_OFF: usize = 6;
const TAIL_OFF: usize = 64;
/// `MEMIF_RING_FLAG_MASK_INT`: the receiver polls; the sender need not signal.
pub const RING_FLAG_MASK_INT: u16 = 1;
/// How many descriptors ahead the buffers are prefetched.
const PREFETCH: u16 = 4;

/// The bytes a ring of `1 << log2` descriptors takes.
pub fn ring_bytes(log2: u8) -> usize {
    HDR_LEN + (DESC_LEN << log2)
}

/// A ring's place: region index and offset, checked against the region when it was
/// added (`check_layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingRef {
    pub region: usize,
    pub offset: usize,
    pub log2: u8,
}

/// Why a ring's place was refused (on ADD_RING, before it is dereferenced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("ring in a region that does not exist")]
    Region,
    #[error("ring does not fit inside its region")]
    Bounds,
    #[error("ring offset not aligned to 8 bytes")]
    Misaligned,
    #[error("ring size larger than offered")]
    TooLarge,
    #[error("ring of size zero")]
    TooSmall,
}

/// Checks a ring of `log2` at `offset` in `region` against the region sizes and our
/// largest ring.
pub fn check_layout(
    region: u16,
    offset: u32,
    log2: u8,
    regions: &[usize],
    max_log2: u8,
) -> Result<RingRef, LayoutError> {
    if log2 > max_log2 {
        return Err(LayoutError::TooLarge);
    }
    if log2 == 0 {
        return Err(LayoutError::TooSmall);
    }
    let Some(&size) = regions.get(region as usize) else {
        return Err(LayoutError::Region);
    };
    let off = offset as usize;
    if !off.is_multiple_of(8) {
        return Err(LayoutError::Misaligned);
    }
    match off.checked_add(ring_bytes(log2)) {
        Some(end) if end <= size => Ok(RingRef {
            region: region as usize,
            offset: off,
            log2,
        }),
        _ => Err(LayoutError::Bounds),
    }
}

/// A ring-level breach by the peer: the link is torn down with it as the reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("peer's ring counter is {0} slots ahead of a ring of {1}")]
    Distance(u16, u16),
    #[error("ring outside its region")]
    Ring,
    #[error("ring cookie is wrong")]
    Cookie,
}

/// A ring's header and descriptors over the mapped regions.
#[derive(Clone, Copy)]
pub struct Ring<'a> {
    m: &'a Mapping,
    off: usize,
    pub size: u16,
    mask: u16,
}

impl<'a> Ring<'a> {
    /// The ring at `r` (whose layout was checked against the same regions).
    pub fn new(regions: &'a [Mapping], r: RingRef) -> Result<Self, Violation> {
        let m = regions.get(r.region).ok_or(Violation::Ring)?;
        if r.offset
            .checked_add(ring_bytes(r.log2))
            .is_none_or(|e| e > m.len())
            || r.log2 > 15
        {
            return Err(Violation::Ring);
        }
        Ok(Self {
            m,
            off: r.offset,
            size: 1 << r.log2,
            mask: (1u32 << r.log2).wrapping_sub(1) as u16,
        })
    }

    pub fn cookie(&self) -> u32 {
        self.m.read_u32(self.off + COOKIE_OFF).unwrap_or(0)
    }

    pub fn flags(&self) -> u16 {
        self.m.read_u16(self.off + FLAGS_OFF).unwrap_or(0)
    }

    pub fn set_flags(&self, f: u16) {
        self.m.write_u16(self.off + FLAGS_OFF, f);
    }

    fn counter(&self, at: usize) -> u16 {
        self.m
            .atomic_u16(self.off + at)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }

    fn set_counter(&self, at: usize, v: u16) {
        if let Some(a) = self.m.atomic_u16(self.off + at) {
            a.store(v, Ordering::Release);
        }
    }

    pub fn head(&self) -> u16 {
        self.counter(HEAD_OFF)
    }

    pub fn tail(&self) -> u16 {
        self.counter(TAIL_OFF)
    }

    pub fn set_head(&self, v: u16) {
        self.set_counter(HEAD_OFF, v)
    }

    pub fn set_tail(&self, v: u16) {
        self.set_counter(TAIL_OFF, v)
    }

    /// A fresh ring: cookie, flags, head and tail (the client does this).
    pub fn init(&self) {
        self.m.write_u32(self.off + COOKIE_OFF, crate::msg::COOKIE);
        self.set_flags(0);
        self.set_head(0);
        self.set_tail(0);
    }

    fn desc_off(&self, slot: u16) -> usize {
        self.off + HDR_LEN + DESC_LEN * (slot & self.mask) as usize
    }

    /// The descriptor at `slot` (masked), read once.
    pub fn desc(&self, slot: u16) -> Desc {
        Desc::from_bytes(self.m.read_16(self.desc_off(slot)).unwrap_or([0; 16]))
    }

    pub fn set_desc(&self, slot: u16, d: Desc) {
        let o = self.desc_off(slot);
        self.m
            .write_u32(o, u32::from(d.flags) | (u32::from(d.region) << 16));
        self.m.write_u32(o + 4, d.length);
        self.m.write_u32(o + 8, d.offset);
        self.m.write_u32(o + 12, d.metadata);
    }

    /// Writes only a descriptor's flags and length (what a producer fills in).
    pub fn set_desc_len(&self, slot: u16, flags: u16, length: u32) {
        let o = self.desc_off(slot);
        self.m.write_u16(o, flags);
        self.m.write_u32(o + 4, length);
    }

    /// Prefetches the first line of the buffer the descriptor at `slot` points to (the
    /// peer wrote it from another core: the copy would otherwise wait for each line in
    /// turn). The descriptor is read again, and checked, when the frame is taken.
    fn prefetch_buffer(&self, regions: &[Mapping], slot: u16, write: bool) {
        let d = self.desc(slot);
        if let Some(m) = regions.get(d.region as usize) {
            m.prefetch(d.offset as usize, write);
        }
    }

    /// Checks a counter distance the peer caused.
    fn distance(&self, d: u16) -> Result<u16, Violation> {
        if d > self.size {
            Err(Violation::Distance(d, self.size))
        } else {
            Ok(d)
        }
    }
}

/// Where received frames go: one contiguous arena, frames packed one after another,
/// reused every batch (no allocation on the data path).
pub struct Arena {
    pub buf: Vec<u8>,
    pub spans: Vec<(u32, u32)>,
    used: usize,
    max_frames: usize,
}

impl Arena {
    pub fn new(max_frames: usize, bytes: usize) -> Self {
        Self {
            buf: vec![0; bytes + desc::MAX_FRAME + 64],
            spans: Vec::with_capacity(max_frames),
            used: 0,
            max_frames,
        }
    }

    pub fn clear(&mut self) {
        self.spans.clear();
        self.used = 0;
    }

    /// Room for one more frame of any size.
    pub fn has_room(&self) -> bool {
        self.spans.len() < self.max_frames && self.buf.len() - self.used >= desc::MAX_FRAME + 64
    }

    pub fn frames(&self) -> impl Iterator<Item = &[u8]> {
        self.spans
            .iter()
            .map(|&(s, l)| &self.buf[s as usize..s as usize + l as usize])
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// Counters of one direction of the data path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataStats {
    pub frames: u64,
    pub bytes: u64,
    /// Frames that found no room (transmit: ring full or peer's buffers too small).
    pub dropped: u64,
    /// Frames refused for a bad descriptor, by `DescError` index.
    pub bad: [u64; 5],
}

/// Copies the frame whose chain starts at `slot` (of `avail` readable slots) into the
/// arena after `prefix` bytes the caller reserves (IP mode's Ethernet header). Returns
/// the slots it used and the result; `None` if the chain is not complete yet.
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn read_frame(
    ring: &Ring,
    regions: &[Mapping],
    sizes: &[usize],
    max_len: u32,
    slot: u16,
    avail: u16,
    arena: &mut Arena,
    prefix: usize,
) -> Option<(u16, Result<(usize, usize), DescError>)> {
    // The common case, a frame in one buffer: checked and copied without gathering a
    // chain.
    let first = ring.desc(slot);
    if !first.next() {
        let start = arena.used;
        return Some((
            1,
            desc::check(&first, sizes, max_len).and_then(|(r, off, len)| {
                let dst = &mut arena.buf[start + prefix..start + prefix + len];
                match regions.get(r) {
                    Some(m) if m.copy_out(off, dst) => Ok((start, len + prefix)),
                    _ => Err(DescError::Bounds),
                }
            }),
        ));
    }
    let mut chain = [Desc::default(); MAX_CHAIN];
    let mut n = 0usize;
    loop {
        if n as u16 >= avail {
            // The chain goes on past what the peer published: wait for the rest, unless
            // it already fills the ring (it never ends).
            return if avail >= ring.size {
                Some((avail, Err(DescError::ChainTooLong)))
            } else {
                None
            };
        }
        let d = ring.desc(slot.wrapping_add(n as u16));
        if n == MAX_CHAIN {
            // Consume up to the chain's end (or what is there) and drop it.
            let mut used = n as u16 + 1;
            let mut d = d;
            while d.next() && used < avail {
                d = ring.desc(slot.wrapping_add(used));
                used += 1;
            }
            return Some((used, Err(DescError::ChainTooLong)));
        }
        chain[n] = d;
        n += 1;
        if !d.next() {
            break;
        }
    }
    let used = n as u16;
    let total = match desc::check_chain(&chain[..n], sizes, max_len) {
        Ok(t) => t,
        Err(e) => return Some((used, Err(e))),
    };
    let start = arena.used;
    let mut at = start + prefix;
    for d in &chain[..n] {
        let (r, off, len) = (d.region as usize, d.offset as usize, d.length as usize);
        let Some(m) = regions.get(r) else {
            return Some((used, Err(DescError::Region)));
        };
        if !m.copy_out(off, &mut arena.buf[at..at + len]) {
            return Some((used, Err(DescError::Bounds)));
        }
        at += len;
    }
    Some((used, Ok((start, total + prefix))))
}

/// Receives from a ring the other side produces (server on C2S: `peer_is_head`; client
/// on S2C: the peer moves `tail`). `last` is our position. Frames go to the arena until
/// it is full; returns the frames taken.
#[allow(clippy::too_many_arguments)]
pub fn receive(
    ring: &Ring,
    regions: &[Mapping],
    sizes: &[usize],
    max_len: u32,
    last: &mut u16,
    peer_is_head: bool,
    arena: &mut Arena,
    prefix: usize,
    fixup: &mut dyn FnMut(&mut [u8]) -> bool,
    stats: &mut DataStats,
) -> Result<usize, Violation> {
    let published = if peer_is_head {
        ring.head()
    } else {
        ring.tail()
    };
    let mut avail = ring.distance(published.wrapping_sub(*last))?;
    let mut taken = 0;
    let mut slot = *last;
    for k in 0..avail.min(PREFETCH) {
        ring.prefetch_buffer(regions, slot.wrapping_add(k), false);
    }
    while avail > 0 && arena.has_room() {
        if avail > PREFETCH {
            ring.prefetch_buffer(regions, slot.wrapping_add(PREFETCH), false);
        }
        let Some((used, r)) = read_frame(ring, regions, sizes, max_len, slot, avail, arena, prefix)
        else {
            break;
        };
        slot = slot.wrapping_add(used);
        avail -= used;
        match r {
            Ok((start, len)) => {
                if fixup(&mut arena.buf[start..start + len]) {
                    arena.spans.push((start as u32, len as u32));
                    arena.used = (start + len + 63) & !63;
                    stats.frames += 1;
                    stats.bytes += len as u64;
                    taken += 1;
                } else {
                    stats.dropped += 1;
                }
            }
            Err(e) => stats.bad[e.index()] += 1,
        }
    }
    *last = slot;
    if peer_is_head {
        // Slots given back to the client.
        ring.set_tail(slot);
    }
    Ok(taken)
}

/// The client's refill of a ring it receives from (S2C): offers every free slot again
/// with its own buffer (`buffer(slot)` gives region and offset), moving `head`.
pub fn refill(
    ring: &Ring,
    head: &mut u16,
    last: u16,
    buffer: &dyn Fn(u16) -> (u16, u32),
    len: u32,
) {
    let free = ring.size.wrapping_sub(head.wrapping_sub(last));
    if free == 0 || free > ring.size {
        return;
    }
    for _ in 0..free {
        let (region, offset) = buffer(*head & (ring.size - 1));
        ring.set_desc(
            *head,
            Desc {
                flags: 0,
                region,
                length: len,
                offset,
                metadata: 0,
            },
        );
        *head = head.wrapping_add(1);
    }
    ring.set_head(*head);
}

/// Where a producer's buffers come from.
pub enum TxBuffers<'b> {
    /// The client's own: slot → (region, offset), each `len` bytes; descriptors are
    /// written whole, and `head` is ours.
    Own {
        buffer: &'b dyn Fn(u16) -> (u16, u32),
        len: u32,
    },
    /// The server's: whatever the client offered in each descriptor (checked), and
    /// `tail` is ours.
    Offered,
}

/// Sends frames on a ring this side produces; `pos` is our counter (C2S head for the
/// client, S2C tail for the server). Frames larger than a buffer are chained. Returns
/// how many were taken; the rest did not fit and are counted as dropped.
#[allow(clippy::too_many_arguments)]
pub fn send(
    ring: &Ring,
    regions: &[Mapping],
    sizes: &[usize],
    pos: &mut u16,
    bufs: &TxBuffers,
    frames: &mut dyn Iterator<Item = &[u8]>,
    strip: usize,
    stats: &mut DataStats,
) -> Result<usize, Violation> {
    let mut free = match bufs {
        TxBuffers::Own { .. } => {
            let inflight = ring.distance(pos.wrapping_sub(ring.tail()))?;
            ring.size - inflight
        }
        TxBuffers::Offered => ring.distance(ring.head().wrapping_sub(*pos))?,
    };
    let mut slot = *pos;
    let mut sent = 0;
    let prefetch = |s: u16| match bufs {
        TxBuffers::Own { buffer, .. } => {
            let (r, o) = buffer(s & (ring.size - 1));
            if let Some(m) = regions.get(r as usize) {
                m.prefetch(o as usize, true);
            }
        }
        TxBuffers::Offered => ring.prefetch_buffer(regions, s, true),
    };
    for k in 0..free.min(PREFETCH) {
        prefetch(slot.wrapping_add(k));
    }
    for f in frames {
        let mut data = f.get(strip..).unwrap_or_default();
        if free == 0 {
            stats.dropped += 1;
            continue;
        }
        if free > PREFETCH {
            prefetch(slot.wrapping_add(PREFETCH));
        }
        let start = slot;
        let mut ok = true;
        let mut used = 0u16;
        loop {
            if used == free || used as usize == MAX_CHAIN {
                ok = false;
                break;
            }
            let s = slot.wrapping_add(used);
            let (region, offset, cap) = match bufs {
                TxBuffers::Own { buffer, len } => {
                    let (r, o) = buffer(s & (ring.size - 1));
                    (r as usize, o as usize, *len as usize)
                }
                TxBuffers::Offered => match desc::check(&ring.desc(s), sizes, u32::MAX) {
                    Ok(x) => x,
                    Err(e) => {
                        stats.bad[e.index()] += 1;
                        ok = false;
                        break;
                    }
                },
            };
            let n = data.len().min(cap);
            if cap == 0
                || !regions
                    .get(region)
                    .is_some_and(|m| m.copy_in(offset, &data[..n]))
            {
                ok = false;
                break;
            }
            data = &data[n..];
            let more = !data.is_empty();
            let flags = if more { desc::DESC_FLAG_NEXT } else { 0 };
            match bufs {
                TxBuffers::Own { .. } => ring.set_desc(
                    s,
                    Desc {
                        flags,
                        region: region as u16,
                        length: n as u32,
                        offset: offset as u32,
                        metadata: 0,
                    },
                ),
                TxBuffers::Offered => ring.set_desc_len(s, flags, n as u32),
            }
            used += 1;
            if !more {
                break;
            }
        }
        if !ok {
            slot = start;
            stats.dropped += 1;
            continue;
        }
        slot = slot.wrapping_add(used);
        free -= used;
        sent += 1;
        stats.frames += 1;
        stats.bytes += f.len().saturating_sub(strip) as u64;
    }
    if slot != *pos {
        *pos = slot;
        match bufs {
            TxBuffers::Own { .. } => ring.set_head(slot),
            TxBuffers::Offered => ring.set_tail(slot),
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests;
