//! Words for the packet trace: interfaces, VRFs and next hops as an operator reads them
//! (names from the tables, ids in brackets). Used only for traced packets (cold path).

use crate::drop::DropReason;
use crate::meta::Meta;
use core::fmt::Write;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::nexthop::{Encap, Inner, NextHop};
use ovr_tables::state::ForwardingState;

/// "vm1", or "if 7" for an interface not in the tables.
pub fn interface(st: &ForwardingState, id: u32) -> String {
    st.interface(InterfaceId(id))
        .map_or_else(|| format!("if {id}"), |i| i.name.clone())
}

/// "vrf red (1, vni 100)", or "vrf 7 (unknown)".
pub fn vrf(st: &ForwardingState, id: u32) -> String {
    match st.vrf(VrfId(id)) {
        Some(v) => match v.vni {
            Some(vni) => format!("vrf {} ({id}, vni {vni})", v.name),
            None => format!("vrf {} ({id})", v.name),
        },
        None if id == u32::MAX => "no vrf".into(),
        None => format!("vrf {id} (unknown)"),
    }
}

/// "next hop 3: interface vm2 to 02:00:00:00:02:05", "next hop 5: vxlan vni 100
/// 192.0.2.1 -> 192.0.2.2 via und0", ...
pub fn nexthop(st: &ForwardingState, id: u32) -> String {
    let mut s = format!("next hop {id}: ");
    let _ = match st.nexthop(NextHopId(id)) {
        None => write!(s, "unknown"),
        Some(NextHop::Drop) => write!(s, "discard"),
        Some(NextHop::Receive) => write!(s, "receive (the virtual gateway)"),
        Some(NextHop::Interface {
            interface: i,
            dst_mac,
        }) => {
            let _ = write!(s, "interface {} to {dst_mac}", interface(st, i.0));
            match st.chains().nexthop(NextHopId(id)) {
                Some(p) => write!(s, " ({})", crate::chain::describe_port(st, &p)),
                None => Ok(()),
            }
        }
        Some(NextHop::Tunnel(t)) => {
            let _ = match t.encap {
                Encap::Vxlan { vni } => write!(s, "vxlan vni {vni}"),
                Encap::MplsOverUdp { label } => write!(s, "mpls-over-udp label {label}"),
                Encap::MplsOverGre { label } => write!(s, "mpls-over-gre label {label}"),
            };
            let _ = write!(
                s,
                " {} -> {} via {}",
                t.src,
                t.dst,
                interface(st, t.underlay.0)
            );
            if let Some(mac) = t.inner_dst {
                let _ = write!(s, " to {mac}");
            }
            match st.chains().nexthop(NextHopId(id)) {
                Some(p) => write!(s, " ({})", crate::chain::describe_port(st, &p)),
                None => Ok(()),
            }
        }
        Some(NextHop::Composite(e)) => write!(s, "ecmp over {} members", e.members().len()),
        Some(NextHop::Vrf { vrf: v, inner }) => write!(
            s,
            "{} lookup in {}",
            match inner {
                Inner::Ethernet => "bridge",
                Inner::Ip => "route",
            },
            vrf(st, v.0)
        ),
    };
    s
}

/// "dropped: no_route (no route to the destination in the VRF)".
pub fn dropped(meta: &Meta) -> String {
    let r = DropReason(meta.drop);
    format!("dropped: {} ({})", r.name(), r.description())
}
