//! The bridge (MAC) table of one virtual network: destination MAC → next hop (a local
//! workload interface or a tunnel to the VTEP behind which the MAC lives).

use crate::ids::NextHopId;
use ovr_wire::ethernet::MacAddr;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes a MAC address with one multiply: the keys are six bytes, SipHash's
/// per-lookup cost buys nothing here (entries are programmed, not learned from the
/// wire, so there is no hash-flooding input).
#[derive(Default)]
pub struct MacHasher(u64);

impl Hasher for MacHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
        self.0 = self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
}

/// MAC → next hop for one virtual network.
#[derive(Debug, Clone, Default)]
pub struct BridgeTable {
    entries: HashMap<MacAddr, NextHopId, BuildHasherDefault<MacHasher>>,
}

impl BridgeTable {
    #[inline]
    pub fn lookup(&self, mac: &MacAddr) -> Option<NextHopId> {
        self.entries.get(mac).copied()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&MacAddr, &NextHopId)> {
        self.entries.iter()
    }

    pub(crate) fn insert(&mut self, mac: MacAddr, nh: NextHopId) -> Option<NextHopId> {
        self.entries.insert(mac, nh)
    }

    pub(crate) fn remove(&mut self, mac: &MacAddr) -> Option<NextHopId> {
        self.entries.remove(mac)
    }
}
