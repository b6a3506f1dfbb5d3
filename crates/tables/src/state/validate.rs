//! Validation of a batch of changes against the published state, before anything is
//! applied: a batch is applied whole or not at all.
//!
//! Later changes in a batch may depend on earlier ones (create a VRF, then route in it),
//! so validation keeps an overlay of what the batch has changed so far on top of the
//! published state; it never copies the tables.

use super::{ForwardingState, MAX_INTERFACES, MAX_NEXTHOPS, MAX_VRFS, TableOp};
use crate::fasthash::FastMap as HashMap;
use crate::ids::{InterfaceId, NextHopId, VrfId};
use crate::interface::InterfaceKind;
use crate::label::{FIRST_UNRESERVED_LABEL, LABEL_SPACE};
use crate::nexthop::{ECMP_BUCKETS, Encap, NextHop};
use crate::policy::Policy;
use crate::prefix::IpPrefix;
use crate::vrf::MAX_VNI;
use core::hash::Hash;
use ovr_wire::ethernet::MacAddr;
use std::sync::Arc;

/// Why a change was refused. Each names what is wrong and with which object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TableError {
    #[error("interface {0} does not exist")]
    NoSuchInterface(InterfaceId),
    #[error("VRF {0} does not exist")]
    NoSuchVrf(VrfId),
    #[error("next hop {0} does not exist")]
    NoSuchNextHop(NextHopId),
    #[error("VRF {vrf} has no route for {prefix}")]
    NoSuchRoute { vrf: VrfId, prefix: IpPrefix },
    #[error("label {0} is not mapped")]
    NoSuchLabel(u32),
    #[error("VRF {vrf} has no bridge entry for {mac:?}")]
    NoSuchBridgeEntry { vrf: VrfId, mac: MacAddr },
    #[error("{what} id {id} is out of range (must be below {max})")]
    IdOutOfRange {
        what: &'static str,
        id: u32,
        max: u32,
    },
    #[error("{what} name must not be empty")]
    EmptyName { what: &'static str },
    #[error("interface name '{name}' is already used by interface {by}")]
    InterfaceNameTaken { name: String, by: InterfaceId },
    #[error("a {kind:?} interface needs a VRF")]
    InterfaceNeedsVrf { kind: InterfaceKind },
    #[error("MTU {0} is below the IPv4 minimum of 68")]
    MtuTooSmall(u16),
    #[error("VNI {0} is out of range (24 bits)")]
    VniOutOfRange(u32),
    #[error("VNI {vni} is already used by VRF {by}")]
    VniTaken { vni: u32, by: VrfId },
    #[error("label {0} is reserved or out of range (16..1048575)")]
    BadLabel(u32),
    #[error("tunnel source and destination must both be IPv4 or both IPv6")]
    TunnelFamilyMismatch,
    #[error("composite next hop needs 1 to {ECMP_BUCKETS} distinct members")]
    BadMemberCount,
    #[error("next hop {0} is listed twice in a composite")]
    DuplicateMember(NextHopId),
    #[error("next hop {0} cannot be a member: composites do not nest")]
    NestedComposite(NextHopId),
    #[error("next hop {0} is in use: it cannot change between composite and simple")]
    KindChangeInUse(NextHopId),
    #[error("MAC {0:?} is a group address: bridge entries are for unicast MACs")]
    GroupMac(MacAddr),
    #[error("{what} {id} is in use by {refs} {by}")]
    InUse {
        what: &'static str,
        id: u32,
        refs: u32,
        by: &'static str,
    },
    #[error("chain {index} has id {id}: a chain's id is its index")]
    ChainId { id: u32, index: usize },
    #[error("the tables are shut down")]
    Closed,
}

/// A refused batch: which change (its index in the batch) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("change {index}: {error}")]
pub struct BatchError {
    pub index: usize,
    pub error: TableError,
}

impl BatchError {
    pub(crate) fn closed() -> Self {
        Self {
            index: 0,
            error: TableError::Closed,
        }
    }
}

/// What validation needs to know of a next hop.
#[derive(Clone)]
struct NhInfo {
    composite: bool,
    interface: Option<InterfaceId>,
    vrf: Option<VrfId>,
    members: Vec<NextHopId>,
}

impl NhInfo {
    fn of(nh: &NextHop) -> Self {
        Self {
            composite: matches!(nh, NextHop::Composite(_)),
            interface: nh.interface(),
            vrf: nh.vrf(),
            members: nh.members().to_vec(),
        }
    }
}

/// A layer of changes over the published state: `Some(v)` set, `None` removed.
type Layer<K, V> = HashMap<K, Option<V>>;

fn layered<K: Hash + Eq, V: Clone>(
    layer: &Layer<K, V>,
    k: &K,
    base: impl FnOnce() -> Option<V>,
) -> Option<V> {
    match layer.get(k) {
        Some(v) => v.clone(),
        None => base(),
    }
}

struct Overlay<'a> {
    base: &'a ForwardingState,
    interfaces: Layer<InterfaceId, (String, Option<VrfId>)>,
    names: Layer<String, InterfaceId>,
    vrfs: Layer<VrfId, Option<u32>>,
    vnis: Layer<u32, VrfId>,
    nexthops: Layer<NextHopId, NhInfo>,
    routes: Layer<(VrfId, IpPrefix), NextHopId>,
    labels: Layer<u32, NextHopId>,
    bridge: Layer<(VrfId, MacAddr), NextHopId>,
    /// Policies set in this batch (`None`: the VRF, and so its policy, was removed).
    policies: Layer<VrfId, Arc<Policy>>,
    floods: Layer<VrfId, Vec<NextHopId>>,
    nh_refs: HashMap<NextHopId, i64>,
    if_refs: HashMap<InterfaceId, i64>,
    vrf_refs: HashMap<VrfId, i64>,
    vrf_entries: HashMap<VrfId, i64>,
}

fn count(base: Option<u32>, delta: Option<&i64>) -> u32 {
    (i64::from(base.unwrap_or(0)) + delta.copied().unwrap_or(0)).max(0) as u32
}

impl<'a> Overlay<'a> {
    fn new(base: &'a ForwardingState) -> Self {
        Self {
            base,
            interfaces: HashMap::default(),
            names: HashMap::default(),
            vrfs: HashMap::default(),
            vnis: HashMap::default(),
            nexthops: HashMap::default(),
            routes: HashMap::default(),
            labels: HashMap::default(),
            bridge: HashMap::default(),
            policies: HashMap::default(),
            floods: HashMap::default(),
            nh_refs: HashMap::default(),
            if_refs: HashMap::default(),
            vrf_refs: HashMap::default(),
            vrf_entries: HashMap::default(),
        }
    }

    fn interface(&self, id: InterfaceId) -> Option<(String, Option<VrfId>)> {
        layered(&self.interfaces, &id, || {
            self.base.interface(id).map(|i| (i.name.clone(), i.vrf))
        })
    }

    fn vrf(&self, id: VrfId) -> Option<Option<u32>> {
        layered(&self.vrfs, &id, || self.base.vrf(id).map(|v| v.vni))
    }

    fn nexthop(&self, id: NextHopId) -> Option<NhInfo> {
        layered(&self.nexthops, &id, || {
            self.base.nexthop(id).map(NhInfo::of)
        })
    }

    fn nh_refs(&self, id: NextHopId) -> u32 {
        count(
            self.base.refs.nexthop.get(&id).copied(),
            self.nh_refs.get(&id),
        )
    }

    /// How many other VRFs' policies name `id` in a rule, after this batch's changes.
    fn policies_naming(&self, id: VrfId) -> u32 {
        let names = |p: &Policy| {
            p.rules()
                .iter()
                .any(|r| r.src_net == Some(id) || r.dst_net == Some(id))
        };
        let base = self
            .base
            .vrfs()
            .filter(|v| {
                v.id != id
                    && !self.policies.contains_key(&v.id)
                    && !matches!(self.vrfs.get(&v.id), Some(None))
            })
            .filter(|v| names(&v.policy))
            .count();
        let batch = self
            .policies
            .iter()
            .filter(|(v, p)| **v != id && p.as_deref().is_some_and(names))
            .count();
        (base + batch) as u32
    }

    fn need_interface(&self, id: InterfaceId) -> Result<(), TableError> {
        self.interface(id)
            .map(|_| ())
            .ok_or(TableError::NoSuchInterface(id))
    }

    fn need_vrf(&self, id: VrfId) -> Result<(), TableError> {
        self.vrf(id).map(|_| ()).ok_or(TableError::NoSuchVrf(id))
    }

    fn need_nexthop(&self, id: NextHopId) -> Result<NhInfo, TableError> {
        self.nexthop(id).ok_or(TableError::NoSuchNextHop(id))
    }

    fn repoint(&mut self, old: Option<NextHopId>, new: Option<NextHopId>) {
        if let Some(o) = old {
            *self.nh_refs.entry(o).or_default() -= 1;
        }
        if let Some(n) = new {
            *self.nh_refs.entry(n).or_default() += 1;
        }
    }

    fn count_nexthop(&mut self, nh: &NhInfo, delta: i64) {
        if let Some(i) = nh.interface {
            *self.if_refs.entry(i).or_default() += delta;
        }
        if let Some(v) = nh.vrf {
            *self.vrf_refs.entry(v).or_default() += delta;
        }
        for m in &nh.members {
            *self.nh_refs.entry(*m).or_default() += delta;
        }
    }

    fn check(&mut self, op: &TableOp) -> Result<(), TableError> {
        match op {
            TableOp::UpsertInterface(iface) => {
                in_range("interface", iface.id.0, MAX_INTERFACES)?;
                if iface.name.is_empty() {
                    return Err(TableError::EmptyName { what: "interface" });
                }
                let holder = layered(&self.names, &iface.name, || {
                    self.base.interfaces().by_name(&iface.name).map(|i| i.id)
                });
                if let Some(by) = holder.filter(|by| *by != iface.id) {
                    return Err(TableError::InterfaceNameTaken {
                        name: iface.name.clone(),
                        by,
                    });
                }
                match iface.vrf {
                    Some(v) => self.need_vrf(v)?,
                    None if iface.kind != InterfaceKind::Underlay => {
                        return Err(TableError::InterfaceNeedsVrf { kind: iface.kind });
                    }
                    None => {}
                }
                if iface.mtu < 68 {
                    return Err(TableError::MtuTooSmall(iface.mtu));
                }
                if let Some((old_name, old_vrf)) = self.interface(iface.id) {
                    self.names.insert(old_name, None);
                    if let Some(v) = old_vrf {
                        *self.vrf_refs.entry(v).or_default() -= 1;
                    }
                }
                if let Some(v) = iface.vrf {
                    *self.vrf_refs.entry(v).or_default() += 1;
                }
                self.names.insert(iface.name.clone(), Some(iface.id));
                self.interfaces
                    .insert(iface.id, Some((iface.name.clone(), iface.vrf)));
            }
            TableOp::RemoveInterface(id) => {
                let (name, vrf) = self
                    .interface(*id)
                    .ok_or(TableError::NoSuchInterface(*id))?;
                let refs = count(
                    self.base.refs.interface.get(id).copied(),
                    self.if_refs.get(id),
                );
                if refs > 0 {
                    return Err(TableError::InUse {
                        what: "interface",
                        id: id.0,
                        refs,
                        by: "next hops",
                    });
                }
                if let Some(v) = vrf {
                    *self.vrf_refs.entry(v).or_default() -= 1;
                }
                self.names.insert(name, None);
                self.interfaces.insert(*id, None);
            }
            TableOp::UpsertVrf { id, name, vni } => {
                in_range("VRF", id.0, MAX_VRFS)?;
                if name.is_empty() {
                    return Err(TableError::EmptyName { what: "VRF" });
                }
                if let Some(n) = *vni {
                    if n > MAX_VNI {
                        return Err(TableError::VniOutOfRange(n));
                    }
                    let holder = layered(&self.vnis, &n, || self.base.vni_to_vrf.get(&n).copied());
                    if let Some(by) = holder.filter(|by| by != id) {
                        return Err(TableError::VniTaken { vni: n, by });
                    }
                }
                if let Some(Some(old)) = self.vrf(*id) {
                    self.vnis.insert(old, None);
                }
                if let Some(n) = *vni {
                    self.vnis.insert(n, Some(*id));
                }
                self.vrfs.insert(*id, Some(*vni));
            }
            TableOp::RemoveVrf(id) => {
                let vni = self.vrf(*id).ok_or(TableError::NoSuchVrf(*id))?;
                let ifaces = count(self.base.refs.vrf.get(id).copied(), self.vrf_refs.get(id));
                if ifaces > 0 {
                    return Err(TableError::InUse {
                        what: "VRF",
                        id: id.0,
                        refs: ifaces,
                        by: "interfaces and next hops",
                    });
                }
                let policies = self.policies_naming(*id);
                if policies > 0 {
                    return Err(TableError::InUse {
                        what: "VRF",
                        id: id.0,
                        refs: policies,
                        by: "policy rules of other VRFs",
                    });
                }
                self.policies.insert(*id, None);
                let base_entries = self.base.vrf(*id).map(|v| v.entries() as u32);
                let entries = count(base_entries, self.vrf_entries.get(id));
                if entries > 0 {
                    return Err(TableError::InUse {
                        what: "VRF",
                        id: id.0,
                        refs: entries,
                        by: "routes, bridge entries and flood members",
                    });
                }
                if let Some(n) = vni {
                    self.vnis.insert(n, None);
                }
                self.vrfs.insert(*id, None);
            }
            TableOp::UpsertNextHop(id, nh) => {
                in_range("next hop", id.0, MAX_NEXTHOPS)?;
                check_nexthop_fields(nh)?;
                if let Some(i) = nh.interface() {
                    self.need_interface(i)?;
                }
                if let Some(v) = nh.vrf() {
                    self.need_vrf(v)?;
                }
                let new = NhInfo::of(nh);
                if new.composite {
                    let m = &new.members;
                    if m.is_empty() || m.len() > ECMP_BUCKETS {
                        return Err(TableError::BadMemberCount);
                    }
                    for (k, member) in m.iter().enumerate() {
                        if m[..k].contains(member) {
                            return Err(TableError::DuplicateMember(*member));
                        }
                        if member == id || self.need_nexthop(*member)?.composite {
                            return Err(TableError::NestedComposite(*member));
                        }
                    }
                }
                let old = self.nexthop(*id);
                if let Some(o) = &old {
                    if o.composite != new.composite && self.nh_refs(*id) > 0 {
                        return Err(TableError::KindChangeInUse(*id));
                    }
                    self.count_nexthop(o, -1);
                }
                self.count_nexthop(&new, 1);
                self.nexthops.insert(*id, Some(new));
            }
            TableOp::RemoveNextHop(id) => {
                let old = self.need_nexthop(*id)?;
                let refs = self.nh_refs(*id);
                if refs > 0 {
                    return Err(TableError::InUse {
                        what: "next hop",
                        id: id.0,
                        refs,
                        by: "routes, labels, bridge entries or composites",
                    });
                }
                self.count_nexthop(&old, -1);
                self.nexthops.insert(*id, None);
            }
            TableOp::AddRoute { vrf, prefix, nh } => {
                self.need_vrf(*vrf)?;
                self.need_nexthop(*nh)?;
                let key = (*vrf, *prefix);
                let old = layered(&self.routes, &key, || self.base.route(*vrf, *prefix));
                if old.is_none() {
                    *self.vrf_entries.entry(*vrf).or_default() += 1;
                }
                self.repoint(old, Some(*nh));
                self.routes.insert(key, Some(*nh));
            }
            TableOp::RemoveRoute { vrf, prefix } => {
                self.need_vrf(*vrf)?;
                let key = (*vrf, *prefix);
                let old = layered(&self.routes, &key, || self.base.route(*vrf, *prefix)).ok_or(
                    TableError::NoSuchRoute {
                        vrf: *vrf,
                        prefix: *prefix,
                    },
                )?;
                *self.vrf_entries.entry(*vrf).or_default() -= 1;
                self.repoint(Some(old), None);
                self.routes.insert(key, None);
            }
            TableOp::AddLabel { label, nh } => {
                if *label < FIRST_UNRESERVED_LABEL || *label as usize >= LABEL_SPACE {
                    return Err(TableError::BadLabel(*label));
                }
                self.need_nexthop(*nh)?;
                let old = layered(&self.labels, label, || self.base.labels().lookup(*label));
                self.repoint(old, Some(*nh));
                self.labels.insert(*label, Some(*nh));
            }
            TableOp::RemoveLabel(label) => {
                let old = layered(&self.labels, label, || self.base.labels().lookup(*label))
                    .ok_or(TableError::NoSuchLabel(*label))?;
                self.repoint(Some(old), None);
                self.labels.insert(*label, None);
            }
            TableOp::AddBridge { vrf, mac, nh } => {
                self.need_vrf(*vrf)?;
                if mac.is_multicast() {
                    return Err(TableError::GroupMac(*mac));
                }
                self.need_nexthop(*nh)?;
                let key = (*vrf, *mac);
                let old = layered(&self.bridge, &key, || {
                    self.base.vrf(*vrf).and_then(|v| v.bridge.lookup(mac))
                });
                if old.is_none() {
                    *self.vrf_entries.entry(*vrf).or_default() += 1;
                }
                self.repoint(old, Some(*nh));
                self.bridge.insert(key, Some(*nh));
            }
            TableOp::RemoveBridge { vrf, mac } => {
                self.need_vrf(*vrf)?;
                let key = (*vrf, *mac);
                let old = layered(&self.bridge, &key, || {
                    self.base.vrf(*vrf).and_then(|v| v.bridge.lookup(mac))
                })
                .ok_or(TableError::NoSuchBridgeEntry {
                    vrf: *vrf,
                    mac: *mac,
                })?;
                *self.vrf_entries.entry(*vrf).or_default() -= 1;
                self.repoint(Some(old), None);
                self.bridge.insert(key, None);
            }
            TableOp::SetPolicy { vrf, policy } => {
                self.need_vrf(*vrf)?;
                for r in policy.rules() {
                    for net in [r.src_net, r.dst_net].into_iter().flatten() {
                        self.need_vrf(net)?;
                    }
                }
                self.policies.insert(*vrf, Some(policy.clone()));
            }
            TableOp::SetGateway { vrf, mac, .. } => {
                self.need_vrf(*vrf)?;
                if mac.is_multicast() {
                    return Err(TableError::GroupMac(*mac));
                }
            }
            TableOp::SetFlowQuota { vrf, .. } => self.need_vrf(*vrf)?,
            TableOp::SetChains(chains) => {
                for (n, c) in chains.iter().enumerate() {
                    if c.id.0 as usize != n {
                        return Err(TableError::ChainId {
                            id: c.id.0,
                            index: n,
                        });
                    }
                    if let Some(v) = c.from {
                        self.need_vrf(v)?;
                    }
                    for i in c.functions.iter().flat_map(|f| &f.instances) {
                        for port in [i.left, i.right].into_iter().flatten() {
                            self.need_interface(port)?;
                        }
                        self.need_nexthop(i.left_nh)?;
                        self.need_nexthop(i.right_nh)?;
                    }
                }
            }
            TableOp::SetPortHealth { .. } => {}
            TableOp::SetFlood { vrf, members } => {
                self.need_vrf(*vrf)?;
                for (k, m) in members.iter().enumerate() {
                    if members[..k].contains(m) {
                        return Err(TableError::DuplicateMember(*m));
                    }
                    if self.need_nexthop(*m)?.composite {
                        return Err(TableError::NestedComposite(*m));
                    }
                }
                let old = layered(&self.floods, vrf, || {
                    self.base.vrf(*vrf).map(|v| v.flood.clone())
                })
                .unwrap_or_default();
                for o in &old {
                    self.repoint(Some(*o), None);
                }
                for m in members {
                    self.repoint(None, Some(*m));
                }
                *self.vrf_entries.entry(*vrf).or_default() +=
                    members.len() as i64 - old.len() as i64;
                self.floods.insert(*vrf, Some(members.clone()));
            }
        }
        Ok(())
    }
}

fn in_range(what: &'static str, id: u32, max: u32) -> Result<(), TableError> {
    if id < max {
        Ok(())
    } else {
        Err(TableError::IdOutOfRange { what, id, max })
    }
}

fn check_nexthop_fields(nh: &NextHop) -> Result<(), TableError> {
    let NextHop::Tunnel(t) = nh else {
        return Ok(());
    };
    if t.src.is_ipv4() != t.dst.is_ipv4() {
        return Err(TableError::TunnelFamilyMismatch);
    }
    match t.encap {
        Encap::Vxlan { vni } if vni > MAX_VNI => Err(TableError::VniOutOfRange(vni)),
        Encap::MplsOverUdp { label } | Encap::MplsOverGre { label }
            if label < FIRST_UNRESERVED_LABEL || label as usize >= LABEL_SPACE =>
        {
            Err(TableError::BadLabel(label))
        }
        _ => Ok(()),
    }
}

/// Checks every change of `ops` in order, each against the state the earlier ones leave.
pub(crate) fn validate(state: &ForwardingState, ops: &[TableOp]) -> Result<(), BatchError> {
    let mut overlay = Overlay::new(state);
    for (index, op) in ops.iter().enumerate() {
        overlay
            .check(op)
            .map_err(|error| BatchError { index, error })?;
    }
    Ok(())
}
