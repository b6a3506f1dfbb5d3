//! The slow path's decisions, shared by flow setup and by the revalidation of cached
//! flows after a table change: where a flow goes (bridge or FIB, then the ECMP member),
//! which network that is, and what the policy says.

use crate::drop::Reason;
use ovr_tables::flow::FlowKey;
use ovr_tables::ids::{NextHopId, VrfId};
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::policy::{PolicyAction, PolicyQuery, default_verdict};
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;

/// Where a flow goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// To this next hop (never a composite).
    NextHop(NextHopId),
    /// Bridged to an unknown MAC: flooded, no flow.
    Flood,
}

/// What a flow needs to be looked up: its key, and for a bridged flow its destination MAC.
#[derive(Debug, Clone, Copy)]
pub struct Lookup {
    pub key: FlowKey,
    pub dst_mac: MacAddr,
    /// A next hop already chosen (by an MPLS label), in place of the FIB.
    pub pinned: Option<NextHopId>,
    /// The member a flow used before, kept if it is still a member (ECMP affinity).
    pub previous: Option<NextHopId>,
    pub hash: u32,
}

/// The next hop for a flow, resolved through a composite by the flow hash.
pub fn route(state: &ForwardingState, l: &Lookup) -> Result<Route, Reason> {
    let vrf = state.vrf(l.key.vrf()).ok_or(Reason::NoVrf)?;
    let nh = if l.key.bridged {
        match vrf.bridge.lookup(&l.dst_mac) {
            Some(nh) => nh,
            None => return Ok(Route::Flood),
        }
    } else if let Some(p) = l.pinned {
        p
    } else {
        let found = match l.key.dst_ip() {
            core::net::IpAddr::V4(a) => vrf.fib4.lookup(a.into()),
            core::net::IpAddr::V6(a) => vrf.fib6.lookup(a.into()),
        };
        found.ok_or(Reason::NoRoute)?
    };
    match state.nexthop(nh).ok_or(Reason::NoNextHop)? {
        NextHop::Composite(e) => {
            let keep = l.previous.filter(|p| e.members().contains(p));
            Ok(Route::NextHop(keep.unwrap_or_else(|| e.select(l.hash))))
        }
        _ => Ok(Route::NextHop(nh)),
    }
}

/// The network a next hop leads into: a local interface's VRF, or the local VRF of a
/// VXLAN tunnel's VNI; otherwise (MPLS, unknown VNI) the flow's own network.
pub fn destination_network(state: &ForwardingState, nh: NextHopId, own: VrfId) -> VrfId {
    match state.nexthop(nh) {
        Some(NextHop::Interface { interface, .. }) => state
            .interface(*interface)
            .and_then(|i| i.vrf)
            .unwrap_or(own),
        Some(NextHop::Tunnel(t)) => match t.encap {
            Encap::Vxlan { vni } => state.vrf_by_vni(vni).map_or(own, |v| v.id),
            _ => own,
        },
        _ => own,
    }
}

/// What the policy of the flow's source network says of it (`key` in the direction of
/// the flow's first packet): allow, deny, or allow through a service chain.
pub fn verdict(state: &ForwardingState, key: &FlowKey, dst_net: VrfId) -> PolicyAction {
    let q = PolicyQuery {
        src_net: key.vrf(),
        dst_net,
        src: key.src_ip(),
        dst: key.dst_ip(),
        protocol: key.protocol,
        src_port: key.src_port,
        dst_port: key.dst_port,
    };
    match state.vrf(key.vrf()) {
        Some(v) => v.policy.evaluate(&q),
        None => default_verdict(&q),
    }
    .action
}

/// Whether the policy of the flow's source network lets it pass (directly or through
/// a chain).
pub fn allowed(state: &ForwardingState, key: &FlowKey, dst_net: VrfId) -> bool {
    verdict(state, key, dst_net) != PolicyAction::Deny
}
