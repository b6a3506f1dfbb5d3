//! Which tunnel's outer headers sit at which index of the kernel's `ovr_tpls` array.
//!
//! A flow that encapsulates names its tunnel's headers by index, so the flow map's
//! entries carry four bytes instead of a 64-byte copy each (64 bytes of value instead of
//! 120: the kernel allocates 192 bytes per flow instead of 256, and an encapsulated
//! frame reads one cache line less). Headers are found by their bytes: flows of one
//! tunnel share an index whatever worker offered them, and headers that change (a
//! neighbour's new MAC) take a new index, never overwriting one a flow still names.
//!
//! An index is taken back only when no flow names it: found by reading the flow map,
//! which is done only when the array is full (at most once a second), and the index is
//! handed out again a second later still, so that a frame that read a flow just removed
//! still finds its headers unchanged.

use crate::layout::TPL_LEN;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

pub(super) type Headers = [u8; TPL_LEN];

/// How long an index no flow names stays unused, and how often the flow map may be read
/// to find such indexes.
const QUARANTINE: Duration = Duration::from_secs(1);

pub(super) struct Templates {
    index: HashMap<Headers, u32>,
    /// Indexes never handed out: `next..capacity`.
    next: u32,
    capacity: u32,
    /// Indexes no flow names, usable from the given instant.
    freed: VecDeque<(u32, Instant)>,
    collected: Option<Instant>,
}

impl Templates {
    pub(super) fn new(capacity: u32) -> Self {
        Self {
            index: HashMap::new(),
            next: 0,
            capacity,
            freed: VecDeque::new(),
            collected: None,
        }
    }

    /// The index of `headers`: theirs already, or a free one they are written at first
    /// (`write`). `Ok(None)`: the array is full (see [`Self::collect`]).
    pub(super) fn place<E>(
        &mut self,
        headers: &Headers,
        now: Instant,
        write: impl FnOnce(u32, &Headers) -> Result<(), E>,
    ) -> Result<Option<u32>, E> {
        if let Some(&i) = self.index.get(headers) {
            return Ok(Some(i));
        }
        let i = if self.next < self.capacity {
            self.next += 1;
            self.next - 1
        } else if self.freed.front().is_some_and(|(_, at)| *at <= now) {
            self.freed.pop_front().map_or(0, |(i, _)| i)
        } else {
            return Ok(None);
        };
        if let Err(e) = write(i, headers) {
            // Not written: the index is still free.
            self.freed.push_front((i, now));
            return Err(e);
        }
        self.index.insert(*headers, i);
        Ok(Some(i))
    }

    /// Whether the flow map may be read for the indexes in use now: the array is full
    /// and was not looked at within the last second.
    pub(super) fn may_collect(&self, now: Instant) -> bool {
        self.next >= self.capacity
            && self
                .collected
                .is_none_or(|t| now.duration_since(t) >= QUARANTINE)
    }

    /// Keeps the indexes the flows name (`used`); the others are handed out again after
    /// [`QUARANTINE`]. An index in use not known here (flows an earlier ovrd left) is
    /// read back (`read`) so that new flows of that tunnel share it.
    pub(super) fn collect(
        &mut self,
        used: &HashSet<u32>,
        now: Instant,
        read: impl Fn(u32) -> Option<Headers>,
    ) {
        self.collected = Some(now);
        let free_at = now + QUARANTINE;
        let mut freed = Vec::new();
        self.index.retain(|_, i| {
            let keep = used.contains(i);
            if !keep {
                freed.push(*i);
            }
            keep
        });
        self.read_back(used, read);
        freed.sort_unstable();
        self.freed.extend(freed.into_iter().map(|i| (i, free_at)));
    }

    /// Learns the headers of the indexes in `used` not known here (`read`).
    fn read_back(&mut self, used: &HashSet<u32>, read: impl Fn(u32) -> Option<Headers>) {
        let known: HashSet<u32> = self.index.values().copied().collect();
        for &i in used
            .iter()
            .filter(|i| !known.contains(i) && **i < self.capacity)
        {
            if let Some(h) = read(i) {
                self.index.entry(h).or_insert(i);
            }
        }
    }

    /// After adopting an earlier ovrd's maps: the indexes its flows name are kept (and
    /// read back), every other one is free at once (no frame of this ovrd ever read it).
    pub(super) fn adopt(
        &mut self,
        used: &HashSet<u32>,
        now: Instant,
        read: impl Fn(u32) -> Option<Headers>,
    ) {
        self.next = self.capacity;
        self.read_back(used, read);
        self.freed = (0..self.capacity)
            .filter(|i| !used.contains(i))
            .map(|i| (i, now))
            .collect();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.index.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(n: u8) -> Headers {
        let mut b = [0; TPL_LEN];
        b[30] = n;
        b
    }

    fn place(
        t: &mut Templates,
        n: u8,
        now: Instant,
        array: &mut HashMap<u32, Headers>,
    ) -> Option<u32> {
        t.place(&h(n), now, |i, b| {
            array.insert(i, *b);
            Ok::<_, ()>(())
        })
        .unwrap()
    }

    /// The same headers share an index; others take another; a full array hands out
    /// an index no flow names only a second after it was found unused, and never one in
    /// use.
    #[test]
    fn headers_share_an_index_and_one_comes_back_only_when_unused_and_quarantined() {
        let (mut t, mut array) = (Templates::new(2), HashMap::new());
        let t0 = Instant::now();
        let a = place(&mut t, 1, t0, &mut array).unwrap();
        assert_eq!(place(&mut t, 1, t0, &mut array), Some(a));
        let b = place(&mut t, 2, t0, &mut array).unwrap();
        assert_ne!(a, b);
        assert_eq!(place(&mut t, 3, t0, &mut array), None, "full");
        assert!(t.may_collect(t0));
        // Only b is still named by a flow.
        t.collect(&HashSet::from([b]), t0, |i| array.get(&i).copied());
        assert!(!t.may_collect(t0), "at most once a second");
        assert_eq!(place(&mut t, 3, t0, &mut array), None, "quarantined");
        let t1 = t0 + QUARANTINE;
        assert_eq!(place(&mut t, 3, t1, &mut array), Some(a));
        assert_eq!(array[&a], h(3));
        assert_eq!(place(&mut t, 2, t1, &mut array), Some(b), "kept");
        assert_eq!(t.len(), 2);
    }

    /// A write that fails leaves the index free.
    #[test]
    fn a_failed_write_places_nothing() {
        let mut t = Templates::new(1);
        let now = Instant::now();
        assert_eq!(t.place(&h(1), now, |_, _| Err("no")), Err("no"));
        assert_eq!(t.place(&h(1), now, |_, _| Ok::<_, ()>(())), Ok(Some(0)));
    }

    /// Adopted flows keep their headers' indexes (read back and shared by new flows);
    /// the rest are free at once.
    #[test]
    fn adopted_indexes_are_kept_and_the_rest_free() {
        let mut array = HashMap::from([(3u32, h(7))]);
        let mut t = Templates::new(4);
        let now = Instant::now();
        t.adopt(&HashSet::from([3]), now, |i| array.get(&i).copied());
        assert_eq!(place(&mut t, 7, now, &mut array), Some(3));
        let mut got: Vec<u32> = (8..11)
            .map(|n| place(&mut t, n, now, &mut array).unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, [0, 1, 2]);
        assert_eq!(place(&mut t, 11, now, &mut array), None);
    }
}
