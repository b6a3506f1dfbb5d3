//! Entries learnt from peers (EVPN type 2: a MAC's bridge entry, an address's host
//! route), held beside the configuration rather than in it.
//!
//! They are many (a datacenter's MACs, 100,000 and more) and soft: their source gives
//! them all again after any restart. So they skip what a configured entry costs — the
//! model with its reference checks, the state file — and go from the learning straight
//! to table ops (a fifth of ovrd's CPU per route, bench/RESULTS.md). They are kept by
//! name (network, next hop) and resolved to ids when installed, so that a whole install
//! that renumbers nothing also needs nothing from them; a configured entry with the same
//! key wins over a learnt one.

use ovr_tables::prefix::IpPrefix;
use ovr_wire::ethernet::MacAddr;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A learnt entry's key within its network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LearntKey {
    Bridge(MacAddr),
    Route(IpPrefix),
}

/// One learnt entry now through `nexthop` (None: no longer learnt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearntChange {
    pub network: Arc<str>,
    pub key: LearntKey,
    pub nexthop: Option<Arc<str>>,
}

/// Entries of one kind by network, each with the name of its next hop.
type ByNetwork<K> = BTreeMap<Arc<str>, BTreeMap<K, Arc<str>>>;

/// The learnt entries, by network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Learnt {
    bridge: ByNetwork<MacAddr>,
    routes: ByNetwork<IpPrefix>,
}

fn set<K: Ord>(
    m: &mut ByNetwork<K>,
    network: &Arc<str>,
    k: K,
    nexthop: Option<Arc<str>>,
) -> Option<Arc<str>> {
    match nexthop {
        Some(nh) => match m.get_mut(&**network) {
            Some(entries) => entries.insert(k, nh),
            None => {
                m.insert(Arc::clone(network), BTreeMap::from([(k, nh)]));
                None
            }
        },
        None => {
            let entries = m.get_mut(&**network)?;
            let old = entries.remove(&k);
            if entries.is_empty() {
                m.remove(&**network);
            }
            old
        }
    }
}

impl Learnt {
    /// Makes `network`'s entry `key` go through `nexthop` (None: removes it); the next
    /// hop it had before.
    pub fn set(
        &mut self,
        network: &Arc<str>,
        key: LearntKey,
        nexthop: Option<Arc<str>>,
    ) -> Option<Arc<str>> {
        match key {
            LearntKey::Bridge(mac) => set(&mut self.bridge, network, mac, nexthop),
            LearntKey::Route(p) => set(&mut self.routes, network, p, nexthop),
        }
    }

    /// The next hop of `network`'s entry `key`.
    pub fn get(&self, network: &str, key: LearntKey) -> Option<&Arc<str>> {
        match key {
            LearntKey::Bridge(mac) => self.bridge.get(network)?.get(&mac),
            LearntKey::Route(p) => self.routes.get(network)?.get(&p),
        }
    }

    /// Bridge entries: network, MAC, next hop.
    pub fn bridge(&self) -> impl Iterator<Item = (&Arc<str>, MacAddr, &Arc<str>)> {
        self.bridge
            .iter()
            .flat_map(|(n, m)| m.iter().map(move |(mac, nh)| (n, *mac, nh)))
    }

    /// Routes: network, prefix, next hop.
    pub fn routes(&self) -> impl Iterator<Item = (&Arc<str>, IpPrefix, &Arc<str>)> {
        self.routes
            .iter()
            .flat_map(|(n, m)| m.iter().map(move |(p, nh)| (n, *p, nh)))
    }

    /// Every entry: network, key, next hop.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<str>, LearntKey, &Arc<str>)> {
        let bridge = self
            .bridge()
            .map(|(n, m, nh)| (n, LearntKey::Bridge(m), nh));
        let routes = self.routes().map(|(n, p, nh)| (n, LearntKey::Route(p), nh));
        bridge.chain(routes)
    }

    pub fn len(&self) -> usize {
        self.bridge.values().map(BTreeMap::len).sum::<usize>()
            + self.routes.values().map(BTreeMap::len).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.bridge.is_empty() && self.routes.is_empty()
    }
}
