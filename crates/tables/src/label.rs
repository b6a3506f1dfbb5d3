//! The MPLS incoming label map (ILM): label → next hop, for packets that arrive in
//! MPLS-over-UDP or MPLS-over-GRE.

use crate::ids::NextHopId;

/// Labels are 20 bits (RFC 3032 section 2.1).
pub const LABEL_SPACE: usize = 1 << 20;
/// Labels 0-15 are reserved (RFC 3032 section 2.1, RFC 7274) and never map to a next hop.
pub const FIRST_UNRESERVED_LABEL: u32 = 16;

/// Direct-indexed: one memory access per lookup. The 4 MiB array is allocated on the
/// first insert, zeroed (calloc), so only the pages holding labels in use take memory and
/// an empty table (every new copy of the forwarding state) costs nothing.
#[derive(Clone)]
pub struct LabelTable {
    /// 0 = no entry; otherwise the next-hop id plus one.
    slots: Vec<u32>,
    len: usize,
}

impl Default for LabelTable {
    fn default() -> Self {
        Self {
            slots: vec![0; LABEL_SPACE],
            len: 0,
        }
    }
}

impl core::fmt::Debug for LabelTable {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LabelTable")
            .field("len", &self.len)
            .finish()
    }
}

impl LabelTable {
    /// The next hop of `label`, if it is mapped.
    #[inline]
    pub fn lookup(&self, label: u32) -> Option<NextHopId> {
        match self.slots.get(label as usize).copied() {
            None | Some(0) => None,
            Some(v) => Some(NextHopId(v - 1)),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every mapped label, in label order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, NextHopId)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0)
            .map(|(l, v)| (l as u32, NextHopId(v - 1)))
    }

    /// Maps `label` (validated by the caller: unreserved, in range), returning the
    /// next hop it replaced.
    pub(crate) fn insert(&mut self, label: u32, nh: NextHopId) -> Option<NextHopId> {
        let old = self.lookup(label);
        if self.slots.is_empty() {
            self.slots = vec![0; LABEL_SPACE];
        }
        if let Some(slot) = self.slots.get_mut(label as usize) {
            *slot = nh.0 + 1;
            if old.is_none() {
                self.len += 1;
            }
        }
        old
    }

    pub(crate) fn remove(&mut self, label: u32) -> Option<NextHopId> {
        let old = self.lookup(label)?;
        self.slots[label as usize] = 0;
        self.len -= 1;
        Some(old)
    }
}
