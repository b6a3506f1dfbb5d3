//! The forwarding state shared with the dataplane: all control-plane tables together,
//! double-buffered with the left-right crate.
//!
//! Why double buffering: the dataplane must read without locks and see one consistent
//! version of every table for the whole vector it is processing, while the control plane
//! applies bursts of changes. The writer validates a batch against the published state,
//! applies it to the copy no reader uses, swaps the copies (one atomic pointer store), waits
//! until readers have left the old copy, and replays the batch there. Readers pay one
//! atomic increment when they enter and one when they leave (per vector, not per packet).
//! The cost is memory (two copies) and applying each change twice; both are cheap next to
//! the alternatives (cloning whole tables per change, or locking).

mod op;
mod touched;
mod validate;

pub use op::TableOp;
pub use touched::{TOUCHED_MAX, Touch};
pub use validate::{BatchError, TableError};

use crate::chain::{ChainTable, ServicePort};
use crate::ids::{InterfaceId, NextHopId, VrfId};
use crate::interface::{Interface, InterfaceTable};
use crate::label::LabelTable;
use crate::nexthop::NextHop;
use crate::prefix::IpPrefix;
use crate::vrf::Vrf;
use core::net::IpAddr;
use left_right::{Absorb, ReadGuard, ReadHandle, ReadHandleFactory, WriteHandle};
// Keyed by ids and VNIs: `vni_to_vrf` is read per packet out of VXLAN, where SipHash
// took ~110 instructions a packet (its keys are configured ones; a VNI from the wire
// is only looked up).
use crate::fasthash::FastMap as HashMap;

/// Highest interface id + 1.
pub const MAX_INTERFACES: u32 = 1 << 16;
/// Highest VRF id + 1.
pub const MAX_VRFS: u32 = 1 << 16;
/// Highest next-hop id + 1.
pub const MAX_NEXTHOPS: u32 = 1 << 20;

/// Every control-plane table, one consistent version of them.
#[derive(Debug, Clone, Default)]
pub struct ForwardingState {
    interfaces: InterfaceTable,
    vrfs: Vec<Option<Box<Vrf>>>,
    vni_to_vrf: HashMap<u32, VrfId>,
    nexthops: Vec<Option<NextHop>>,
    labels: LabelTable,
    refs: Refs,
    epoch: u32,
    chains: ChainTable,
    /// Service ports whose link is down.
    ports_down: std::collections::BTreeSet<InterfaceId>,
    /// The networks of the service ports (a handful), kept with the chains and the
    /// interfaces: a frame bridged in another network is no chain's, known without a
    /// bridge lookup per frame.
    service_vrfs: Vec<VrfId>,
    /// The routed VXLAN next hops (no inner destination MAC) by (VNI, remote VTEP).
    routed_tunnels: HashMap<(u32, IpAddr), std::collections::BTreeSet<NextHopId>>,
    /// What the latest changes touched (`touched_since`).
    touched: touched::TouchLog,
}

/// Who refers to what, so that nothing in use is removed.
#[derive(Debug, Clone, Default)]
struct Refs {
    /// Routes, labels, bridge entries and composites naming a next hop.
    nexthop: HashMap<NextHopId, u32>,
    /// Next hops sending through an interface.
    interface: HashMap<InterfaceId, u32>,
    /// Interfaces belonging to a VRF and next hops looking up in it.
    vrf: HashMap<VrfId, u32>,
}

/// Whether a service port is up: its link (`SetPortHealth`) and its admin state.
fn port_up<'a>(
    down: &'a std::collections::BTreeSet<InterfaceId>,
    interfaces: &'a InterfaceTable,
) -> impl Fn(InterfaceId) -> bool + 'a {
    move |i| !down.contains(&i) && interfaces.get(i).is_some_and(|f| f.admin_up)
}

fn bump<K: core::hash::Hash + Eq>(m: &mut HashMap<K, u32>, k: K, up: bool) {
    let n = m.entry(k).or_default();
    *n = if up { *n + 1 } else { n.saturating_sub(1) };
}

impl ForwardingState {
    pub fn interface(&self, id: InterfaceId) -> Option<&Interface> {
        self.interfaces.get(id)
    }

    pub fn interfaces(&self) -> &InterfaceTable {
        &self.interfaces
    }

    #[inline]
    pub fn vrf(&self, id: VrfId) -> Option<&Vrf> {
        self.vrfs.get(id.0 as usize)?.as_deref()
    }

    /// The VRF a VXLAN packet with this VNI belongs to.
    #[inline]
    pub fn vrf_by_vni(&self, vni: u32) -> Option<&Vrf> {
        self.vrf(*self.vni_to_vrf.get(&vni)?)
    }

    pub fn vrfs(&self) -> impl Iterator<Item = &Vrf> {
        self.vrfs.iter().flatten().map(|v| &**v)
    }

    #[inline]
    pub fn nexthop(&self, id: NextHopId) -> Option<&NextHop> {
        self.nexthops.get(id.0 as usize)?.as_ref()
    }

    pub fn nexthops(&self) -> impl Iterator<Item = (NextHopId, &NextHop)> {
        self.nexthops
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((NextHopId(i as u32), n.as_ref()?)))
    }

    /// A VXLAN next hop that sends routed packets to `vtep` in network `vni` (the
    /// lowest id if several do).
    pub fn routed_tunnel(&self, vni: u32, vtep: IpAddr) -> Option<NextHopId> {
        self.routed_tunnels.get(&(vni, vtep))?.first().copied()
    }

    /// Keeps `routed_tunnels` as next hop `id` comes (`up`) or goes.
    fn index_tunnel(&mut self, id: NextHopId, nh: &NextHop, up: bool) {
        let NextHop::Tunnel(t) = nh else { return };
        let (crate::nexthop::Encap::Vxlan { vni }, None) = (t.encap, t.inner_dst) else {
            return;
        };
        let k = (vni, t.dst);
        if up {
            self.routed_tunnels.entry(k).or_default().insert(id);
        } else if let Some(s) = self.routed_tunnels.get_mut(&k) {
            s.remove(&id);
            if s.is_empty() {
                self.routed_tunnels.remove(&k);
            }
        }
    }

    /// How many routes, labels, bridge entries and composites use this next hop.
    pub fn nexthop_refs(&self, id: NextHopId) -> u32 {
        self.refs.nexthop.get(&id).copied().unwrap_or(0)
    }

    /// Changes with every applied change: a flow whose cached decision was taken at
    /// another epoch has it taken again (see the dataplane's flow node).
    #[inline]
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// What the changes since epoch `epoch` touched (routes, bridge entries, next
    /// hops), or None when that is not known: a change of anything else came since, or
    /// more changes than the log holds ([`TOUCHED_MAX`]). A decision taken at `epoch`
    /// that reads none of them is still the one these tables give.
    pub fn touched_since(&self, epoch: u32) -> Option<impl Iterator<Item = &Touch>> {
        self.touched.since(epoch)
    }

    pub fn chains(&self) -> &ChainTable {
        &self.chains
    }

    /// Where a service port sits in its chain (`None`: not a service port).
    #[inline]
    pub fn service_port(&self, interface: InterfaceId) -> Option<ServicePort> {
        self.chains.port(interface)
    }

    /// Whether network `vrf` holds a service port.
    #[inline]
    pub fn has_service_ports(&self, vrf: VrfId) -> bool {
        self.service_vrfs.contains(&vrf)
    }

    fn follow_service_vrfs(&mut self) {
        let mut v: Vec<VrfId> = self
            .chains
            .port_ids()
            .filter_map(|p| self.interfaces.get(p)?.vrf)
            .collect();
        v.sort_unstable();
        v.dedup();
        self.service_vrfs = v;
    }

    /// Whether a port's link was last reported down.
    pub fn port_down(&self, interface: InterfaceId) -> bool {
        self.ports_down.contains(&interface)
    }

    fn follow_chain_health(&mut self) {
        self.chains
            .follow_health(port_up(&self.ports_down, &self.interfaces));
    }

    pub fn labels(&self) -> &LabelTable {
        &self.labels
    }

    /// The next hop of exactly this route (not a longest-prefix match).
    pub fn route(&self, vrf: VrfId, prefix: IpPrefix) -> Option<NextHopId> {
        let v = self.vrf(vrf)?;
        match prefix.addr() {
            IpAddr::V4(a) => v.fib4.exact(a, prefix.prefix_len()),
            IpAddr::V6(a) => v.fib6.exact(a, prefix.prefix_len()),
        }
    }

    fn vrf_mut(&mut self, id: VrfId) -> Option<&mut Vrf> {
        self.vrfs.get_mut(id.0 as usize)?.as_deref_mut()
    }

    fn count_nexthop_refs(&mut self, nh: &NextHop, up: bool) {
        if let Some(i) = nh.interface() {
            bump(&mut self.refs.interface, i, up);
        }
        if let Some(v) = nh.vrf() {
            bump(&mut self.refs.vrf, v, up);
        }
        for m in nh.members() {
            bump(&mut self.refs.nexthop, *m, up);
        }
    }

    /// Replaces what a table entry points to, keeping the reference counts.
    fn repoint(&mut self, old: Option<NextHopId>, new: Option<NextHopId>) {
        if let Some(o) = old {
            bump(&mut self.refs.nexthop, o, false);
        }
        if let Some(n) = new {
            bump(&mut self.refs.nexthop, n, true);
        }
    }

    /// Applies one validated change. Never panics: a change that no longer fits (which
    /// validation rules out) is ignored.
    fn apply(&mut self, op: &TableOp) {
        self.epoch = self.epoch.wrapping_add(1);
        let old = match op {
            TableOp::UpsertNextHop(id, _) | TableOp::RemoveNextHop(id) => {
                self.nexthops.get(id.0 as usize).and_then(Option::as_ref)
            }
            _ => None,
        };
        self.touched.record(self.epoch, op, old);
        match op {
            TableOp::UpsertInterface(iface) => {
                if let Some(v) = self.interfaces.get(iface.id).and_then(|o| o.vrf) {
                    bump(&mut self.refs.vrf, v, false);
                }
                if let Some(v) = iface.vrf {
                    bump(&mut self.refs.vrf, v, true);
                }
                self.interfaces.upsert(iface.clone());
                self.follow_chain_health();
                self.follow_service_vrfs();
            }
            TableOp::RemoveInterface(id) => {
                if let Some(v) = self.interfaces.remove(*id).and_then(|o| o.vrf) {
                    bump(&mut self.refs.vrf, v, false);
                }
                self.follow_service_vrfs();
            }
            TableOp::UpsertVrf { id, name, vni } => {
                let i = id.0 as usize;
                if self.vrfs.len() <= i {
                    self.vrfs.resize_with(i + 1, || None);
                }
                let old_vni = match &mut self.vrfs[i] {
                    Some(v) => {
                        v.name.clone_from(name);
                        core::mem::replace(&mut v.vni, *vni)
                    }
                    slot @ None => {
                        *slot = Some(Box::new(Vrf::new(*id, name.clone(), *vni)));
                        None
                    }
                };
                if let Some(o) = old_vni {
                    self.vni_to_vrf.remove(&o);
                }
                if let Some(n) = vni {
                    self.vni_to_vrf.insert(*n, *id);
                }
            }
            TableOp::RemoveVrf(id) => {
                if let Some(vni) = self
                    .vrfs
                    .get_mut(id.0 as usize)
                    .and_then(Option::take)
                    .and_then(|v| v.vni)
                {
                    self.vni_to_vrf.remove(&vni);
                }
            }
            TableOp::UpsertNextHop(id, nh) => {
                let i = id.0 as usize;
                if self.nexthops.len() <= i {
                    self.nexthops.resize_with(i + 1, || None);
                }
                let old = self.nexthops[i].take();
                if let Some(o) = &old {
                    self.count_nexthop_refs(o, false);
                    self.index_tunnel(*id, o, false);
                }
                let new = match (old, nh) {
                    // Keep the bucket assignment so that only moved members' flows move.
                    (Some(NextHop::Composite(mut e)), NextHop::Composite(n)) => {
                        e.set_members(n.members());
                        NextHop::Composite(e)
                    }
                    _ => nh.clone(),
                };
                self.count_nexthop_refs(&new, true);
                self.index_tunnel(*id, &new, true);
                self.nexthops[i] = Some(new);
            }
            TableOp::RemoveNextHop(id) => {
                if let Some(old) = self.nexthops.get_mut(id.0 as usize).and_then(Option::take) {
                    self.count_nexthop_refs(&old, false);
                    self.index_tunnel(*id, &old, false);
                }
            }
            TableOp::AddRoute { vrf, prefix, nh } => {
                let Some(v) = self.vrf_mut(*vrf) else { return };
                let old = match prefix.addr() {
                    IpAddr::V4(a) => v.fib4.insert(a, prefix.prefix_len(), *nh).ok(),
                    IpAddr::V6(a) => v.fib6.insert(a, prefix.prefix_len(), *nh).ok(),
                };
                if let Some(old) = old {
                    self.repoint(old, Some(*nh));
                }
            }
            TableOp::RemoveRoute { vrf, prefix } => {
                let Some(v) = self.vrf_mut(*vrf) else { return };
                let old = match prefix.addr() {
                    IpAddr::V4(a) => v.fib4.remove(a, prefix.prefix_len()),
                    IpAddr::V6(a) => v.fib6.remove(a, prefix.prefix_len()),
                };
                self.repoint(old, None);
            }
            TableOp::AddLabel { label, nh } => {
                let old = self.labels.insert(*label, *nh);
                self.repoint(old, Some(*nh));
            }
            TableOp::RemoveLabel(label) => {
                let old = self.labels.remove(*label);
                self.repoint(old, None);
            }
            TableOp::AddBridge { vrf, mac, nh } => {
                let Some(v) = self.vrf_mut(*vrf) else { return };
                let old = v.bridge.insert(*mac, *nh);
                self.repoint(old, Some(*nh));
            }
            TableOp::RemoveBridge { vrf, mac } => {
                let Some(v) = self.vrf_mut(*vrf) else { return };
                let old = v.bridge.remove(mac);
                self.repoint(old, None);
            }
            TableOp::SetPolicy { vrf, policy } => {
                if let Some(v) = self.vrf_mut(*vrf) {
                    v.policy = policy.clone();
                }
            }
            TableOp::SetGateway {
                vrf,
                mac,
                addresses,
            } => {
                if let Some(v) = self.vrf_mut(*vrf) {
                    v.router_mac = *mac;
                    v.gateways.clone_from(addresses);
                }
            }
            TableOp::SetFlowQuota { vrf, max } => {
                if let Some(v) = self.vrf_mut(*vrf) {
                    v.flow_quota = *max;
                }
            }
            TableOp::SetChains(chains) => {
                self.chains
                    .set(chains.to_vec(), port_up(&self.ports_down, &self.interfaces));
                self.follow_service_vrfs();
            }
            TableOp::SetPortHealth { interface, up } => {
                if *up {
                    self.ports_down.remove(interface);
                } else {
                    self.ports_down.insert(*interface);
                }
                self.follow_chain_health();
            }
            TableOp::SetFlood { vrf, members } => {
                let Some(v) = self.vrf_mut(*vrf) else { return };
                let old = core::mem::replace(&mut v.flood, members.clone());
                for o in old {
                    self.repoint(Some(o), None);
                }
                for m in members {
                    self.repoint(None, Some(*m));
                }
            }
        }
    }
}

impl Absorb<TableOp> for ForwardingState {
    fn absorb_first(&mut self, op: &mut TableOp, _other: &Self) {
        self.apply(op);
    }

    fn absorb_second(&mut self, op: TableOp, _other: &Self) {
        self.apply(&op);
    }

    fn sync_with(&mut self, first: &Self) {
        // Called once, at the first publish, which `Tables::new` does on an empty state.
        self.clone_from(first);
    }
}

/// The writer side: validates batches and publishes them. There is one writer.
pub struct TablesWriter {
    handle: WriteHandle<ForwardingState, TableOp>,
}

impl core::fmt::Debug for TablesWriter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TablesWriter").finish_non_exhaustive()
    }
}

/// A dataplane worker's read handle (one per thread: it is `Send` but not `Sync`).
pub struct TablesReader {
    handle: ReadHandle<ForwardingState>,
}

impl core::fmt::Debug for TablesReader {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TablesReader").finish_non_exhaustive()
    }
}

/// Makes read handles for new worker threads (`Send + Sync`).
#[derive(Clone)]
pub struct TablesReaderFactory {
    factory: ReadHandleFactory<ForwardingState>,
}

impl TablesReaderFactory {
    pub fn reader(&self) -> TablesReader {
        TablesReader {
            handle: self.factory.handle(),
        }
    }
}

impl TablesReader {
    /// The current version of the tables, held until the guard drops: take it once per
    /// vector. `None` only once the writer is gone (shutdown).
    #[inline]
    pub fn enter(&self) -> Option<ReadGuard<'_, ForwardingState>> {
        self.handle.enter()
    }

    pub fn factory(&self) -> TablesReaderFactory {
        TablesReaderFactory {
            factory: self.handle.factory(),
        }
    }
}

/// Creates empty tables: the writer and a first reader.
pub fn new_tables() -> (TablesWriter, TablesReader) {
    let (mut handle, reader) = left_right::new_from_empty(ForwardingState::default());
    handle.publish();
    (TablesWriter { handle }, TablesReader { handle: reader })
}

impl TablesWriter {
    /// Validates the whole batch against the published state and, if every change is
    /// valid, publishes it; otherwise changes nothing and names the first bad change.
    pub fn commit(&mut self, ops: Vec<TableOp>) -> Result<(), BatchError> {
        {
            let current = self.handle.enter().ok_or(BatchError::closed())?;
            validate::validate(&current, &ops)?;
        }
        self.handle.extend(ops);
        self.handle.publish();
        Ok(())
    }

    /// A reader factory for worker threads.
    pub fn readers(&self) -> TablesReaderFactory {
        TablesReaderFactory {
            factory: self.handle.factory(),
        }
    }

    /// Reads the published state (the control plane's own view).
    pub fn read(&self) -> Option<ReadGuard<'_, ForwardingState>> {
        self.handle.enter()
    }
}

#[cfg(test)]
mod tests;
