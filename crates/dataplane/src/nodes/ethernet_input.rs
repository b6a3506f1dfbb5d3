//! ethernet-input: a frame from a workload, or the inner frame of a tunnel, enters its
//! VRF. Frames to the virtual gateway's MAC are routed; others are bridged.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::{Meta, flags};
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::VrfId;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::{ethertype, parse_l2};

next_nodes! { pub enum Next { Arp = "arp", Ip = "ip-input", Drop = "drop" } }

pub struct EthernetInput;

impl Node<Cx, ForwardingState> for EthernetInput {
    fn name(&self) -> &'static str {
        "ethernet-input"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        v.map(|_, p| {
            let (meta, data) = cx.pool.split_mut(p);
            classify(st, meta, data)
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        let data = cx.pool.data(pkt);
        let mac = |at: usize| {
            data.get(at..at + 6)
                .and_then(|b| <[u8; 6]>::try_from(b).ok())
                .map_or_else(
                    || "?".into(),
                    |b| ovr_wire::ethernet::MacAddr(b).to_string(),
                )
        };
        let how = if m.has(flags::ROUTED) {
            "routed (to the gateway MAC)"
        } else {
            "bridged"
        };
        Some(format!(
            "rx {}, {}, {} -> {}, {how}",
            crate::describe::interface(st, m.rx_if),
            crate::describe::vrf(st, m.vrf),
            mac(6),
            mac(0)
        ))
    }
}

fn classify(st: &ForwardingState, meta: &mut Meta, data: &[u8]) -> Next {
    let l2 = match parse_l2(data) {
        Ok(l2) => l2,
        Err(e) => return drop(meta, e, Next::Drop),
    };
    if l2.outer.is_some() {
        return drop(meta, Reason::VlanNotAllowed, Next::Drop);
    }
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(meta, Reason::NoVrf, Next::Drop);
    };
    meta.l3 = l2.payload_offset as u16;
    match l2.ethertype {
        ethertype::ARP => Next::Arp,
        ethertype::IPV4 | ethertype::IPV6 => {
            if l2.ethertype == ethertype::IPV6 {
                meta.flags |= flags::IPV6;
            }
            if l2.dst == vrf.router_mac {
                meta.flags |= flags::ROUTED;
            }
            Next::Ip
        }
        _ => drop(meta, Reason::UnsupportedEthertype, Next::Drop),
    }
}
