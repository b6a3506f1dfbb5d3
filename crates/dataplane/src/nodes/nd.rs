//! nd: the virtual gateway answers IPv6 neighbour solicitations for its addresses with
//! a neighbour advertisement (router, solicited, override) carrying its MAC.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::VrfId;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::{EthernetRepr, ethertype};
use ovr_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use ovr_wire::ip_proto;
use ovr_wire::ipv6::{Ipv6Packet, Ipv6Repr};

next_nodes! { pub enum Next { Output = "interface-output", Drop = "drop" } }

pub struct Nd;

impl Node<Cx, ForwardingState> for Nd {
    fn name(&self) -> &'static str {
        "nd"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        v.map(|_, p| answer(cx, st, p));
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        Some(format!(
            "neighbour solicitation in {}: advertisement on {}",
            crate::describe::vrf(st, m.vrf),
            crate::describe::interface(st, m.tx_if)
        ))
    }
}

const ADVERT_LEN: usize = 14 + 40 + 32;

fn answer(cx: &mut Cx, st: &ForwardingState, p: u32) -> Next {
    let (meta, data) = cx.pool.split_mut(p);
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(meta, Reason::NoVrf, Next::Drop);
    };
    let (l3, l4) = (usize::from(meta.l3), usize::from(meta.l4));
    let (src, dst) = match Ipv6Packet::new_checked(&data[l3..]) {
        Ok(ip) => (ip.src(), ip.dst()),
        Err(e) => return drop(meta, e, Next::Drop),
    };
    let target = match Icmpv6Packet::new_checked(&data[l4..])
        .and_then(|icmp| Icmpv6Repr::parse(&icmp, src, dst))
    {
        Ok(Icmpv6Repr::NeighborSolicit { target, .. }) => target,
        Ok(_) => return drop(meta, Reason::NdUnsupported, Next::Drop),
        Err(e) => return drop(meta, e, Next::Drop),
    };
    // Duplicate address detection (from ::) is not a question for the gateway.
    if src.is_unspecified() {
        return drop(meta, Reason::NdUnsupported, Next::Drop);
    }
    let requester = EthernetRepr::parse(data).map(|e| e.src).unwrap_or_default();
    let mac = vrf.router_mac;
    write_advert(cx, p, requester, mac, target, src)
}

fn write_advert(
    cx: &mut Cx,
    p: u32,
    to_mac: ovr_wire::ethernet::MacAddr,
    mac: ovr_wire::ethernet::MacAddr,
    target: core::net::Ipv6Addr,
    to: core::net::Ipv6Addr,
) -> Next {
    let len = cx.pool.len(p);
    let grown = if len < ADVERT_LEN {
        cx.pool.extend(p, ADVERT_LEN - len)
    } else {
        cx.pool.truncate(p, ADVERT_LEN)
    };
    let (meta, data) = cx.pool.split_mut(p);
    if !grown {
        return drop(meta, Reason::NoHeadroom, Next::Drop);
    }
    EthernetRepr {
        dst: to_mac,
        src: mac,
        tags: [None, None],
        ethertype: ethertype::IPV6,
    }
    .emit(data);
    let na = Icmpv6Repr::NeighborAdvert {
        router: true,
        solicited: true,
        override_: true,
        target,
        target_mac: Some(mac),
    };
    Ipv6Repr {
        src: target,
        dst: to,
        next_header: ip_proto::ICMPV6,
        hop_limit: 255,
        traffic_class: 0,
        flow_label: 0,
        payload_len: na.buffer_len() as u16,
    }
    .emit(&mut data[14..]);
    na.emit(&mut data[54..], target, to);
    meta.l3 = 14;
    meta.tx_if = meta.rx_if;
    Next::Output
}
