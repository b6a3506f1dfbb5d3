//! Walks a whole frame through every layer ovr knows, tunnels included, into a list of
//! one-line layer summaries, or stops at the first malformed header with its
//! [`WireError`]. For operators' tools (`ovrctl decode`) and for fuzzing every parser in
//! one chain; the dataplane parses in place instead and never allocates.

use crate::arp::{ArpPacket, ArpRepr};
use crate::ethernet::{self, ethertype};
use crate::gre::{GrePacket, GreRepr};
use crate::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use crate::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use crate::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::ipv6::Ipv6Packet;
use crate::mpls::{LabelStack, payload_ip_version};
use crate::tcp::TcpPacket;
use crate::udp::UdpPacket;
use crate::vxlan::VxlanPacket;
use crate::{WireError, ip_proto, udp_port};
use core::net::IpAddr;

/// How many tunnel headers deep the walk goes.
const MAX_TUNNEL_DEPTH: usize = 4;

/// The layers of a frame and, if the walk stopped at a malformed header, why.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dissection {
    pub layers: Vec<String>,
    pub error: Option<WireError>,
}

impl core::fmt::Display for Dissection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.layers.join(" | "))?;
        if let Some(e) = self.error {
            if !self.layers.is_empty() {
                f.write_str(" | ")?;
            }
            write!(f, "DROP {e}")?;
        }
        Ok(())
    }
}

/// Dissects an Ethernet frame.
pub fn dissect(frame: &[u8]) -> Dissection {
    let mut d = Dissection::default();
    if let Err(e) = ethernet_layer(&mut d, frame, 0) {
        d.error = Some(e);
    }
    d
}

type Step = Result<(), WireError>;

fn ethernet_layer(d: &mut Dissection, frame: &[u8], depth: usize) -> Step {
    let h = ethernet::parse_l2(frame)?;
    let mut s = format!("eth {} > {}", h.src, h.dst);
    for t in [h.outer, h.inner].into_iter().flatten() {
        s += &format!(
            " vlan {}{}",
            t.vid,
            if t.tpid == ethertype::QINQ {
                " (802.1ad)"
            } else {
                ""
            }
        );
    }
    d.layers.push(s);
    let payload = &frame[h.payload_offset..];
    match h.ethertype {
        ethertype::IPV4 => ipv4_layer(d, payload, depth),
        ethertype::IPV6 => ipv6_layer(d, payload, depth),
        ethertype::ARP => {
            let r = ArpRepr::parse(&ArpPacket::new_checked(payload)?);
            d.layers.push(format!(
                "arp {:?} {} ({}) asks for {}",
                r.operation, r.sender_ip, r.sender_mac, r.target_ip
            ));
            Ok(())
        }
        ethertype::MPLS => mpls_layer(d, payload, depth),
        other => {
            d.layers.push(format!("ethertype {other:#06x}"));
            Ok(())
        }
    }
}

fn ipv4_layer(d: &mut Dissection, b: &[u8], depth: usize) -> Step {
    let p = Ipv4Packet::new_checked(b)?;
    let r = Ipv4Repr::parse(&p)?;
    let frag = if p.is_fragment() {
        format!(" frag id {} offset {}", r.ident, p.frag_offset())
    } else {
        String::new()
    };
    d.layers.push(format!(
        "ipv4 {} > {} ttl {} proto {}{frag}",
        r.src, r.dst, r.ttl, r.protocol
    ));
    // A fragment's transport header (if any) describes the whole datagram: its length
    // and checksum cannot be checked before reassembly.
    if p.is_fragment() {
        return Ok(());
    }
    transport(
        d,
        r.protocol,
        p.payload(),
        IpAddr::V4(r.src),
        IpAddr::V4(r.dst),
        depth,
    )
}

fn ipv6_layer(d: &mut Dissection, b: &[u8], depth: usize) -> Step {
    let p = Ipv6Packet::new_checked(b)?;
    let u = p.upper_layer()?;
    let frag = u
        .fragment
        .map(|f| format!(" frag id {:#x} offset {}", f.ident, f.offset))
        .unwrap_or_default();
    let ext = if u.offset > 0 {
        format!(" ext {} bytes", u.offset)
    } else {
        String::new()
    };
    d.layers.push(format!(
        "ipv6 {} > {} hlim {} next {}{ext}{frag}",
        p.src(),
        p.dst(),
        p.hop_limit(),
        u.protocol
    ));
    if u.fragment.is_some() {
        return Ok(());
    }
    transport(
        d,
        u.protocol,
        &p.payload()[u.offset..],
        IpAddr::V6(p.src()),
        IpAddr::V6(p.dst()),
        depth,
    )
}

fn transport(
    d: &mut Dissection,
    proto: u8,
    b: &[u8],
    src: IpAddr,
    dst: IpAddr,
    depth: usize,
) -> Step {
    match (proto, src, dst) {
        (ip_proto::UDP, _, _) => {
            let u = UdpPacket::new_checked(b)?;
            let tunnel = matches!(u.dst_port(), udp_port::VXLAN | udp_port::MPLS_IN_UDP);
            // A tunnel's checksum is judged as ovr's underlay judges it.
            let ok = match (src, dst) {
                _ if tunnel => u.verify_tunnel(src, dst),
                (IpAddr::V4(s), IpAddr::V4(d)) => u.verify_v4(s, d),
                (IpAddr::V6(s), IpAddr::V6(d)) => u.verify_v6(s, d),
                _ => false,
            };
            if !ok {
                return Err(WireError::UdpBadChecksum);
            }
            d.layers.push(format!(
                "udp {} > {} len {}",
                u.src_port(),
                u.dst_port(),
                u.payload().len()
            ));
            if depth >= MAX_TUNNEL_DEPTH {
                return Ok(());
            }
            match u.dst_port() {
                udp_port::VXLAN => {
                    let v = VxlanPacket::new_checked(u.payload())?;
                    d.layers.push(format!("vxlan vni {}", v.vni()));
                    ethernet_layer(d, v.payload(), depth + 1)
                }
                udp_port::MPLS_IN_UDP => mpls_layer(d, u.payload(), depth + 1),
                _ => Ok(()),
            }
        }
        (ip_proto::TCP, _, _) => {
            let t = TcpPacket::new_checked(b)?;
            let ok = match (src, dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => t.verify_v4(s, d),
                (IpAddr::V6(s), IpAddr::V6(d)) => t.verify_v6(s, d),
                _ => false,
            };
            if !ok {
                return Err(WireError::TcpBadChecksum);
            }
            d.layers.push(format!(
                "tcp {} > {} flags {:#04x} seq {} len {}",
                t.src_port(),
                t.dst_port(),
                t.flags(),
                t.seq(),
                t.payload().len()
            ));
            Ok(())
        }
        (ip_proto::ICMP, _, _) => {
            let r = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(b)?)?;
            d.layers.push(format!("icmp {r:?}"));
            Ok(())
        }
        (ip_proto::ICMPV6, IpAddr::V6(s), IpAddr::V6(dd)) => {
            let r = Icmpv6Repr::parse(&Icmpv6Packet::new_checked(b)?, s, dd)?;
            d.layers.push(format!("icmpv6 {r:?}"));
            Ok(())
        }
        (ip_proto::GRE, _, _) => {
            let g = GrePacket::new_checked(b)?;
            let r = GreRepr::parse(&g)?;
            let key = r.key.map(|k| format!(" key {k}")).unwrap_or_default();
            let seq = r.sequence.map(|s| format!(" seq {s}")).unwrap_or_default();
            d.layers.push(format!(
                "gre proto {:#06x}{key}{seq}{}",
                r.protocol_type,
                if r.checksum { " csum" } else { "" }
            ));
            if depth >= MAX_TUNNEL_DEPTH {
                return Ok(());
            }
            match r.protocol_type {
                ethertype::MPLS => mpls_layer(d, g.payload(), depth + 1),
                ethertype::IPV4 => ipv4_layer(d, g.payload(), depth + 1),
                ethertype::IPV6 => ipv6_layer(d, g.payload(), depth + 1),
                ethertype::TEB => ethernet_layer(d, g.payload(), depth + 1),
                _ => Ok(()),
            }
        }
        (p, _, _) => {
            d.layers.push(format!("ip proto {p} ({} bytes)", b.len()));
            Ok(())
        }
    }
}

fn mpls_layer(d: &mut Dissection, b: &[u8], depth: usize) -> Step {
    let s = LabelStack::parse(b)?;
    let labels: Vec<String> = s
        .entries()
        .iter()
        .map(|e| format!("{} tc {} ttl {}", e.label, e.tc, e.ttl))
        .collect();
    d.layers.push(format!("mpls [{}]", labels.join(", ")));
    let payload = &b[s.buffer_len()..];
    match payload_ip_version(payload) {
        Some(4) => ipv4_layer(d, payload, depth),
        Some(6) => ipv6_layer(d, payload, depth),
        _ => {
            d.layers.push(format!("payload {} bytes", payload.len()));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn tunnels_are_followed_to_the_inner_packet() {
        let d = dissect(fixtures::VXLAN);
        assert_eq!(d.error, None);
        assert_eq!(d.layers.len(), 7, "{d}");
        assert!(d.layers[3].starts_with("vxlan vni 1193046"));
        assert!(d.layers[5].starts_with("ipv4 172.16.0.1 > 172.16.0.2"));
        let d = dissect(fixtures::MPLS_IN_GRE_CSUM_KEY_SEQ);
        assert_eq!(d.error, None, "{d}");
        assert!(
            d.to_string().contains(
                "gre proto 0x8847 key 3735928559 seq 7 csum | mpls [600 tc 0 ttl 64] | ipv6"
            ),
            "{d}"
        );
        let d = dissect(fixtures::MPLS_IN_UDP);
        assert!(
            d.to_string()
                .contains("mpls [1000 tc 2 ttl 63, 17 tc 0 ttl 62] | ipv4 172.16.0.1"),
            "{d}"
        );
    }

    #[test]
    fn every_fixture_dissects_and_every_cut_is_named() {
        let all = [
            fixtures::ARP_REPLY,
            fixtures::ARP_REQUEST,
            fixtures::ETH_DOT1Q,
            fixtures::ETH_IPV4_UDP,
            fixtures::ETH_QINQ,
            fixtures::ICMPV4_ECHO,
            fixtures::ICMPV6_ECHO,
            fixtures::ICMPV6_NA,
            fixtures::ICMPV6_NS,
            fixtures::IPV4_FRAG_FIRST,
            fixtures::IPV4_FRAG_LATER,
            fixtures::IPV4_OPTIONS,
            fixtures::IPV4_TCP_OPTIONS,
            fixtures::IPV6_EXT_CHAIN,
            fixtures::IPV6_TCP,
            fixtures::IPV6_UDP,
            fixtures::MPLS_IN_GRE,
            fixtures::MPLS_IN_GRE_CSUM_KEY_SEQ,
            fixtures::MPLS_IN_UDP,
            fixtures::VXLAN,
        ];
        for f in all {
            let d = dissect(f);
            assert_eq!(d.error, None, "{d}");
            // Truncated anywhere inside its headers, a frame is refused with a reason.
            for n in 0..f.len() {
                let _ = dissect(&f[..n]).to_string();
            }
            assert!(dissect(&f[..13]).error == Some(WireError::EthernetTruncated));
        }
        let d = dissect(&fixtures::VXLAN[..46]);
        assert_eq!(
            d.error,
            Some(WireError::Ipv4Truncated),
            "the outer IPv4 total length catches the cut first: {d}"
        );
    }
}
