//! ip-input: checks the IPv4/IPv6 header, trims Ethernet padding, extracts the flow key
//! and sorts out what the pipeline does not forward by flow: neighbour solicitations and
//! pings for the gateway, multicast and broadcast (flooded), expiring TTLs.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::flags;
use core::net::IpAddr;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::flow::FlowKey;
use ovr_tables::ids::VrfId;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::ipv4::Ipv4Packet;
use ovr_wire::ipv6::{HEADER_LEN as IPV6_HEADER_LEN, Ipv6Packet};
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

    fn trace(&self, cx: &Cx, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        let k = &m.key;
        Some(format!(
            "vrf {} {} {} -> {} proto {} ports {} -> {}{}",
            m.vrf,
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

/// What the L3 header says, once checked.
struct L3 {
    src: IpAddr,
    dst: IpAddr,
    ttl: u8,
    protocol: u8,
    /// Offset of the transport header from the L3 header; `None` for a non-first fragment.
    l4: Option<usize>,
    /// Length of the L3 packet (without Ethernet padding).
    len: usize,
}

fn parse_v4(b: &[u8]) -> Result<L3, WireError> {
    let ip = Ipv4Packet::new_checked(b)?;
    if !ip.verify_checksum() {
        return Err(WireError::Ipv4BadChecksum);
    }
    Ok(L3 {
        src: ip.src().into(),
        dst: ip.dst().into(),
        ttl: ip.ttl(),
        protocol: ip.protocol(),
        l4: (!ip.is_fragment() || ip.is_first_fragment()).then(|| ip.header_len()),
        len: usize::from(ip.total_len()),
    })
}

fn parse_v6(b: &[u8]) -> Result<L3, WireError> {
    let ip = Ipv6Packet::new_checked(b)?;
    let upper = ip.upper_layer()?;
    Ok(L3 {
        src: ip.src().into(),
        dst: ip.dst().into(),
        ttl: ip.hop_limit(),
        protocol: upper.protocol,
        l4: upper
            .has_transport_header()
            .then_some(IPV6_HEADER_LEN + upper.offset),
        len: IPV6_HEADER_LEN + usize::from(ip.payload_len()),
    })
}

/// The ports of the flow key: TCP/UDP ports, the ICMP echo identifier for both, or 0.
fn ports(protocol: u8, l4: &[u8]) -> Result<(u16, u16), WireError> {
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
    let l3 = usize::from(meta.l3);
    let v6 = meta.has(flags::IPV6);
    let parsed = if v6 {
        parse_v6(&data[l3..])
    } else {
        parse_v4(&data[l3..])
    };
    let ip = match parsed {
        Ok(ip) => ip,
        Err(e) => return drop(meta, e, Next::Drop),
    };
    let (sport, dport) = match ip.l4 {
        Some(o) => match ports(ip.protocol, &data[l3 + o..l3 + ip.len]) {
            Ok(ports) => ports,
            Err(e) => return drop(meta, e, Next::Drop),
        },
        None => (0, 0),
    };
    let dst_mac = MacAddr(data[0..6].try_into().unwrap_or_default());
    let icmp_type = match (ip.protocol, ip.l4) {
        (ip_proto::ICMPV6, Some(o)) => Some(data[l3 + o]),
        _ => None,
    };
    meta.l4 = (l3 + ip.l4.unwrap_or(0)) as u16;
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(meta, Reason::NoVrf, Next::Drop);
    };
    let from_tunnel = meta.has(flags::FROM_TUNNEL);
    let routed = meta.has(flags::ROUTED);
    let mut key = FlowKey::new(vrf.id, ip.src, ip.dst, ip.protocol, sport, dport);
    if !routed {
        key = key.into_bridged();
    }
    meta.key = key;
    meta.hash = key.symmetric_hash();
    let trim = l3 + ip.len;
    // Neighbour solicitations for the gateway (multicast or unicast) are answered here.
    if icmp_type == Some(icmpv6::msg_type::NEIGHBOR_SOLICIT) && !from_tunnel {
        let target_at = usize::from(meta.l4) + 8;
        if let Some(t) = data.get(target_at..target_at + 16) {
            let t: [u8; 16] = t.try_into().unwrap_or_default();
            if vrf.is_gateway(IpAddr::V6(t.into())) {
                cx.pool.truncate(p, trim);
                return Next::Nd;
            }
        }
    }
    if dst_mac.is_multicast() {
        cx.pool.truncate(p, trim);
        return Next::Flood;
    }
    if routed && vrf.is_gateway(ip.dst) {
        cx.pool.truncate(p, trim);
        return if from_tunnel {
            drop(cx.pool.meta_mut(p), Reason::GatewayUnsupported, Next::Drop)
        } else {
            Next::Gateway
        };
    }
    if routed && !from_tunnel && ip.ttl <= 1 {
        return drop(meta, Reason::TtlExpired, Next::Drop);
    }
    cx.pool.truncate(p, trim);
    Next::Flow
}
