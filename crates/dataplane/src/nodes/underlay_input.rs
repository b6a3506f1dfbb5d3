//! underlay-input: a frame from the physical network. Tunnel packets addressed to one of
//! this host's VTEP addresses go to their decapsulation; ARP for those addresses is
//! answered; everything else is dropped under a reason (ovr is not the host's IP stack).

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::ip::{self, IpHeader};
use crate::meta::{Meta, flags};
use core::net::IpAddr;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::flow::ipv4_mapped;
use ovr_tables::ids::InterfaceId;
use ovr_tables::interface::Interface;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::{ethertype, parse_l2};
use ovr_wire::udp::UdpPacket;
use ovr_wire::{WireError, ip_proto, udp_port};

next_nodes! {
    pub enum Next {
        Vxlan = "vxlan-decap",
        Mpls = "mpls-decap",
        Arp = "arp",
        Drop = "drop",
    }
}

pub struct UnderlayInput;

impl Node<Cx, ForwardingState> for UnderlayInput {
    fn name(&self) -> &'static str {
        "underlay-input"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        let pkts = v.pkts;
        v.map(|i, p| {
            if let Some(&n) = pkts.get(i + 4) {
                cx.pool.prefetch(n);
            }
            classify(cx, st, p)
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        let data = cx.pool.data(pkt);
        let l3 = usize::from(m.l3);
        let outer = match ip::check(data.get(l3..).unwrap_or_default(), m.has(flags::IPV6)) {
            Ok(o) => format!(", outer {} -> {} proto {}", o.src, o.dst, o.protocol),
            Err(_) => String::new(),
        };
        Some(format!(
            "rx {}{outer}",
            crate::describe::interface(st, m.rx_if)
        ))
    }
}

fn classify(cx: &mut Cx, st: &ForwardingState, p: u32) -> Next {
    let (meta, data) = cx.pool.split_mut(p);
    let Some(rx) = st.interface(InterfaceId(meta.rx_if)) else {
        return drop(meta, Reason::UnknownInterface, Next::Drop);
    };
    let l2 = match parse_l2(data) {
        Ok(l2) => l2,
        Err(e) => return drop(meta, e, Next::Drop),
    };
    if l2.outer.is_some() {
        return drop(meta, Reason::VlanNotAllowed, Next::Drop);
    }
    let l3 = l2.payload_offset;
    meta.l3 = l3 as u16;
    let outer = match l2.ethertype {
        ethertype::ARP => return Next::Arp,
        _ if l2.dst != rx.mac => return drop(meta, Reason::NotForVtep, Next::Drop),
        ethertype::IPV4 | ethertype::IPV6 => {
            ip::check(&data[l3..], l2.ethertype == ethertype::IPV6)
        }
        _ => return drop(meta, Reason::UnderlayUnsupported, Next::Drop),
    };
    let outer = match outer {
        Ok(o) => o,
        Err(e) => return drop(meta, e, Next::Drop),
    };
    let next = tunnel(meta, rx, &outer, &data[l3..l3 + outer.len]);
    cx.pool.truncate(p, l3 + outer.len);
    next
}

/// Which decapsulation a checked outer packet goes to.
fn tunnel(meta: &mut Meta, rx: &Interface, o: &IpHeader, ip: &[u8]) -> Next {
    if !rx.addresses.iter().any(|a| a.addr == o.dst) {
        return drop(meta, Reason::NotForVtep, Next::Drop);
    }
    if o.fragment {
        return drop(meta, Reason::OuterFragment, Next::Drop);
    }
    let l3 = usize::from(meta.l3);
    match o.protocol {
        ip_proto::UDP => {
            let udp = match UdpPacket::new_checked(&ip[o.transport..]) {
                Ok(u) => u,
                Err(e) => return drop(meta, e, Next::Drop),
            };
            // One ovr has just written itself holds (`L4_CHECKSUM_MADE`).
            let valid = meta.has(flags::L4_CHECKSUM_MADE) || udp.verify_tunnel(o.src, o.dst);
            if !valid {
                return drop(meta, WireError::UdpBadChecksum, Next::Drop);
            }
            meta.l4 = (l3 + o.transport + 8) as u16;
            match udp.dst_port() {
                udp_port::VXLAN => {
                    // Kept for flow setup: a reply may have to go back to the sender.
                    meta.sender = match o.src {
                        IpAddr::V4(a) => ipv4_mapped(a.octets()),
                        IpAddr::V6(a) => a.octets(),
                    };
                    meta.flags |= flags::SENDER;
                    Next::Vxlan
                }
                udp_port::MPLS_IN_UDP => Next::Mpls,
                _ => drop(meta, Reason::UnderlayUnsupported, Next::Drop),
            }
        }
        ip_proto::GRE => {
            meta.l4 = (l3 + o.transport) as u16;
            meta.flags |= flags::OUTER_GRE;
            Next::Mpls
        }
        _ => drop(meta, Reason::UnderlayUnsupported, Next::Drop),
    }
}
