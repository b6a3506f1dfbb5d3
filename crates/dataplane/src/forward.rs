//! Where a packet goes once its next hop is known: the same choice is made after a flow
//! hit, after flow setup, for ARP and for flood replicas.

use crate::drop::Reason;
use crate::meta::{Meta, flags};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;

/// The kind of node a packet goes to next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// Routed: TTL and MAC rewrite first.
    IpRewrite,
    /// Out of a local interface as it is.
    Output,
    Vxlan,
    Mpls,
    /// To the virtual gateway itself.
    Gateway,
    Drop(Reason),
}

/// Sets `meta.next_hop` and `meta.tx_if` for `nh` and says where the packet goes.
/// `nh` must be resolved (not a composite).
pub fn dest(state: &ForwardingState, meta: &mut Meta, nh: NextHopId) -> Dest {
    meta.next_hop = nh.0;
    let routed = meta.has(flags::ROUTED);
    match state.nexthop(nh) {
        None => Dest::Drop(Reason::NoNextHop),
        Some(NextHop::Drop) => Dest::Drop(Reason::NextHopDrop),
        Some(NextHop::Receive) => Dest::Gateway,
        Some(NextHop::Interface { interface, .. }) => {
            meta.tx_if = interface.0;
            if routed {
                Dest::IpRewrite
            } else {
                Dest::Output
            }
        }
        Some(NextHop::Tunnel(t)) => {
            meta.tx_if = t.underlay.0;
            match (routed, t.encap) {
                (true, _) => Dest::IpRewrite,
                (false, Encap::Vxlan { .. }) => Dest::Vxlan,
                (false, _) => Dest::Mpls,
            }
        }
        Some(NextHop::Composite(_) | NextHop::Vrf { .. }) => Dest::Drop(Reason::NextHopUnsupported),
    }
}
