//! Packet buffers: pre-allocated frames with headroom, and per-packet metadata beside them.
//!
//! A packet is named by its frame index (`u32`), which is all a vector carries: moving a
//! packet between nodes copies four bytes. Frames are `FRAME_STRIDE` bytes apart, not
//! 2048: buffers on a power-of-two stride alias onto a few cache sets, and padding the
//! stride halved the cost of touching packets on this machine (PLATFORM.md).

/// Distance between frames.
pub const FRAME_STRIDE: usize = 2176;
/// Bytes kept free in front of a received packet so that encapsulation prepends its
/// headers in place. The largest encapsulation is VXLAN over IPv6: 14 + 40 + 8 + 8 = 70.
pub const HEADROOM: usize = 128;
/// The largest packet a frame holds.
pub const MAX_PACKET: usize = FRAME_STRIDE - HEADROOM;

/// Where a packet's bytes are in its frame, and its metadata.
#[derive(Debug, Clone, Copy, Default)]
pub struct Header<M> {
    offset: u16,
    len: u16,
    pub meta: M,
}

/// Where packet `pkt`'s bytes are in the pool's memory.
#[inline(always)]
fn span<M>(pkt: u32, h: &Header<M>) -> core::ops::Range<usize> {
    let start = pkt as usize * FRAME_STRIDE + h.offset as usize;
    start..start + h.len as usize
}

/// A fixed set of frames and their headers; the free list is a stack, so the frames used
/// most recently (warm in cache) are used again first.
pub struct PacketPool<M> {
    mem: Box<[u8]>,
    headers: Box<[Header<M>]>,
    free: Vec<u32>,
}

impl<M: Copy + Default> PacketPool<M> {
    /// A pool of `frames` frames (at least one).
    pub fn new(frames: usize) -> Self {
        let frames = frames.max(1);
        Self {
            mem: vec![0u8; frames * FRAME_STRIDE].into_boxed_slice(),
            headers: vec![Header::default(); frames].into_boxed_slice(),
            free: (0..frames as u32).rev().collect(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.headers.len()
    }

    pub fn available(&self) -> usize {
        self.free.len()
    }

    /// Takes a frame holding a copy of `bytes` (which must fit: `MAX_PACKET`) after the
    /// headroom, with default metadata.
    pub fn alloc_with(&mut self, bytes: &[u8]) -> Option<u32> {
        self.alloc_with_parts(&[bytes])
    }

    /// Like [`Self::alloc_with`], for a packet given in pieces (headers, then payload).
    pub fn alloc_with_parts(&mut self, parts: &[&[u8]]) -> Option<u32> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > MAX_PACKET {
            return None;
        }
        let i = self.free.pop()?;
        let mut at = i as usize * FRAME_STRIDE + HEADROOM;
        for p in parts {
            self.mem[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        self.headers[i as usize] = Header {
            offset: HEADROOM as u16,
            len: len as u16,
            meta: M::default(),
        };
        Some(i)
    }

    /// A new frame with the same bytes and metadata (replication).
    pub fn duplicate(&mut self, pkt: u32) -> Option<u32> {
        let h = *self.headers.get(pkt as usize)?;
        let i = self.free.pop()?;
        let (from, to) = (pkt as usize * FRAME_STRIDE, i as usize * FRAME_STRIDE);
        let range = h.offset as usize..h.offset as usize + h.len as usize;
        self.mem
            .copy_within(from + range.start..from + range.end, to + range.start);
        self.headers[i as usize] = h;
        Some(i)
    }

    /// Returns frames to the pool.
    pub fn free(&mut self, pkts: &[u32]) {
        self.free.extend_from_slice(pkts);
    }

    #[inline]
    pub fn len(&self, pkt: u32) -> usize {
        self.headers[pkt as usize].len as usize
    }

    #[inline]
    pub fn data(&self, pkt: u32) -> &[u8] {
        &self.mem[span(pkt, &self.headers[pkt as usize])]
    }

    #[inline]
    pub fn data_mut(&mut self, pkt: u32) -> &mut [u8] {
        &mut self.mem[span(pkt, &self.headers[pkt as usize])]
    }

    #[inline]
    pub fn meta(&self, pkt: u32) -> &M {
        &self.headers[pkt as usize].meta
    }

    #[inline]
    pub fn meta_mut(&mut self, pkt: u32) -> &mut M {
        &mut self.headers[pkt as usize].meta
    }

    /// Metadata and bytes at once (a node reads one and writes the other).
    #[inline]
    pub fn split_mut(&mut self, pkt: u32) -> (&mut M, &mut [u8]) {
        let h = &mut self.headers[pkt as usize];
        let at = span(pkt, h);
        (&mut h.meta, &mut self.mem[at])
    }

    /// Metadata and bytes to read at once (one look at the packet's header).
    #[inline]
    pub fn view(&self, pkt: u32) -> (&M, &[u8]) {
        let h = &self.headers[pkt as usize];
        (&h.meta, &self.mem[span(pkt, h)])
    }

    /// Cuts the packet to its first `len` bytes and grows it at the front by `push`
    /// (room for headers to be written), then lends its metadata and bytes: what
    /// [`Self::truncate`], [`Self::push_front`] and [`Self::split_mut`] do, with one look
    /// at the packet's header, for a path that does all three per packet. `None`, and
    /// nothing changed, if the packet is shorter than `len` or the headroom than `push`.
    #[inline]
    pub fn reframe(&mut self, pkt: u32, push: usize, len: usize) -> Option<(&mut M, &mut [u8])> {
        let h = &mut self.headers[pkt as usize];
        if len > h.len as usize || push > h.offset as usize {
            return None;
        }
        h.offset -= push as u16;
        h.len = (push + len) as u16;
        let at = span(pkt, h);
        Some((&mut h.meta, &mut self.mem[at]))
    }

    /// Grows the packet at the front by `n` bytes (for headers to be written); false if
    /// the headroom is too small.
    #[inline]
    pub fn push_front(&mut self, pkt: u32, n: usize) -> bool {
        let h = &mut self.headers[pkt as usize];
        if n > h.offset as usize {
            return false;
        }
        h.offset -= n as u16;
        h.len += n as u16;
        true
    }

    /// Removes `n` bytes from the front (a stripped header); false if shorter.
    #[inline]
    pub fn pull_front(&mut self, pkt: u32, n: usize) -> bool {
        let h = &mut self.headers[pkt as usize];
        if n > h.len as usize {
            return false;
        }
        h.offset += n as u16;
        h.len -= n as u16;
        true
    }

    /// Grows the packet at the end by `n` bytes (their content is whatever the frame
    /// held); false if the frame is too small.
    #[inline]
    pub fn extend(&mut self, pkt: u32, n: usize) -> bool {
        let h = &mut self.headers[pkt as usize];
        if h.offset as usize + h.len as usize + n > FRAME_STRIDE {
            return false;
        }
        h.len += n as u16;
        true
    }

    /// Cuts the packet to `len` bytes (trailing padding); false if it is shorter.
    #[inline]
    pub fn truncate(&mut self, pkt: u32, len: usize) -> bool {
        let h = &mut self.headers[pkt as usize];
        if len > h.len as usize {
            return false;
        }
        h.len = len as u16;
        true
    }

    /// Asks the CPU to start loading a packet's header and first bytes. Where a received
    /// packet starts (after the headroom) stands for where it starts now: reading its
    /// offset would wait for the header line this is to prefetch (a stall the size of
    /// a cache miss, per packet); a packet's first bytes moved by a header or two are
    /// on that line or the next.
    #[inline]
    pub fn prefetch(&self, pkt: u32) {
        let i = pkt as usize;
        if let Some(h) = self.headers.get(i) {
            ovr_tables::prefetch::prefetch(h);
        }
        if let Some(b) = self.mem.get(i * FRAME_STRIDE + HEADROOM) {
            ovr_tables::prefetch::prefetch(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_headroom_takes_headers() {
        let mut p: PacketPool<u32> = PacketPool::new(4);
        let a = p.alloc_with(&[1, 2, 3]).unwrap();
        *p.meta_mut(a) = 7;
        assert_eq!(p.data(a), &[1, 2, 3]);
        assert!(p.push_front(a, 2));
        p.data_mut(a)[..2].copy_from_slice(&[9, 9]);
        assert_eq!(p.data(a), &[9, 9, 1, 2, 3]);
        assert!(p.pull_front(a, 3));
        assert_eq!(p.data(a), &[2, 3]);
        assert!(!p.push_front(a, HEADROOM + 2));
        assert!(!p.pull_front(a, 3));
        let b = p.duplicate(a).unwrap();
        assert_eq!((p.data(b), *p.meta(b)), (&[2u8, 3][..], 7));
        assert_eq!(p.available(), 2);
        p.free(&[a, b]);
        assert_eq!(p.available(), 4);
    }

    #[test]
    fn a_full_pool_and_an_oversized_packet_are_refused() {
        let mut p: PacketPool<()> = PacketPool::new(1);
        assert!(p.alloc_with(&vec![0; MAX_PACKET + 1]).is_none());
        let a = p.alloc_with(&vec![0; MAX_PACKET]).unwrap();
        assert!(p.alloc_with(&[1]).is_none());
        assert!(p.duplicate(a).is_none());
        assert!(p.truncate(a, 60) && p.len(a) == 60);
    }

    #[test]
    fn reframe_cuts_and_grows_as_truncate_and_push_front_do() {
        let mut p: PacketPool<u32> = PacketPool::new(2);
        let a = p.alloc_with(&[1, 2, 3, 4, 5]).unwrap();
        *p.meta_mut(a) = 7;
        assert_eq!(p.view(a), (&7, &[1u8, 2, 3, 4, 5][..]));
        // Longer than the packet, or more than the headroom: refused, nothing changed.
        assert!(p.reframe(a, 0, 6).is_none());
        assert!(p.reframe(a, HEADROOM + 1, 5).is_none());
        assert_eq!(p.data(a), &[1, 2, 3, 4, 5]);
        let (meta, data) = p.reframe(a, 2, 3).unwrap();
        assert_eq!(*meta, 7);
        assert_eq!(data.len(), 5);
        data[..2].copy_from_slice(&[9, 8]);
        assert_eq!(p.data(a), &[9, 8, 1, 2, 3]);
        let b = p.alloc_with(&[1, 2, 3, 4, 5]).unwrap();
        assert!(p.truncate(b, 3) && p.push_front(b, 2));
        p.data_mut(b)[..2].copy_from_slice(&[9, 8]);
        assert_eq!(p.data(a), p.data(b));
    }
}
