//! The bridge (MAC) table of one virtual network: destination MAC → next hop (a local
//! workload interface or a tunnel to the VTEP behind which the MAC lives).

use crate::fasthash::FastMap;
use crate::ids::NextHopId;
use ovr_wire::ethernet::MacAddr;

/// MAC → next hop for one virtual network.
#[derive(Debug, Clone, Default)]
pub struct BridgeTable {
    entries: FastMap<MacAddr, NextHopId>,
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
