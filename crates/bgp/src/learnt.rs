//! What a host learnt through BGP, and what it means for its networks. Routes are kept
//! by the neighbor they came from and their NLRI, so that a withdrawal or a lost session
//! removes exactly what came with it. `reach` reads them into remote reachability for the
//! networks the host imports (by route target): flood lists from type 3, bridge entries
//! and host routes from type 2 (a moved MAC follows the highest mobility sequence), and
//! prefixes from type 5 with every VTEP that advertises one (ECMP).

use crate::evpn::{Encap, Mac, Nlri, Route, RouteKey, RouteTarget};
use crate::gobgp::{Change, Learnt};
use crate::pernet::ByNet;
use core::net::IpAddr;
use ovr_tables::fasthash::FastMap;
use smallvec::SmallVec;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A remote VTEP as a network reaches it: where, how, with which VNI or label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Remote {
    pub vtep: IpAddr,
    pub encap: Encap,
    pub label: u32,
    /// A MAC's MPLS remote: the label of routed packets to its addresses.
    pub routed: Option<u32>,
}

impl Remote {
    /// Where bridged frames and flooded ones go (the routed label aside).
    pub fn bridging(&self) -> Remote {
        Remote {
            routed: None,
            ..*self
        }
    }

    /// Where routed packets to an address of this MAC go: the same VNI over VXLAN, the
    /// routed label over MPLS (None: not given).
    pub fn routing(&self) -> Option<Remote> {
        match self.encap {
            Encap::Vxlan => Some(self.bridging()),
            Encap::MplsOverGre | Encap::MplsOverUdp => self.routed.map(|label| Remote {
                label,
                routed: None,
                ..*self
            }),
        }
    }
}

/// Whether a MAC's route (sequence, remote) beats the best so far: the highest
/// sequence, then the lowest VTEP, then one with a routed label (a MAC/IP route over a
/// MAC-only one of the same VTEP), then the first.
fn better(seq: u32, r: &Remote, best: Option<&(u32, Remote)>) -> bool {
    best.is_none_or(|(s, cur)| {
        seq > *s
            || (seq == *s
                && (r.vtep < cur.vtep
                    || (r.vtep == cur.vtep && r.routed.is_some() && cur.routed.is_none())))
    })
}

/// Remote reachability of the imported networks, by network name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Where a network's broadcast and unknown unicast go.
    pub flood: BTreeMap<String, BTreeSet<Remote>>,
    /// Where a MAC is.
    pub macs: ByNet<Mac, Remote>,
    /// Workload addresses (host routes) and the MAC they belong to.
    pub hosts: ByNet<IpAddr, Mac>,
    /// Routed prefixes (address, length) and every VTEP advertising them.
    pub prefixes: BTreeMap<(String, IpAddr, u8), BTreeSet<Remote>>,
}

impl Reach {
    /// Every remote it uses, once per use (flood entry, MAC, prefix).
    pub fn remotes(&self) -> impl Iterator<Item = &Remote> {
        let flood = self.flood.values().flatten();
        let prefixes = self.prefixes.values().flatten();
        flood.chain(self.macs.values()).chain(prefixes)
    }
}

/// A route as the indexes name it: the neighbor it came from and its key.
type Key = (Arc<str>, RouteKey);

/// The keys under one MAC or address: one mostly, kept in the index's own slot (no
/// allocation of its own, no second cache line to fetch when a route comes or goes:
/// a tenth of ovrd's CPU per withdrawn route, bench/RESULTS.md).
type Keys = SmallVec<[Key; 1]>;

/// The routes learnt, and the refusals counted by reason.
///
/// Routes are hashed by key under their neighbor (a batch of 64 changes in a table of
/// 100,000 costs 64 lookups, not 64 searches comparing keys); what depends on their
/// order (`reach`, the indexes) reads them sorted by neighbor, then key.
#[derive(Debug, Default)]
pub struct Rib {
    routes: BTreeMap<Arc<str>, FastMap<RouteKey, Route>>,
    /// The type 2 routes by MAC and by address, sorted: what one MAC or address depends
    /// on (one or two routes each, mostly).
    by_mac: FastMap<Mac, Keys>,
    by_ip: FastMap<IpAddr, Keys>,
    /// Routes refused (`gobgp::decode`) or imported by no network, by reason.
    pub refused: BTreeMap<&'static str, u64>,
}

impl Rib {
    /// Takes one change from the speaker; ovr's own routes (no neighbor) are skipped.
    /// Returns whether what is learnt changed.
    pub fn apply(&mut self, l: &Learnt) -> bool {
        self.change(l).is_some()
    }

    /// Takes one change from the speaker, like `apply`; if what is learnt changed, the
    /// route as it was (None: absent). As it is now, it is `l`'s (none if withdrawn).
    pub fn change(&mut self, l: &Learnt) -> Option<Option<Route>> {
        if l.neighbor.is_empty() {
            return None;
        }
        let route = match &l.change {
            Ok(Change::Announced(r)) => r,
            Ok(Change::Withdrawn(key)) => {
                let table = self.routes.get_mut(l.neighbor.as_str())?;
                let old = table.remove(key)?;
                if table.is_empty() {
                    self.routes.remove(l.neighbor.as_str());
                }
                self.unindex(l.neighbor.as_str(), key);
                return Some(Some(old));
            }
            Err(refusal) => {
                *self.refused.entry(refusal.reason).or_default() += 1;
                return None;
            }
        };
        if !self.routes.contains_key(l.neighbor.as_str()) {
            self.routes
                .insert(Arc::from(l.neighbor.as_str()), FastMap::default());
        }
        let (neighbor, _) = self.routes.get_key_value(l.neighbor.as_str())?;
        let neighbor = Arc::clone(neighbor);
        let table = self.routes.get_mut(l.neighbor.as_str())?;
        let key = route.nlri.key();
        let old = match table.entry(key) {
            Entry::Occupied(mut o) => {
                if o.get() == route {
                    return None;
                }
                Some(o.insert(route.clone()))
            }
            Entry::Vacant(v) => {
                v.insert(route.clone());
                None
            }
        };
        if old.is_none() {
            self.index(&neighbor, key);
        }
        Some(old)
    }

    fn index(&mut self, neighbor: &Arc<str>, key: RouteKey) {
        if let RouteKey::MacIp { mac, ip, .. } = key {
            let k = (Arc::clone(neighbor), key);
            if let Some(ip) = ip {
                remember(self.by_ip.entry(ip).or_default(), k.clone());
            }
            remember(self.by_mac.entry(mac).or_default(), k);
        }
    }

    fn unindex(&mut self, neighbor: &str, key: &RouteKey) {
        if let RouteKey::MacIp { mac, ip, .. } = key {
            forget(&mut self.by_mac, mac, neighbor, key);
            if let Some(ip) = ip {
                forget(&mut self.by_ip, ip, neighbor, key);
            }
        }
    }

    /// Forgets what came from `neighbor` (its session went down): how many routes.
    pub fn drop_neighbor(&mut self, neighbor: &str) -> usize {
        let Some(gone) = self.routes.remove(neighbor) else {
            return 0;
        };
        for key in gone.keys() {
            self.unindex(neighbor, key);
        }
        gone.len()
    }

    /// The routes learnt, by the neighbor they came from and their key (in no order).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &RouteKey, &Route)> {
        self.routes
            .iter()
            .flat_map(|(n, t)| t.iter().map(move |(key, r)| (&**n, key, r)))
    }

    /// The routes sorted by neighbor, then key (the order `reach` decides in).
    fn sorted(&self) -> Vec<&Route> {
        let mut v = Vec::with_capacity(self.len());
        for t in self.routes.values() {
            let mut rs: Vec<(&RouteKey, &Route)> = t.iter().collect();
            rs.sort_unstable_by(|a, b| a.0.cmp(b.0));
            v.extend(rs.into_iter().map(|(_, r)| r));
        }
        v
    }

    /// The addresses type 2 routes give MAC `mac` (with repeats).
    pub fn ips_of(&self, mac: Mac) -> impl Iterator<Item = IpAddr> + '_ {
        self.by_mac
            .get(&mac)
            .into_iter()
            .flatten()
            .filter_map(|(_, key)| match key {
                RouteKey::MacIp { ip, .. } => *ip,
                _ => None,
            })
    }

    /// Where `reach` puts MAC `mac` of network `net`: what the type 2 routes for that MAC
    /// alone say (the same choice, `better`).
    pub fn mac_reach(
        &self,
        imports: &BTreeMap<RouteTarget, String>,
        own: IpAddr,
        net: &str,
        mac: Mac,
    ) -> Option<Remote> {
        let mut best: Option<(u32, Remote)> = None;
        for route in self.candidates(&self.by_mac, &mac, imports, own, net) {
            let Nlri::MacIp { label, routed, .. } = &route.nlri else {
                continue;
            };
            let seq = route.mobility.unwrap_or(0);
            let remote = Remote {
                vtep: route.next_hop,
                encap: route.encap,
                label: *label,
                routed: *routed,
            };
            if better(seq, &remote, best.as_ref()) {
                best = Some((seq, remote));
            }
        }
        best.map(|(_, r)| r)
    }

    /// The MAC `reach` gives address `ip` of network `net` a host route for: the last
    /// type 2 route with that address, if its MAC is reached.
    pub fn host_reach(
        &self,
        imports: &BTreeMap<RouteTarget, String>,
        own: IpAddr,
        net: &str,
        ip: IpAddr,
    ) -> Option<Mac> {
        let mac = self
            .candidates(&self.by_ip, &ip, imports, own, net)
            .filter_map(|r| match &r.nlri {
                Nlri::MacIp { mac, .. } => Some(*mac),
                _ => None,
            })
            .last()?;
        self.mac_reach(imports, own, net, mac).map(|_| mac)
    }

    /// The routes of `index[k]` that network `net` imports, not ours, in the Rib's order.
    fn candidates<'a, K: core::hash::Hash + Eq>(
        &'a self,
        index: &'a FastMap<K, Keys>,
        k: &K,
        imports: &'a BTreeMap<RouteTarget, String>,
        own: IpAddr,
        net: &'a str,
    ) -> impl Iterator<Item = &'a Route> + 'a {
        index
            .get(k)
            .into_iter()
            .flatten()
            .filter_map(|(n, key)| self.routes.get(n)?.get(key))
            .filter(move |r| r.next_hop != own)
            .filter(move |r| {
                r.targets
                    .iter()
                    .any(|t| imports.get(t).is_some_and(|n| n == net))
            })
    }

    pub fn len(&self) -> usize {
        self.routes.values().map(FastMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The reachability of the networks `imports` names (route target → network), for a
    /// host whose own VTEP is `own` (its routes, reflected back, are not remote).
    /// Routes no network imports are counted under `unknown_route_target`.
    pub fn reach(&mut self, imports: &BTreeMap<RouteTarget, String>, own: IpAddr) -> Reach {
        let mut r = Reach::default();
        // A MAC's best route so far: (sequence, lowest VTEP wins a tie) per network.
        let mut best: BTreeMap<(String, Mac), (u32, Remote)> = BTreeMap::new();
        let mut unimported = 0;
        for route in self.sorted() {
            if route.next_hop == own {
                continue;
            }
            let nets: BTreeSet<&String> = route
                .targets
                .iter()
                .filter_map(|t| imports.get(t))
                .collect();
            if nets.is_empty() {
                unimported += 1;
                continue;
            }
            for net in nets {
                let remote = |label| Remote {
                    vtep: route.next_hop,
                    encap: route.encap,
                    label,
                    routed: None,
                };
                match &route.nlri {
                    Nlri::Imet { .. } => {
                        if let Some((label, _)) = route.pmsi {
                            r.flood
                                .entry(net.clone())
                                .or_default()
                                .insert(remote(label));
                        }
                    }
                    Nlri::MacIp {
                        mac,
                        ip,
                        label,
                        routed,
                        ..
                    } => {
                        let seq = route.mobility.unwrap_or(0);
                        let candidate = Remote {
                            routed: *routed,
                            ..remote(*label)
                        };
                        let k = (net.clone(), *mac);
                        if better(seq, &candidate, best.get(&k)) {
                            best.insert(k, (seq, candidate));
                        }
                        if let Some(ip) = ip {
                            r.hosts.insert(net, *ip, *mac);
                        }
                    }
                    Nlri::Prefix {
                        addr, len, label, ..
                    } => {
                        r.prefixes
                            .entry((net.clone(), *addr, *len))
                            .or_default()
                            .insert(remote(*label));
                    }
                }
            }
        }
        if unimported > 0 {
            self.refused.insert("unknown_route_target", unimported);
        }
        r.macs = best
            .into_iter()
            .map(|(k, (_, remote))| (k, remote))
            .collect();
        // A host route whose MAC is not reached (its MAC route withdrawn) goes too.
        r.hosts.retain(|net, _, mac| r.macs.contains(net, mac));
        r
    }
}

/// Adds `key` to a sorted list of keys (once).
fn remember(keys: &mut Keys, key: Key) {
    if let Err(at) = keys.binary_search(&key) {
        keys.insert(at, key);
    }
}

/// Takes `neighbor`'s `nlri` off `index[k]`, and `k` off the index with its last key.
fn forget<K: core::hash::Hash + Eq>(
    index: &mut FastMap<K, Keys>,
    k: &K,
    neighbor: &str,
    key: &RouteKey,
) {
    if let Some(keys) = index.get_mut(k) {
        keys.retain(|(n, x)| !(**n == *neighbor && x == key));
        if keys.is_empty() {
            index.remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evpn::Rd;
    use crate::gobgp::Refusal;
    use core::net::Ipv4Addr;

    fn vtep(n: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, n))
    }

    fn rd(n: u8) -> Rd {
        Rd::Ip {
            router: Ipv4Addr::new(192, 0, 2, n),
            assigned: 1,
        }
    }

    fn route(from: u8, nlri: Nlri, vni: u32) -> Route {
        Route {
            nlri,
            next_hop: vtep(from),
            targets: vec![RouteTarget::auto(65000, vni)],
            encap: Encap::Vxlan,
            router_mac: None,
            pmsi: None,
            mobility: None,
        }
    }

    fn mac(last: u8) -> Mac {
        Mac([2, 0, 0, 0, 1, last])
    }

    fn mac_ip(from: u8, m: u8, ip: Option<&str>, seq: Option<u32>) -> Route {
        let mut r = route(
            from,
            Nlri::MacIp {
                rd: rd(from),
                tag: 0,
                mac: mac(m),
                ip: ip.map(|i| i.parse().unwrap()),
                label: 100,
                routed: None,
            },
            100,
        );
        r.mobility = seq;
        r
    }

    fn imet(from: u8, vni: u32) -> Route {
        let mut r = route(
            from,
            Nlri::Imet {
                rd: rd(from),
                tag: 0,
                originator: vtep(from),
            },
            vni,
        );
        r.pmsi = Some((vni, Ipv4Addr::new(192, 0, 2, from)));
        r
    }

    fn learnt(neighbor: &str, r: Route, withdrawn: bool) -> Learnt {
        crate::sync::learnt(neighbor, r, withdrawn)
    }

    fn imports() -> BTreeMap<RouteTarget, String> {
        [(RouteTarget::auto(65000, 100), "red".to_string())].into()
    }

    #[test]
    fn types_2_3_5_become_flood_lists_bridge_entries_host_routes_and_ecmp_prefixes() {
        let mut rib = Rib::default();
        let rr = "192.0.2.250";
        for r in [
            imet(2, 100),
            imet(3, 100),
            imet(4, 200),
            mac_ip(2, 10, None, None),
            mac_ip(2, 10, Some("10.1.0.10"), None),
        ] {
            assert!(rib.apply(&learnt(rr, r, false)));
        }
        for from in [2, 3] {
            let p = route(
                from,
                Nlri::Prefix {
                    rd: rd(from),
                    tag: 0,
                    addr: "10.9.0.0".parse().unwrap(),
                    len: 24,
                    gateway: "0.0.0.0".parse().unwrap(),
                    label: 100,
                },
                100,
            );
            rib.apply(&learnt(rr, p, false));
        }
        // The same route again changes nothing.
        assert!(!rib.apply(&learnt(rr, imet(2, 100), false)));
        // Our own routes reflected back are not remote.
        rib.apply(&learnt(rr, imet(1, 100), false));
        let reach = rib.reach(&imports(), vtep(1));
        let vteps = |s: &BTreeSet<Remote>| s.iter().map(|r| r.vtep).collect::<Vec<_>>();
        assert_eq!(vteps(&reach.flood["red"]), [vtep(2), vtep(3)]);
        assert_eq!(
            reach.macs.get("red", &mac(10)).copied().unwrap().vtep,
            vtep(2)
        );
        assert_eq!(
            reach
                .hosts
                .get("red", &"10.1.0.10".parse().unwrap())
                .copied()
                .unwrap(),
            mac(10)
        );
        let ecmp = &reach.prefixes[&("red".into(), "10.9.0.0".parse().unwrap(), 24)];
        assert_eq!(vteps(ecmp), [vtep(2), vtep(3)]);
        // VNI 200's route: imported by no network here, counted.
        assert_eq!(rib.refused["unknown_route_target"], 1);
    }

    #[test]
    fn a_route_announced_again_with_other_labels_replaces_the_one_before() {
        let mut rib = Rib::default();
        let first = mac_ip(2, 10, Some("10.1.0.10"), None);
        let mut again = first.clone();
        if let Nlri::MacIp { label, .. } = &mut again.nlri {
            *label = 200;
        }
        assert!(rib.apply(&learnt("rr", first.clone(), false)));
        assert_eq!(
            rib.change(&learnt("rr", again.clone(), false)),
            Some(Some(first.clone()))
        );
        assert_eq!(rib.len(), 1);
        let reach = rib.reach(&imports(), vtep(1));
        assert_eq!(reach.macs.get("red", &mac(10)).unwrap().label, 200);
        // A withdrawal names the route by its key: whatever labels it was sent with.
        assert_eq!(rib.change(&learnt("rr", first, true)), Some(Some(again)));
        assert!(rib.is_empty() && rib.ips_of(mac(10)).next().is_none());
    }

    #[test]
    fn a_moved_mac_follows_the_highest_sequence_and_withdrawals_and_lost_sessions_remove() {
        let mut rib = Rib::default();
        rib.apply(&learnt("rr", mac_ip(2, 10, Some("10.1.0.10"), None), false));
        rib.apply(&learnt(
            "rr",
            mac_ip(3, 10, Some("10.1.0.10"), Some(1)),
            false,
        ));
        let reach = rib.reach(&imports(), vtep(1));
        assert_eq!(
            reach.macs.get("red", &mac(10)).copied().unwrap().vtep,
            vtep(3)
        );
        // The old owner's route goes: still at h3.
        rib.apply(&learnt("rr", mac_ip(2, 10, Some("10.1.0.10"), None), true));
        assert_eq!(rib.reach(&imports(), vtep(1)).macs.len(), 1);
        rib.apply(&learnt(
            "rr",
            mac_ip(3, 10, Some("10.1.0.10"), Some(1)),
            true,
        ));
        let reach = rib.reach(&imports(), vtep(1));
        assert!(reach.macs.is_empty() && reach.hosts.is_empty());
        // A session lost: what came through it goes, the rest stays.
        rib.apply(&learnt("a", imet(2, 100), false));
        rib.apply(&learnt("b", imet(3, 100), false));
        assert_eq!(rib.drop_neighbor("a"), 1);
        let reach = rib.reach(&imports(), vtep(1));
        assert_eq!(
            reach.flood["red"]
                .iter()
                .map(|r| r.vtep)
                .collect::<Vec<_>>(),
            [vtep(3)]
        );
    }

    #[test]
    fn an_mpls_mac_takes_the_routing_label_of_its_mac_ip_route() {
        let mpls = |ip: Option<&str>, routed| {
            let mut r = mac_ip(2, 10, ip, None);
            r.encap = Encap::MplsOverUdp;
            if let Nlri::MacIp { routed: x, .. } = &mut r.nlri {
                *x = routed;
            }
            r
        };
        let mut rib = Rib::default();
        // The MAC-only route sorts first; the MAC/IP route of the same VTEP wins.
        rib.apply(&learnt("rr", mpls(None, None), false));
        rib.apply(&learnt("rr", mpls(Some("10.1.0.10"), Some(101)), false));
        let reach = rib.reach(&imports(), vtep(1));
        let r = reach.macs.get("red", &mac(10)).copied().unwrap();
        assert_eq!((r.label, r.routed), (100, Some(101)));
        assert_eq!(rib.mac_reach(&imports(), vtep(1), "red", mac(10)), Some(r));
        assert_eq!(
            (
                r.bridging().routed,
                r.routing().map(|h| (h.label, h.routed))
            ),
            (None, Some((101, None)))
        );
        // Over VXLAN one VNI bridges and routes.
        let x = Remote {
            encap: Encap::Vxlan,
            routed: None,
            ..r
        };
        assert_eq!(x.routing(), Some(x));
        // Over MPLS without a routing label, addresses are not routed.
        assert_eq!(Remote { routed: None, ..r }.routing(), None);
    }

    #[test]
    fn refused_routes_are_counted_by_reason_and_never_kept() {
        let mut rib = Rib::default();
        let bad = Learnt {
            change: Err(Refusal {
                reason: "bad_label",
                detail: "x".into(),
            }),
            neighbor: "rr".into(),
        };
        assert!(!rib.apply(&bad));
        assert!(!rib.apply(&bad));
        assert_eq!((rib.refused["bad_label"], rib.len()), (2, 0));
        // ovr's own paths (no neighbor) are not learnt.
        assert!(!rib.apply(&learnt("", imet(1, 100), false)));
        assert!(rib.is_empty());
    }
}
