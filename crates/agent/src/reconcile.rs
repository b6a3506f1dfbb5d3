//! From the installed translation to the new one: the table changes between the two, as
//! one batch ordered so that every change refers only to what exists when it is applied
//! (creations and replacements from the bottom up, removals from the top down).
//!
//! Both translations give the same ids to the same names (`translate_keeping`), so an
//! object that did not change produces no op at all: its table entry, and whatever the
//! dataplane caches about it (flows, ECMP buckets), is left alone.

use crate::learnt::{Learnt, LearntKey};
use ovr_config::{Names, Origin, Translation};
use ovr_tables::chain::Chain;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress};
use ovr_tables::nexthop::NextHop;
use ovr_tables::policy::Policy;
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::TableOp;
use ovr_wire::ethernet::MacAddr;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A batch of table changes and, for each, where in the document it came from (written
/// out only for an error: a whole install of 100,000 learnt entries makes no string).
#[derive(Debug, Default)]
pub struct Diff {
    pub ops: Vec<TableOp>,
    pub origins: Vec<Origin>,
}

impl Diff {
    fn push(&mut self, origin: &Origin, op: TableOp) {
        self.ops.push(op);
        self.origins.push(origin.clone());
    }
}

/// A value and where in the document it came from.
type At<T> = (T, Origin);

/// An entry's next hop and where it came from, by the entry's key. Sorted, not hashed:
/// entries change in runs of neighbouring keys (a peer's MACs, a prefix's routes), which
/// a sorted map finds in the lines it just read; hashed, the same 100,000-route EVPN burst
/// cost ovrd more CPU end to end, though fewer instructions (bench/RESULTS.md).
type Entries<K> = BTreeMap<K, At<NextHopId>>;

/// What a translation leaves in the tables, keyed the way the tables are.
#[derive(Debug, Clone, Default)]
pub struct Desired {
    vrfs: BTreeMap<VrfId, At<(String, Option<u32>)>>,
    gateways: BTreeMap<VrfId, At<(MacAddr, Vec<InterfaceAddress>)>>,
    quotas: BTreeMap<VrfId, At<Option<u32>>>,
    interfaces: BTreeMap<InterfaceId, At<Interface>>,
    nexthops: BTreeMap<NextHopId, At<NextHop>>,
    routes: Entries<(VrfId, IpPrefix)>,
    bridge: Entries<(VrfId, MacAddr)>,
    labels: Entries<u32>,
    flood: BTreeMap<VrfId, At<Vec<NextHopId>>>,
    policy: BTreeMap<VrfId, At<Arc<Policy>>>,
    /// The chain table (one value: it is replaced whole).
    chains: Option<At<Arc<Vec<Chain>>>>,
}

impl Desired {
    /// Replays the ops in order: a later op on the same key wins, as in the tables.
    pub fn of(t: &Translation) -> Self {
        let mut d = Desired::default();
        for (op, origin) in t.ops.iter().zip(&t.origins) {
            let o = origin.clone();
            match op {
                TableOp::UpsertVrf { id, name, vni } => {
                    d.vrfs.insert(*id, ((name.clone(), *vni), o));
                }
                TableOp::SetGateway {
                    vrf,
                    mac,
                    addresses,
                } => {
                    d.gateways.insert(*vrf, ((*mac, addresses.clone()), o));
                }
                TableOp::SetFlowQuota { vrf, max } => {
                    d.quotas.insert(*vrf, (*max, o));
                }
                TableOp::UpsertInterface(i) => {
                    d.interfaces.insert(i.id, (i.clone(), o));
                }
                TableOp::UpsertNextHop(id, nh) => {
                    d.nexthops.insert(*id, (nh.clone(), o));
                }
                TableOp::AddRoute { vrf, prefix, nh } => {
                    d.routes.insert((*vrf, *prefix), (*nh, o));
                }
                TableOp::AddBridge { vrf, mac, nh } => {
                    d.bridge.insert((*vrf, *mac), (*nh, o));
                }
                TableOp::AddLabel { label, nh } => {
                    d.labels.insert(*label, (*nh, o));
                }
                TableOp::SetFlood { vrf, members } => {
                    d.flood.insert(*vrf, (members.clone(), o));
                }
                TableOp::SetPolicy { vrf, policy } => {
                    d.policy.insert(*vrf, (policy.clone(), o));
                }
                TableOp::SetChains(chains) => d.chains = Some((chains.clone(), o)),
                // A translation only adds; removals are what this module makes. Port
                // health is ovrd's, not the configuration's.
                TableOp::RemoveInterface(_)
                | TableOp::RemoveVrf(_)
                | TableOp::RemoveNextHop(_)
                | TableOp::RemoveRoute { .. }
                | TableOp::RemoveLabel(_)
                | TableOp::RemoveBridge { .. }
                | TableOp::SetPortHealth { .. } => {}
            }
        }
        d
    }
}

/// A table entry that nothing refers to: a route, a bridge entry or a label. Changing
/// one changes nothing else, which is what lets the agent translate it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Entry {
    Route(VrfId, IpPrefix),
    Bridge(VrfId, MacAddr),
    Label(u32),
}

impl Entry {
    /// The op that makes the tables hold `nh` for this entry (`None`: no entry).
    pub fn op(self, nh: Option<NextHopId>) -> TableOp {
        match (self, nh) {
            (Entry::Route(vrf, prefix), Some(nh)) => TableOp::AddRoute { vrf, prefix, nh },
            (Entry::Route(vrf, prefix), None) => TableOp::RemoveRoute { vrf, prefix },
            (Entry::Bridge(vrf, mac), Some(nh)) => TableOp::AddBridge { vrf, mac, nh },
            (Entry::Bridge(vrf, mac), None) => TableOp::RemoveBridge { vrf, mac },
            (Entry::Label(label), Some(nh)) => TableOp::AddLabel { label, nh },
            (Entry::Label(label), None) => TableOp::RemoveLabel(label),
        }
    }

    /// The entry a learnt one is in network `vrf`.
    pub fn learnt(vrf: VrfId, key: LearntKey) -> Self {
        match key {
            LearntKey::Bridge(mac) => Entry::Bridge(vrf, mac),
            LearntKey::Route(prefix) => Entry::Route(vrf, prefix),
        }
    }
}

impl Desired {
    /// The next hop the tables hold for an entry, and where it came from.
    pub fn get(&self, e: Entry) -> Option<&At<NextHopId>> {
        match e {
            Entry::Route(v, p) => self.routes.get(&(v, p)),
            Entry::Bridge(v, m) => self.bridge.get(&(v, m)),
            Entry::Label(l) => self.labels.get(&l),
        }
    }

    /// The next hop the tables hold for an entry.
    pub fn entry(&self, e: Entry) -> Option<NextHopId> {
        self.get(e).map(|x| x.0)
    }

    /// Adds the learnt entries that the translation has none for (a configured entry
    /// wins) and whose network and next hop `names` has (the others wait, kept by the
    /// agent, for a configuration that has them).
    pub fn add_learnt(&mut self, learnt: &Learnt, names: &Names) {
        for (network, key, nh) in learnt.iter() {
            let (Some(&vrf), Some(&nh)) =
                (names.networks.get(&**network), names.nexthops.get(&**nh))
            else {
                continue;
            };
            let at = (nh, Origin::Learnt);
            match Entry::learnt(vrf, key) {
                Entry::Bridge(v, m) => {
                    self.bridge.entry((v, m)).or_insert(at);
                }
                Entry::Route(v, p) => {
                    self.routes.entry((v, p)).or_insert(at);
                }
                Entry::Label(_) => {}
            }
        }
    }

    /// Records an entry as installed (`None`: removed), with where it came from.
    pub fn set_entry(&mut self, e: Entry, v: Option<At<NextHopId>>) {
        match (e, v) {
            (Entry::Route(vr, p), Some(v)) => drop(self.routes.insert((vr, p), v)),
            (Entry::Route(vr, p), None) => drop(self.routes.remove(&(vr, p))),
            (Entry::Bridge(vr, m), Some(v)) => drop(self.bridge.insert((vr, m), v)),
            (Entry::Bridge(vr, m), None) => drop(self.bridge.remove(&(vr, m))),
            (Entry::Label(l), Some(v)) => drop(self.labels.insert(l, v)),
            (Entry::Label(l), None) => drop(self.labels.remove(&l)),
        }
    }
}

/// Two next hops are the same if they would forward the same way; a composite's bucket
/// layout is the table's own business (it keeps it across member changes).
fn same_nexthop(a: &NextHop, b: &NextHop) -> bool {
    match (a, b) {
        (NextHop::Composite(x), NextHop::Composite(y)) => x.members() == y.members(),
        _ => a == b,
    }
}

/// Entries of `new` that are absent from `old` or differ.
fn changed<'a, K: Ord, V>(
    old: &'a BTreeMap<K, At<V>>,
    new: &'a BTreeMap<K, At<V>>,
    same: impl Fn(&V, &V) -> bool,
) -> impl Iterator<Item = (&'a K, &'a At<V>)> {
    new.iter()
        .filter(move |(k, (v, _))| old.get(k).is_none_or(|(o, _)| !same(o, v)))
}

/// Entries of `old` that `new` no longer has.
fn gone<'a, K: Ord, V>(
    old: &'a BTreeMap<K, At<V>>,
    new: &'a BTreeMap<K, At<V>>,
) -> impl Iterator<Item = (&'a K, &'a At<V>)> {
    old.iter().filter(move |(k, _)| !new.contains_key(k))
}

fn eq<V: PartialEq>(a: &V, b: &V) -> bool {
    a == b
}

/// The batch that turns the tables of `o` into those of `n`.
pub fn diff(o: &Desired, n: &Desired) -> Diff {
    let mut d = Diff::default();
    // A VNI moving between networks: first take it from every network giving it up
    // (the batch is published whole, so no packet sees the gap).
    for (id, ((name, vni), origin)) in &o.vrfs {
        let keeps = n.vrfs.get(id).is_some_and(|((_, v), _)| v == vni);
        if vni.is_some() && !keeps {
            let name = name.clone();
            d.push(
                origin,
                TableOp::UpsertVrf {
                    id: *id,
                    name,
                    vni: None,
                },
            );
        }
    }
    for (id, ((name, vni), origin)) in changed(&o.vrfs, &n.vrfs, eq) {
        let (name, vni) = (name.clone(), *vni);
        d.push(origin, TableOp::UpsertVrf { id: *id, name, vni });
    }
    for (vrf, ((mac, addresses), origin)) in changed(&o.gateways, &n.gateways, eq) {
        let (vrf, mac, addresses) = (*vrf, *mac, addresses.clone());
        d.push(
            origin,
            TableOp::SetGateway {
                vrf,
                mac,
                addresses,
            },
        );
    }
    for (vrf, (max, origin)) in changed(&o.quotas, &n.quotas, eq) {
        d.push(
            origin,
            TableOp::SetFlowQuota {
                vrf: *vrf,
                max: *max,
            },
        );
    }
    // A quota left out: back to the default, on a network that stays.
    for (vrf, (_, origin)) in gone(&o.quotas, &n.quotas) {
        if n.vrfs.contains_key(vrf) {
            let vrf = *vrf;
            d.push(origin, TableOp::SetFlowQuota { vrf, max: None });
        }
    }
    for (_, (i, origin)) in changed(&o.interfaces, &n.interfaces, eq) {
        d.push(origin, TableOp::UpsertInterface(i.clone()));
    }
    let nexthops: Vec<_> = changed(&o.nexthops, &n.nexthops, same_nexthop).collect();
    // Simple ones first: composites refer to them.
    for composite in [false, true] {
        for (id, (nh, origin)) in &nexthops {
            if matches!(nh, NextHop::Composite(_)) == composite {
                d.push(origin, TableOp::UpsertNextHop(**id, nh.clone()));
            }
        }
    }
    for ((vrf, prefix), (nh, origin)) in changed(&o.routes, &n.routes, eq) {
        let (vrf, prefix, nh) = (*vrf, *prefix, *nh);
        d.push(origin, TableOp::AddRoute { vrf, prefix, nh });
    }
    for ((vrf, mac), (nh, origin)) in changed(&o.bridge, &n.bridge, eq) {
        let (vrf, mac, nh) = (*vrf, *mac, *nh);
        d.push(origin, TableOp::AddBridge { vrf, mac, nh });
    }
    for (label, (nh, origin)) in changed(&o.labels, &n.labels, eq) {
        let (label, nh) = (*label, *nh);
        d.push(origin, TableOp::AddLabel { label, nh });
    }
    for (vrf, (members, origin)) in changed(&o.flood, &n.flood, eq) {
        let (vrf, members) = (*vrf, members.clone());
        d.push(origin, TableOp::SetFlood { vrf, members });
    }
    // A flood list that went (also of a network that goes: it must be empty to go).
    for (vrf, (_, origin)) in gone(&o.flood, &n.flood) {
        let vrf = *vrf;
        d.push(
            origin,
            TableOp::SetFlood {
                vrf,
                members: Vec::new(),
            },
        );
    }
    // Chains before the policies that name them (by index).
    match (&o.chains, &n.chains) {
        (old, Some((c, origin))) if old.as_ref().is_none_or(|(x, _)| x != c) => {
            d.push(origin, TableOp::SetChains(c.clone()));
        }
        (Some((_, origin)), None) => d.push(origin, TableOp::SetChains(Arc::default())),
        _ => {}
    }
    for (vrf, (policy, origin)) in changed(&o.policy, &n.policy, eq) {
        let (vrf, policy) = (*vrf, policy.clone());
        d.push(origin, TableOp::SetPolicy { vrf, policy });
    }
    for (vrf, (_, origin)) in gone(&o.policy, &n.policy) {
        if n.vrfs.contains_key(vrf) {
            let policy = Arc::new(Policy::default());
            d.push(origin, TableOp::SetPolicy { vrf: *vrf, policy });
        }
    }
    // Removals, from what refers to what is referred to.
    for ((vrf, prefix), (_, origin)) in gone(&o.routes, &n.routes) {
        let (vrf, prefix) = (*vrf, *prefix);
        d.push(origin, TableOp::RemoveRoute { vrf, prefix });
    }
    for ((vrf, mac), (_, origin)) in gone(&o.bridge, &n.bridge) {
        let (vrf, mac) = (*vrf, *mac);
        d.push(origin, TableOp::RemoveBridge { vrf, mac });
    }
    for (label, (_, origin)) in gone(&o.labels, &n.labels) {
        d.push(origin, TableOp::RemoveLabel(*label));
    }
    for composite in [true, false] {
        for (id, (nh, origin)) in gone(&o.nexthops, &n.nexthops) {
            if matches!(nh, NextHop::Composite(_)) == composite {
                d.push(origin, TableOp::RemoveNextHop(*id));
            }
        }
    }
    for (id, (_, origin)) in gone(&o.interfaces, &n.interfaces) {
        d.push(origin, TableOp::RemoveInterface(*id));
    }
    for (id, (_, origin)) in gone(&o.vrfs, &n.vrfs) {
        d.push(origin, TableOp::RemoveVrf(*id));
    }
    d
}
