//! arp: the virtual gateway answers ARP requests for its addresses (and for the VTEP
//! addresses on the underlay); other ARP within a network is bridged or flooded. A
//! service function's reply to a health probe is taken here (`probe`).

use super::drop;
use crate::context::Cx;
use crate::describe;
use crate::drop::Reason;
use crate::forward::{Dest, dest};
use crate::meta::flags;
use ovr_graph::{CONSUMED, Node, Vector, next_nodes};
use ovr_tables::ids::{InterfaceId, VrfId};
use ovr_tables::interface::InterfaceKind;
use ovr_tables::state::ForwardingState;
use ovr_wire::arp::{ArpOp, ArpPacket, ArpRepr, PACKET_LEN};
use ovr_wire::ethernet::{EthernetFrame, HEADER_LEN, MacAddr};

next_nodes! {
    pub enum Next {
        Flood = "flood",
        Vxlan = "encap-vxlan",
        Mpls = "encap-mpls",
        Output = "interface-output",
        Drop = "drop",
    }
}

pub struct Arp;

impl Node<Cx, ForwardingState> for Arp {
    fn name(&self) -> &'static str {
        "arp"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        v.map(|_, p| {
            // A function's answer to a health probe ends here.
            if crate::probe::take_arp_reply(cx, st, p) {
                CONSUMED
            } else {
                handle(cx, st, p).into()
            }
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        Some(format!(
            "{}, out {}",
            describe::vrf(st, m.vrf),
            describe::interface(st, m.tx_if)
        ))
    }
}

fn handle(cx: &mut Cx, st: &ForwardingState, p: u32) -> Next {
    let (meta, data) = cx.pool.split_mut(p);
    let l3 = usize::from(meta.l3);
    let arp = match ArpPacket::new_checked(&data[l3..]) {
        Ok(a) => ArpRepr::parse(&a),
        Err(e) => return drop(meta, e, Next::Drop),
    };
    let Some(rx) = st.interface(InterfaceId(meta.rx_if)) else {
        return drop(meta, Reason::UnknownInterface, Next::Drop);
    };
    let request = arp.operation == ArpOp::Request;
    let target = core::net::IpAddr::V4(arp.target_ip);
    // On the underlay, only our own addresses are answered.
    if rx.kind == InterfaceKind::Underlay && !meta.has(flags::FROM_TUNNEL) {
        if request && rx.addresses.iter().any(|a| a.addr == target) {
            return reply(cx, p, arp, rx.mac, rx.id);
        }
        return drop(meta, Reason::ArpNotForUs, Next::Drop);
    }
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(meta, Reason::NoVrf, Next::Drop);
    };
    // Every host answers for the distributed gateway, so a request that came through a
    // tunnel was meant for the remote host's own workloads: it is bridged, not answered.
    if request && !meta.has(flags::FROM_TUNNEL) && vrf.is_gateway(target) {
        return reply(cx, p, arp, vrf.router_mac, rx.id);
    }
    let dst = EthernetFrame::new_unchecked(&data[..]).dst();
    if dst.is_multicast() {
        return Next::Flood;
    }
    match vrf.bridge.lookup(&dst) {
        None => Next::Flood,
        Some(nh) => match dest(st, meta, nh) {
            Dest::Output => Next::Output,
            Dest::Vxlan => Next::Vxlan,
            Dest::Mpls => Next::Mpls,
            Dest::Drop(r) => drop(meta, r, Next::Drop),
            Dest::IpRewrite | Dest::Gateway => drop(meta, Reason::NextHopUnsupported, Next::Drop),
        },
    }
}

/// Turns the request into its reply in place and sends it back where it came from.
fn reply(cx: &mut Cx, p: u32, req: ArpRepr, mac: MacAddr, iface: InterfaceId) -> Next {
    let l3 = usize::from(cx.pool.meta(p).l3);
    // Padding after the ARP packet is dropped; the reply is exactly header + ARP.
    cx.pool.truncate(p, l3 + PACKET_LEN);
    let (meta, data) = cx.pool.split_mut(p);
    let mut eth = EthernetFrame::new_unchecked(&mut data[..]);
    eth.set_dst(req.sender_mac);
    eth.set_src(mac);
    ArpRepr {
        operation: ArpOp::Reply,
        sender_mac: mac,
        sender_ip: req.target_ip,
        target_mac: req.sender_mac,
        target_ip: req.sender_ip,
    }
    .emit(&mut data[l3..]);
    meta.tx_if = iface.0;
    debug_assert!(l3 >= HEADER_LEN);
    Next::Output
}
