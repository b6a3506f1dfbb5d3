//! The outer headers of a tunnel packet: Ethernet, IPv4 or IPv6, then UDP or GRE, then
//! the tunnel's own header (the "shim": VXLAN, or an MPLS label), all written into the
//! headroom in front of the packet without moving it.

use crate::context::Cx;
use crate::drop::Reason;
use core::net::IpAddr;
use ovr_tables::nexthop::Tunnel;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::{EthernetRepr, HEADER_LEN, ethertype};
use ovr_wire::gre::GreRepr;
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Repr;
use ovr_wire::ipv6::Ipv6Repr;
use ovr_wire::udp::{UdpPacket, UdpRepr};
use ovr_wire::vxlan::source_port_from_hash;

/// What carries the shim across the underlay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp { dst_port: u16 },
    Gre,
}

/// TTL of the outer header: the underlay is a network of its own.
const OUTER_TTL: u8 = 64;

/// Prepends the outer headers and `shim` to packet `p` for tunnel `t`.
pub fn encapsulate(
    cx: &mut Cx,
    st: &ForwardingState,
    p: u32,
    t: &Tunnel,
    transport: Transport,
    shim: &[u8],
) -> Result<(), Reason> {
    let underlay = st.interface(t.underlay).ok_or(Reason::UnknownInterface)?;
    let inner_len = cx.pool.len(p);
    let ip_len = if t.dst.is_ipv6() { 40 } else { 20 };
    let (l4_len, protocol) = match transport {
        Transport::Udp { .. } => (8, ip_proto::UDP),
        Transport::Gre => (4, ip_proto::GRE),
    };
    let head = HEADER_LEN + ip_len + l4_len + shim.len();
    let ip_payload = l4_len + shim.len() + inner_len;
    if ip_len + ip_payload > usize::from(u16::MAX) {
        return Err(Reason::MtuExceeded);
    }
    if !cx.pool.push_front(p, head) {
        return Err(Reason::NoHeadroom);
    }
    let (meta, data) = cx.pool.split_mut(p);
    let hash = meta.hash;
    meta.tx_if = t.underlay.0;
    meta.l3 = HEADER_LEN as u16;
    let (ip, rest) = data[HEADER_LEN..].split_at_mut(ip_len);
    match (t.src, t.dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => Ipv4Repr {
            src,
            dst,
            protocol,
            ttl: OUTER_TTL,
            dscp: 0,
            ecn: 0,
            // Atomic datagrams (DF set) may carry identification 0 (RFC 6864).
            ident: 0,
            dont_frag: true,
            payload_len: ip_payload as u16,
        }
        .emit(ip),
        (IpAddr::V6(src), IpAddr::V6(dst)) => Ipv6Repr {
            src,
            dst,
            next_header: protocol,
            hop_limit: OUTER_TTL,
            traffic_class: 0,
            // The inner flow's hash as flow label, for the underlay's ECMP (RFC 6438).
            flow_label: hash & 0x000f_ffff,
            payload_len: ip_payload as u16,
        }
        .emit(ip),
        _ => return Err(Reason::NextHopUnsupported),
    }
    rest[l4_len..l4_len + shim.len()].copy_from_slice(shim);
    match transport {
        Transport::Udp { dst_port } => {
            UdpRepr {
                src_port: source_port_from_hash(hash),
                dst_port,
                payload_len: (shim.len() + inner_len) as u16,
            }
            .emit(rest);
            // IPv4 tunnels send no UDP checksum (RFC 7348 section 5, RFC 7510 section
            // 3); IPv6 requires one (RFC 8200 section 8.1).
            if let (IpAddr::V6(src), IpAddr::V6(dst)) = (t.src, t.dst) {
                UdpPacket::new_unchecked(&mut rest[..l4_len + shim.len() + inner_len])
                    .fill_checksum_v6(src, dst);
            }
        }
        Transport::Gre => GreRepr {
            protocol_type: ethertype::MPLS,
            checksum: false,
            key: None,
            sequence: None,
        }
        .emit(rest),
    }
    EthernetRepr {
        dst: t.dst_mac,
        src: underlay.mac,
        tags: [None, None],
        ethertype: if t.dst.is_ipv6() {
            ethertype::IPV6
        } else {
            ethertype::IPV4
        },
    }
    .emit(data);
    Ok(())
}
