//! Service chains on the slow path: where a chained packet goes at each pass through
//! ovr, shared by flow setup and by the revalidation of cached flows.
//!
//! A session through a chain of n functions is n + 1 flow pairs, each installed with
//! its reverse as any flow is: the entry (source network → first function's left), one
//! per function's right (→ the next function's left, or the destination after the
//! last). A packet coming out of a function is told apart by its flow key (its VRF
//! field is the port's, `ovr_tables::chain::key_vrf`). Each pair's reverse sends the
//! reply back into the very instance the forward direction used, so replies take the
//! same instances whatever their hash; only a new pair picks an instance, by ECMP over
//! the healthy ones, keeping the one a session had while it stays healthy.

use crate::decide::{self, Lookup, Route};
use crate::drop::Reason;
use core::net::IpAddr;
use ovr_tables::chain::{ChainId, ServicePort, Side, is_service_key, key_port, key_vrf};
use ovr_tables::flow::{FlowAction, FlowEntry, FlowKey, FlowTable, flags as flow_flags};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::NextHop;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;

/// The decision for one pass: the next hop, and the reverse flow of the pair (its key's
/// VRF field and its next hop), if it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Steered {
    pub nh: NextHopId,
    pub rev: Option<(u32, NextHopId)>,
}

/// The flow-key VRF of packets coming back from the instance a next hop sends to: out
/// of its port when it is here; from its host, in the chain's source network, when it
/// is on another host (that host routes what leaves the chain's first function
/// leftwards in the source network, towards the source's host).
fn port_key_vrf(st: &ForwardingState, chain: ChainId, nh: NextHopId) -> Result<u32, Reason> {
    match st.nexthop(nh) {
        Some(NextHop::Interface { interface, .. }) => Ok(key_vrf(*interface)),
        Some(NextHop::Tunnel(_)) => st
            .chains()
            .chain(chain)
            .and_then(|c| c.from)
            .map(|v| v.0)
            .ok_or(Reason::ChainUnplaced),
        _ => Err(Reason::ChainUnplaced),
    }
}

/// Into the chain from its source network: the first function's left, on the instance
/// `previous` names while it is healthy, else by hash. Returns the next hop and the key
/// VRF its replies come back with.
pub fn enter(
    st: &ForwardingState,
    chain: ChainId,
    hash: u32,
    previous: Option<NextHopId>,
) -> Result<(NextHopId, u32), Reason> {
    st.chains().chain(chain).ok_or(Reason::ChainUnplaced)?;
    let nh = st
        .chains()
        .pick(chain, 0, Side::Left, hash, previous)
        .ok_or(Reason::ChainNoInstance)?;
    Ok((nh, port_key_vrf(st, chain, nh)?))
}

/// A packet out of service port `port`: out of a right side it goes to the next
/// function's left, or after the last function into the destination (looked up in the
/// chain's source network, as it would have been without the chain); out of a left side,
/// back the same way towards the source. The reverse goes back into this instance.
pub fn from_port(
    st: &ForwardingState,
    port: ServicePort,
    key: &FlowKey,
    dst_mac: MacAddr,
    hash: u32,
    previous: Option<NextHopId>,
) -> Result<Steered, Reason> {
    if key.bridged {
        // Not sent to the gateway: an in-network function routes.
        return Err(Reason::ChainUnplaced);
    }
    let chains = st.chains();
    let chain = chains.chain(port.chain).ok_or(Reason::ChainUnplaced)?;
    let back = chains
        .instance(&port)
        .ok_or(Reason::ChainUnplaced)?
        .nexthop(port.side);
    let hop = usize::from(port.hop);
    let next = match port.side {
        Side::Right if hop + 1 < chain.functions.len() => Some((hop + 1, Side::Left)),
        Side::Left if hop > 0 => Some((hop - 1, Side::Right)),
        _ => None,
    };
    if let Some((hop, side)) = next {
        let nh = chains
            .pick(port.chain, hop, side, hash, previous)
            .ok_or(Reason::ChainNoInstance)?;
        let rev_vrf = port_key_vrf(st, port.chain, nh)?;
        // Leftwards into an instance on another host, the pair would have its reverse in
        // the source network, the key of the chain's entry flow: none (requests do not
        // come out of a left side).
        let rev = (side == Side::Left || is_service_key(rev_vrf)).then_some((rev_vrf, back));
        return Ok(Steered { nh, rev });
    }
    // Out of the chain: routed in the source network.
    let from = chain.from.ok_or(Reason::ChainUnplaced)?;
    let mut k = *key;
    k.vrf = from.0;
    let lookup = Lookup {
        key: k,
        dst_mac,
        pinned: None,
        previous: previous.filter(|p| chains.nexthop(*p).is_none()),
        hash,
    };
    match decide::route(st, &lookup)? {
        Route::NextHop(nh) => Ok(Steered {
            nh,
            rev: Some((decide::destination_network(st, nh, from).0, back)),
        }),
        Route::Flood => Err(Reason::ChainUnplaced),
    }
}

/// A packet out of function k+1's left side (k ≥ 0) on its way back, whose request
/// came into this instance from another host (bridged in the ports' network, a flow
/// that remembers its sender): back to that host in the chain's source network, where
/// the reverse of the pair out of function k's instance sends it into the very instance
/// the request passed, rather than into one of function k's instances picked by this
/// packet's hash. `None`: not such a packet, or the sender runs no instance of
/// function k (then it is picked here).
pub fn back_to_request_host(
    st: &ForwardingState,
    flows: &FlowTable,
    port: &ServicePort,
    key: &FlowKey,
) -> Option<NextHopId> {
    if port.side != Side::Left || port.hop == 0 {
        return None;
    }
    let iface = key_port(key.vrf)?;
    let mut req = key.reverse();
    req.vrf = st.interface(iface)?.vrf?.0;
    req.bridged = true;
    let e = flows.get(flows.lookup(&req)?)?;
    let into_port = match e.action {
        Some(FlowAction::Forward { next_hop }) => matches!(
            st.nexthop(next_hop),
            Some(NextHop::Interface { interface, .. }) if *interface == iface
        ),
        _ => false,
    };
    if !into_port || e.flags & flow_flags::SENT == 0 {
        return None;
    }
    let sender = crate::meta::vtep(&e.sender);
    let chains = st.chains();
    let before = chains.function(port.chain, usize::from(port.hop) - 1)?;
    let runs_it = before
        .instances
        .iter()
        .any(|i| matches!(st.nexthop(i.right_nh), Some(NextHop::Tunnel(t)) if t.dst == sender));
    if !runs_it {
        return None;
    }
    let from = chains.chain(port.chain)?.from?;
    st.routed_tunnel(st.vrf(from)?.vni?, sender)
}

/// The key of the packets out of the left side of the service port a bridged flow
/// sends into, when that port is a left side past the chain's first function: the
/// replies `back_to_request_host` sends to the flow's sender (taken again when the
/// sender changes: the session moved).
pub fn reply_key_of_bridged(st: &ForwardingState, e: &FlowEntry) -> Option<FlowKey> {
    if !e.key.bridged {
        return None;
    }
    let Some(FlowAction::Forward { next_hop }) = e.action else {
        return None;
    };
    let Some(NextHop::Interface { interface, .. }) = st.nexthop(next_hop) else {
        return None;
    };
    let p = st.service_port(*interface)?;
    if p.side != Side::Left || p.hop == 0 {
        return None;
    }
    let mut k = e.key.reverse();
    k.vrf = key_vrf(*interface);
    k.bridged = false;
    Some(k)
}

/// Whether `vtep` is the host of an instance of some chain here (one reached through a
/// tunnel to it).
fn hosts_instance(st: &ForwardingState, vtep: IpAddr) -> bool {
    st.chains().chains().iter().any(|c| {
        c.functions.iter().flat_map(|f| &f.instances).any(|i| {
            [i.left_nh, i.right_nh]
                .iter()
                .any(|nh| matches!(st.nexthop(*nh), Some(NextHop::Tunnel(t)) if t.dst == vtep))
        })
    })
}

/// The routed tunnel back to `vtep` in the flow's network, if that host runs an instance
/// of a chain.
fn to_instance_host(st: &ForwardingState, key: &FlowKey, vtep: IpAddr) -> Option<NextHopId> {
    let vni = st.vrf(key.vrf())?.vni?;
    if !hosts_instance(st, vtep) {
        return None;
    }
    st.routed_tunnel(vni, vtep)
}

/// The reverse of a routed flow that arrived from another host (`sender`, the outer
/// source), when that host runs a chain's instance and the route back (`rev_nh`) does
/// not lead there: a session whose instance is on a third host reaches the destination
/// from the instance's host, and its replies must go back through the instance (that
/// host holds the pair out of it, whose reverse sends them in), not straight to the
/// source. `None`: the route's own way back stands. Taken again from the latest sender
/// when the tables change or the request's packets start coming from another host (the
/// session moved to an instance there: `nodes::flow`'s sender check).
pub fn reply_to_sender(
    st: &ForwardingState,
    key: &FlowKey,
    sender: IpAddr,
    rev_nh: Option<NextHopId>,
) -> Option<NextHopId> {
    if key.bridged || is_service_key(key.vrf) {
        return None;
    }
    if let Some(NextHop::Tunnel(t)) = rev_nh.and_then(|n| st.nexthop(n))
        && t.dst == sender
    {
        return None;
    }
    to_instance_host(st, key, sender)
}

/// The service port a flow key came from, if it came from one.
pub fn port_of_key(st: &ForwardingState, key: &FlowKey) -> Option<Result<ServicePort, Reason>> {
    let port = key_port(key.vrf)?;
    Some(st.service_port(port).ok_or(Reason::ChainUnplaced))
}

/// A cached flow's decision taken again when it belongs to a chain (`None`: it does not,
/// or it is a chain's entry, which the policy decides). `reverse`: the flow was
/// installed as a pair's reply direction, which goes back into the instance it names,
/// or into another of the same function if that one is no longer healthy.
pub fn decide_again(
    st: &ForwardingState,
    key: &FlowKey,
    dst_mac: MacAddr,
    previous: Option<NextHopId>,
    reverse: bool,
) -> Option<Result<NextHopId, Reason>> {
    if let Some(port) = port_of_key(st, key) {
        let hash = key.symmetric_hash();
        return Some(
            port.and_then(|p| from_port(st, p, key, dst_mac, hash, previous).map(|s| s.nh)),
        );
    }
    if !reverse {
        return None;
    }
    let p = st.chains().nexthop(previous?)?;
    Some(
        st.chains()
            .pick(
                p.chain,
                usize::from(p.hop),
                p.side,
                key.symmetric_hash(),
                previous,
            )
            .ok_or(Reason::ChainNoInstance),
    )
}

/// "chain c: function fw, instance fw-1, left" for a service port (trace).
pub fn describe_port(st: &ForwardingState, p: &ServicePort) -> String {
    let chains = st.chains();
    let name = chains.chain(p.chain).map_or("?", |c| c.name.as_str());
    let f = chains.function(p.chain, usize::from(p.hop));
    let n = chains.chain(p.chain).map_or(0, |c| c.functions.len());
    format!(
        "chain {name}: function {} ({} of {n}), instance {}, {}",
        f.map_or("?", |f| f.name.as_str()),
        p.hop + 1,
        chains.instance(p).map_or("?", |i| i.name.as_str()),
        p.side.name()
    )
}

/// The network a flow key's VRF field names, or the service port it came from (trace).
pub fn describe_key_vrf(st: &ForwardingState, vrf: u32) -> String {
    let Some(port) = key_port(vrf) else {
        return crate::describe::vrf(st, vrf);
    };
    match st.service_port(port) {
        Some(p) => format!(
            "from service port {} ({})",
            crate::describe::interface(st, port.0),
            describe_port(st, &p)
        ),
        None => format!("from service port {} (no longer in a chain)", port.0),
    }
}
