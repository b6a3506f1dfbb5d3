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
//!
//! A pass between instances on two hosts is bridged in the ports' network to the
//! function's MAC; the receiving host keys such a frame by the port it is sent into
//! (`ovr_tables::chain::into_key_vrf`), so each function a session enters on a host has
//! a flow of its own there, both ways, however often the session comes back to the host.

use crate::decide::{self, Lookup, Route};
use crate::drop::Reason;
use core::net::IpAddr;
use ovr_tables::chain::{
    ChainId, ServicePort, Side, into_key_port, into_key_vrf, is_service_key, key_port, key_vrf,
};
use ovr_tables::flow::FlowKey;
use ovr_tables::ids::InterfaceId;
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::NextHop;
use ovr_tables::state::ForwardingState;
use ovr_tables::vrf::Vrf;
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
        // The other direction comes back out of the instance here, or, from an instance
        // on another host, is sent into this port by its MAC.
        let rev_vrf = match st.nexthop(nh) {
            Some(NextHop::Interface { interface, .. }) => key_vrf(*interface),
            Some(NextHop::Tunnel(_)) => {
                into_key_vrf(key_port(key.vrf).ok_or(Reason::ChainUnplaced)?)
            }
            _ => return Err(Reason::ChainUnplaced),
        };
        return Ok(Steered {
            nh,
            rev: Some((rev_vrf, back)),
        });
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

/// The service port here that a frame from another host is addressed to (bridged in
/// the ports' network `vrf` to the function's MAC): a pass of a chain from an instance
/// there into this one. `None`: not such a frame (or no service port in the network:
/// one branch).
#[inline]
pub fn into_port(st: &ForwardingState, vrf: &Vrf, dst: &[u8; 6]) -> Option<InterfaceId> {
    if !st.has_service_ports(vrf.id) {
        return None;
    }
    into_port_slow(st, vrf, dst)
}

#[cold]
fn into_port_slow(st: &ForwardingState, vrf: &Vrf, dst: &[u8; 6]) -> Option<InterfaceId> {
    let nh = vrf.bridge.lookup(&MacAddr(*dst))?;
    let Some(NextHop::Interface { interface, .. }) = st.nexthop(nh) else {
        return None;
    };
    st.service_port(*interface).map(|_| *interface)
}

/// A frame another host sent into service port `port` (keyed by `into_key_vrf`): into
/// the function, as its MAC says. Into a left side past the first function, the pair's
/// reverse (the replies out of this left side) goes back into the instance of the
/// function before whose request this is: on the host that sent it (`sender`), the one
/// whose right MAC the frame comes from (`src_mac`; a host sends a pass between
/// instances from the function's own MAC). `None` for the reverse: no such instance (the
/// replies then set up their own way, picked by hash).
pub fn into(
    st: &ForwardingState,
    port: InterfaceId,
    sender: Option<IpAddr>,
    src_mac: MacAddr,
) -> Result<Steered, Reason> {
    let p = st.service_port(port).ok_or(Reason::ChainUnplaced)?;
    let chains = st.chains();
    let nh = chains
        .instance(&p)
        .ok_or(Reason::ChainUnplaced)?
        .nexthop(p.side);
    let rev = match (p.side, sender) {
        (Side::Left, Some(sender)) if p.hop > 0 => {
            sending_instance(st, p.chain, usize::from(p.hop) - 1, sender, src_mac)
                .map(|back| (key_vrf(port), back))
        }
        _ => None,
    };
    Ok(Steered { nh, rev })
}

/// The right next hop of function `hop`'s instance on host `sender` whose right MAC is
/// `mac`, as this host reaches it (a tunnel to that host, to that MAC); failing that,
/// the function's only instance on that host (a session moved to it from another there
/// that is gone).
pub fn sending_instance(
    st: &ForwardingState,
    chain: ChainId,
    hop: usize,
    sender: IpAddr,
    mac: MacAddr,
) -> Option<NextHopId> {
    let on_sender = st
        .chains()
        .function(chain, hop)?
        .instances
        .iter()
        .filter_map(|i| match st.nexthop(i.right_nh) {
            Some(NextHop::Tunnel(t)) if t.dst == sender => Some((i.right_nh, t.inner_dst)),
            _ => None,
        });
    let mut only = None;
    for (n, (nh, to)) in on_sender.enumerate() {
        if to == Some(mac) {
            return Some(nh);
        }
        only = (n == 0).then_some(nh);
    }
    only
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
/// or it is a chain's entry, which the policy decides), with the key VRF of its pair's
/// reverse as a new pair would have it (a pass out of a function). `reverse`: the flow
/// was installed as a pair's reply direction, which goes back into the instance it
/// names, or into another of the same function if that one is no longer healthy.
pub fn decide_again(
    st: &ForwardingState,
    key: &FlowKey,
    dst_mac: MacAddr,
    previous: Option<NextHopId>,
    reverse: bool,
) -> Option<Result<Steered, Reason>> {
    let alone = |nh| Steered { nh, rev: None };
    if let Some(port) = into_key_port(key.vrf) {
        // Into the port the frame's MAC names, as bridging would.
        let p = st.service_port(port);
        let nh = p.and_then(|p| Some(st.chains().instance(&p)?.nexthop(p.side)));
        return Some(nh.map(alone).ok_or(Reason::ChainUnplaced));
    }
    if let Some(port) = port_of_key(st, key) {
        let hash = key.symmetric_hash();
        return Some(port.and_then(|p| from_port(st, p, key, dst_mac, hash, previous)));
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
            .map(alone)
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
    if let Some(port) = into_key_port(vrf) {
        return match st.service_port(port) {
            Some(p) => format!(
                "into service port {} from another host ({})",
                crate::describe::interface(st, port.0),
                describe_port(st, &p)
            ),
            None => format!("into service port {} (no longer in a chain)", port.0),
        };
    }
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
