//! ip-input: checks the IPv4/IPv6 header, trims Ethernet padding, extracts the flow key
//! and sorts out what the pipeline does not forward by flow: neighbour solicitations and
//! pings for the gateway, multicast and broadcast (flooded), expiring TTLs.

use super::drop;
use crate::context::Cx;
use crate::drop::{DropReason, Reason};
use crate::ip;
use crate::meta::{Meta, flags};
use core::net::IpAddr;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::flow::FlowKey;
use ovr_tables::ids::VrfId;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::tcp::TcpPacket;
use ovr_wire::udp::UdpPacket;
use ovr_wire::{WireError, icmpv6, ip_proto};

next_nodes! {
    pub enum Next {
        Nd = "nd",
        Flow = "flow",
        Gateway = "gateway",
        Flood = "flood",
        Drop = "drop",
    }
}

pub struct IpInput;

impl Node<Cx, ForwardingState> for IpInput {
    fn name(&self) -> &'static str {
        "ip-input"
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
        let k = &m.key;
        Some(format!(
            "{} {} {} -> {} proto {} ports {} -> {}{}",
            crate::describe::vrf(st, m.vrf),
            if k.bridged { "bridged" } else { "routed" },
            k.src_ip(),
            k.dst_ip(),
            k.protocol,
            k.src_port,
            k.dst_port,
            if m.has(flags::FROM_TUNNEL) {
                " (from tunnel)"
            } else {
                ""
            },
        ))
    }
}

/// The ports of the flow key: TCP/UDP ports, the ICMP echo identifier for both, or 0.
pub(super) fn ports(protocol: u8, l4: &[u8]) -> Result<(u16, u16), WireError> {
    let be = |i: usize| u16::from_be_bytes([l4[i], l4[i + 1]]);
    match protocol {
        ip_proto::TCP => {
            TcpPacket::new_checked(l4)?;
            Ok((be(0), be(2)))
        }
        ip_proto::UDP => {
            UdpPacket::new_checked(l4)?;
            Ok((be(0), be(2)))
        }
        ip_proto::ICMP | ip_proto::ICMPV6 => {
            let (truncated, echo) = if protocol == ip_proto::ICMP {
                (WireError::Icmpv4Truncated, [0u8, 8])
            } else {
                (
                    WireError::Icmpv6Truncated,
                    [icmpv6::msg_type::ECHO_REQUEST, icmpv6::msg_type::ECHO_REPLY],
                )
            };
            if l4.len() < 8 {
                return Err(truncated);
            }
            // Echo request and reply share the identifier: one flow, both ways.
            let id = if echo.contains(&l4[0]) { be(4) } else { 0 };
            Ok((id, id))
        }
        _ => Ok((0, 0)),
    }
}

fn classify(cx: &mut Cx, st: &ForwardingState, p: u32) -> Next {
    let (meta, data) = cx.pool.split_mut(p);
    match inspect(st, meta, data) {
        Ok((next, len)) => {
            // Ethernet padding after the IP packet goes: nothing forwards it.
            cx.pool.truncate(p, len);
            next
        }
        Err(r) => drop(cx.pool.meta_mut(p), r, Next::Drop),
    }
}

/// Where the packet goes, and its length without padding.
fn inspect(
    st: &ForwardingState,
    meta: &mut Meta,
    data: &[u8],
) -> Result<(Next, usize), DropReason> {
    let l3 = usize::from(meta.l3);
    let ip = ip::check(&data[l3..], meta.has(flags::IPV6))?;
    let (sport, dport) = match ip.l4() {
        Some(o) => ports(ip.protocol, &data[l3 + o..l3 + ip.len])?,
        None => (0, 0),
    };
    meta.l4 = (l3 + ip.l4().unwrap_or(0)) as u16;
    let vrf = st.vrf(VrfId(meta.vrf)).ok_or(Reason::NoVrf)?;
    let from_tunnel = meta.has(flags::FROM_TUNNEL);
    let routed = meta.has(flags::ROUTED);
    let mut key = match (ip.src, ip.dst) {
        // The addresses straight from the header (checked to be there).
        (IpAddr::V4(_), IpAddr::V4(_)) => {
            let at = |o: usize| {
                data.get(l3 + o..l3 + o + 4)
                    .and_then(|b| b.try_into().ok())
                    .unwrap_or_default()
            };
            FlowKey::v4(vrf.id, at(12), at(16), ip.protocol, sport, dport)
        }
        _ => FlowKey::new(vrf.id, ip.src, ip.dst, ip.protocol, sport, dport),
    };
    if !routed {
        key = key.into_bridged();
    }
    // Out of a network function: a flow of its own, apart from the networks' (see
    // `crate::chain`).
    let rx = ovr_tables::ids::InterfaceId(meta.rx_if);
    if !from_tunnel && st.service_port(rx).is_some() {
        key.vrf = ovr_tables::chain::key_vrf(rx);
    }
    // Sent by another host into a network function here: keyed by the port it enters.
    if from_tunnel
        && !routed
        && let Some(to) = crate::chain::into_port(st, vrf, data.first_chunk().unwrap_or(&[0; 6]))
    {
        key.vrf = ovr_tables::chain::into_key_vrf(to);
    }
    meta.key = key;
    meta.hash = key.symmetric_hash();
    let len = l3 + ip.len;
    // Neighbour solicitations for the gateway (multicast or unicast) are answered here.
    let l4 = usize::from(meta.l4);
    let solicit = ip.protocol == ip_proto::ICMPV6
        && ip.l4().is_some()
        && data[l4] == icmpv6::msg_type::NEIGHBOR_SOLICIT;
    if solicit && !from_tunnel {
        let target: Option<[u8; 16]> = data.get(l4 + 8..l4 + 24).and_then(|t| t.try_into().ok());
        if target.is_some_and(|t| vrf.is_gateway(IpAddr::V6(t.into()))) {
            return Ok((Next::Nd, len));
        }
    }
    if MacAddr(data[0..6].try_into().unwrap_or_default()).is_multicast() {
        return Ok((Next::Flood, len));
    }
    if routed && vrf.is_gateway(ip.dst) {
        return if from_tunnel {
            Err(Reason::GatewayUnsupported.into())
        } else {
            Ok((Next::Gateway, len))
        };
    }
    if routed && !from_tunnel && ip.ttl <= 1 {
        return Err(Reason::TtlExpired.into());
    }
    Ok((Next::Flow, len))
}
