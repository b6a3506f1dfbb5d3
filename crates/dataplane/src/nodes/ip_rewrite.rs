//! ip-rewrite: what routing does to a packet. The TTL (hop limit) goes down by one,
//! once, at the host where the packet entered the overlay (a tunnel is one hop), with the
//! IPv4 checksum patched incrementally; then the L2 header for the next hop: the local
//! workload's MAC, the gateway MAC inside VXLAN (or the MAC of a network function's port
//! on the remote host, which bridges it there), or none at all inside MPLS.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::{Meta, flags};
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::chain::key_port;
use ovr_tables::ids::{NextHopId, VrfId};
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::{EthernetFrame, HEADER_LEN};
use ovr_wire::ipv4::Ipv4Packet;
use ovr_wire::ipv6::Ipv6Packet;

next_nodes! {
    pub enum Next {
        Vxlan = "encap-vxlan",
        Mpls = "encap-mpls",
        Output = "interface-output",
        Drop = "drop",
    }
}

pub struct IpRewrite;

impl Node<Cx, ForwardingState> for IpRewrite {
    fn name(&self) -> &'static str {
        "ip-rewrite"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        v.map(|_, p| rewrite(cx, st, p));
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        let data = cx.pool.data(pkt);
        // The TTL (IPv4) or hop limit (IPv6) as the packet leaves.
        let at = usize::from(m.l3) + if m.has(flags::IPV6) { 7 } else { 8 };
        let ttl = data
            .get(at)
            .map_or(String::new(), |t| format!(", ttl now {t}"));
        let kept = if m.has(flags::FROM_TUNNEL) {
            " (from a tunnel: ttl kept)"
        } else {
            ""
        };
        Some(format!(
            "{}{ttl}{kept}",
            crate::describe::nexthop(st, m.next_hop)
        ))
    }
}

fn rewrite(cx: &mut Cx, st: &ForwardingState, p: u32) -> Next {
    let (meta, data) = cx.pool.split_mut(p);
    if usize::from(meta.l3) != HEADER_LEN {
        return drop(meta, Reason::VlanNotAllowed, Next::Drop);
    }
    if !meta.has(flags::FROM_TUNNEL) && decrement_ttl(meta, &mut data[HEADER_LEN..]) == 0 {
        return drop(meta, Reason::TtlExpired, Next::Drop);
    }
    let Some(nh) = st.nexthop(NextHopId(meta.next_hop)) else {
        return drop(meta, Reason::NoNextHop, Next::Drop);
    };
    match nh {
        NextHop::Interface { interface, dst_mac } => {
            let Some(iface) = st.interface(*interface) else {
                return drop(meta, Reason::UnknownInterface, Next::Drop);
            };
            let mut eth = EthernetFrame::new_unchecked(&mut data[..]);
            eth.set_src(iface.mac);
            eth.set_dst(*dst_mac);
            Next::Output
        }
        NextHop::Tunnel(t) => match t.encap {
            Encap::Vxlan { vni } => {
                // Inside VXLAN a routed packet is addressed to the remote gateway, which
                // has the MAC of the destination network's gateway.
                let vrf = st.vrf_by_vni(vni).or_else(|| st.vrf(VrfId(meta.vrf)));
                let Some(vrf) = vrf else {
                    return drop(meta, Reason::NoVrf, Next::Drop);
                };
                let mut eth = EthernetFrame::new_unchecked(&mut data[..]);
                // A pass from a function here to one on that host leaves from the
                // function's own MAC: that host tells by it which instance the session
                // comes from, for the replies (`chain::into`).
                if t.inner_dst.is_none() || key_port(meta.key.vrf).is_none() {
                    eth.set_src(vrf.router_mac);
                }
                // To a network function's port behind that host: bridged there to it.
                eth.set_dst(t.inner_dst.unwrap_or(vrf.router_mac));
                Next::Vxlan
            }
            // MPLS carries the IP packet alone: its label says what it is.
            _ => {
                cx.pool.pull_front(p, HEADER_LEN);
                cx.pool.meta_mut(p).l3 = 0;
                Next::Mpls
            }
        },
        _ => drop(meta, Reason::NextHopUnsupported, Next::Drop),
    }
}

fn decrement_ttl(meta: &Meta, ip: &mut [u8]) -> u8 {
    if meta.has(flags::IPV6) {
        Ipv6Packet::new_unchecked(ip).decrement_hop_limit()
    } else {
        Ipv4Packet::new_unchecked(ip).decrement_ttl()
    }
}
