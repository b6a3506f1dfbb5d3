//! mpls-decap: MPLS-in-UDP and MPLS-in-GRE. The label's next hop says what the payload
//! is and where it goes: a local interface (an IP packet for that workload), or a VRF in
//! which to bridge (an Ethernet frame) or route (an IP packet).

use super::drop;
use crate::context::Cx;
use crate::drop::{DropReason, Reason};
use crate::meta::{Meta, flags};
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::VrfId;
use ovr_tables::nexthop::{Inner, NextHop};
use ovr_tables::state::ForwardingState;
use ovr_wire::WireError;
use ovr_wire::ethernet::{EthernetRepr, HEADER_LEN, MacAddr, ethertype};
use ovr_wire::gre::GrePacket;
use ovr_wire::mpls::{LabelStack, payload_ip_version};

next_nodes! {
    pub enum Next {
        Ethernet = "ethernet-input",
        Ip = "ip-input",
        Drop = "drop",
    }
}

pub struct MplsDecap;

impl Node<Cx, ForwardingState> for MplsDecap {
    fn name(&self) -> &'static str {
        "mpls-decap"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        v.map(|_, p| match decap(cx, st, p) {
            Ok(n) => n,
            Err(r) => drop(cx.pool.meta_mut(p), r, Next::Drop),
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        Some(format!(
            "label -> {}; into {}",
            crate::describe::nexthop(st, m.pinned),
            crate::describe::vrf(st, m.vrf)
        ))
    }
}

/// Offset of the label stack: after the GRE header, or right away after UDP.
fn stack_offset(meta: &Meta, data: &[u8]) -> Result<usize, DropReason> {
    let at = usize::from(meta.l4);
    if !meta.has(flags::OUTER_GRE) {
        return Ok(at);
    }
    let gre = GrePacket::new_checked(&data[at..])?;
    if gre.protocol_type() != ethertype::MPLS {
        return Err(Reason::GreNotMpls.into());
    }
    if gre.has_checksum() && !gre.verify_checksum() {
        return Err(WireError::GreBadChecksum.into());
    }
    Ok(at + gre.header_len())
}

fn decap(cx: &mut Cx, st: &ForwardingState, p: u32) -> Result<Next, DropReason> {
    let (meta, data) = cx.pool.split_mut(p);
    let at = stack_offset(meta, data)?;
    let stack = LabelStack::parse(&data[at..])?;
    if stack.entries().len() > 1 {
        return Err(Reason::MplsStackUnsupported.into());
    }
    let label = stack.top().label;
    let nh_id = st.labels().lookup(label).ok_or(Reason::UnknownLabel)?;
    let payload_at = at + stack.buffer_len();
    let payload = &data[payload_at..];
    meta.flags |= flags::FROM_TUNNEL;
    meta.pinned = nh_id.0;
    let (vrf, inner, dst_mac) = match st.nexthop(nh_id).ok_or(Reason::NoNextHop)? {
        NextHop::Interface { interface, dst_mac } => {
            let vrf = st.interface(*interface).and_then(|i| i.vrf);
            meta.flags |= flags::PINNED;
            (vrf.ok_or(Reason::NoVrf)?, Inner::Ip, *dst_mac)
        }
        NextHop::Vrf { vrf, inner } => {
            let mac = st.vrf(*vrf).ok_or(Reason::NoVrf)?.router_mac;
            (*vrf, *inner, mac)
        }
        _ => return Err(Reason::NextHopUnsupported.into()),
    };
    meta.vrf = vrf.0;
    if inner == Inner::Ethernet {
        cx.pool.pull_front(p, payload_at);
        return Ok(Next::Ethernet);
    }
    // An IP payload gets an Ethernet header in front (rewritten when routed) so that
    // the rest of the pipeline sees one packet shape.
    let v6 = match payload_ip_version(payload) {
        Some(6) => true,
        Some(_) => false,
        None => return Err(Reason::MplsBadPayload.into()),
    };
    meta.flags |= flags::ROUTED | if v6 { flags::IPV6 } else { 0 };
    meta.l3 = HEADER_LEN as u16;
    cx.pool.pull_front(p, payload_at - HEADER_LEN);
    ip_frame_header(cx, st, p, VrfId(vrf.0), dst_mac, v6);
    Ok(Next::Ip)
}

fn ip_frame_header(cx: &mut Cx, st: &ForwardingState, p: u32, vrf: VrfId, dst: MacAddr, v6: bool) {
    let src = st.vrf(vrf).map(|v| v.router_mac).unwrap_or_default();
    EthernetRepr {
        dst,
        src,
        tags: [None, None],
        ethertype: if v6 { ethertype::IPV6 } else { ethertype::IPV4 },
    }
    .emit(cx.pool.data_mut(p));
}
