//! Which worker a frame belongs to, before any table is looked at: a hash of its
//! innermost IP flow that is the same for both directions of the flow, whether the
//! frame comes from a workload (plain Ethernet) or from the underlay (VXLAN, MPLS-in-UDP,
//! MPLS-in-GRE around it). Several workers each own the flows whose hash falls to them
//! (a flow's state — its cached decision, its reverse, the policy's verdict — lives in one
//! place only), so a frame read by another worker is handed to the owner.
//!
//! The hash covers the two addresses, the protocol and, for TCP and UDP, the two ports,
//! each pair taken in a fixed order. Fragments leave the ports out (only a first fragment
//! has them); so does IPv6 with extension headers before the transport header. A frame
//! with no IP inside (ARP, a tunnel carrying ARP, anything malformed) has no flow: `None`,
//! and any worker may take it.

use crate::ethernet::{self, ethertype};
use crate::gre::GrePacket;
use crate::ipv4::Ipv4Packet;
use crate::ipv6::Ipv6Packet;
use crate::mpls::LabelStack;
use crate::udp::UdpPacket;
use crate::vxlan::VxlanPacket;
use crate::{ip_proto, udp_port};

/// How many tunnel headers deep the walk goes (a tunnel in a tunnel is not ovr's, but a
/// hostile frame may nest them).
const MAX_DEPTH: usize = 2;

/// What an MPLS label carries: ovr's label table says (the first nibble of the payload
/// cannot tell an Ethernet frame from an IP packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MplsPayload {
    Ip,
    Ethernet,
    /// A label ovr does not know: no flow.
    Unknown,
}

/// The symmetric flow hash of the innermost IP flow of an Ethernet frame, if it has one.
/// `label` says what each MPLS label carries.
pub fn flow_hash(frame: &[u8], label: &impl Fn(u32) -> MplsPayload) -> Option<u32> {
    ethernet_frame(frame, label, 0)
}

fn ethernet_frame(frame: &[u8], label: &impl Fn(u32) -> MplsPayload, depth: usize) -> Option<u32> {
    let l2 = ethernet::parse_l2(frame).ok()?;
    let payload = frame.get(l2.payload_offset..)?;
    match l2.ethertype {
        ethertype::IPV4 | ethertype::IPV6 => ip_packet(payload, label, depth),
        _ => None,
    }
}

fn ip_packet(p: &[u8], label: &impl Fn(u32) -> MplsPayload, depth: usize) -> Option<u32> {
    // Offsets from the checked header, slices from `p`: the views borrow themselves.
    let (src, dst, proto, l4, fragment) = match p.first()? >> 4 {
        4 => {
            let h = Ipv4Packet::new_checked(p).ok()?;
            let frag = h.more_frags() || h.frag_offset() != 0;
            let l4 = p.get(h.header_len()..usize::from(h.total_len()))?;
            (&p[12..16], &p[16..20], h.protocol(), l4, frag)
        }
        6 => {
            let h = Ipv6Packet::new_checked(p).ok()?;
            let next = h.next_header();
            let l4 = p.get(40..40 + usize::from(h.payload_len()))?;
            // Behind extension headers the "protocol" is the first of them: no ports.
            (&p[8..24], &p[24..40], next, l4, next == ip_proto::IPV6_FRAG)
        }
        _ => return None,
    };
    if depth < MAX_DEPTH
        && !fragment
        && let Some(inner) = tunnel_payload(proto, l4, label, depth)
    {
        return inner;
    }
    let ports = match (proto, fragment, l4.get(..4)) {
        (ip_proto::TCP | ip_proto::UDP, false, Some(p)) => Some((
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )),
        _ => None,
    };
    Some(symmetric(src, dst, proto, ports))
}

/// If this is a tunnel ovr terminates, the flow inside it (`Some(None)`: a tunnel with
/// no flow inside, which is not steered by its outer header either).
fn tunnel_payload(
    proto: u8,
    l4: &[u8],
    label: &impl Fn(u32) -> MplsPayload,
    depth: usize,
) -> Option<Option<u32>> {
    match proto {
        ip_proto::UDP => {
            let udp = UdpPacket::new_checked(l4).ok()?;
            match udp.dst_port() {
                udp_port::VXLAN => Some(
                    VxlanPacket::new_checked(udp.payload())
                        .ok()
                        .and_then(|v| ethernet_frame(v.payload(), label, depth + 1)),
                ),
                udp_port::MPLS_IN_UDP => Some(mpls(udp.payload(), label, depth)),
                _ => None,
            }
        }
        ip_proto::GRE => {
            let g = GrePacket::new_checked(l4).ok()?;
            (g.protocol_type() == ethertype::MPLS).then(|| mpls(g.payload(), label, depth))
        }
        _ => None,
    }
}

fn mpls(p: &[u8], label: &impl Fn(u32) -> MplsPayload, depth: usize) -> Option<u32> {
    let stack = LabelStack::parse(p).ok()?;
    let payload = p.get(stack.buffer_len()..)?;
    match label(stack.top().label) {
        MplsPayload::Ip => ip_packet(payload, label, depth + 1),
        MplsPayload::Ethernet => ethernet_frame(payload, label, depth + 1),
        MplsPayload::Unknown => None,
    }
}

/// FNV-1a over the lower address then the higher (with its port), the protocol: the
/// same value both ways. Not a keyed hash: a sender who aims all its flows at one worker
/// only slows its own flows' worker, as one flow would.
fn symmetric(a: &[u8], b: &[u8], proto: u8, ports: Option<(u16, u16)>) -> u32 {
    let (pa, pb) = ports.unwrap_or((0, 0));
    let ((lo, lp), (hi, hp)) = if (a, pa) <= (b, pb) {
        ((a, pa), (b, pb))
    } else {
        ((b, pb), (a, pa))
    };
    let (lp, hp) = (lp.to_be_bytes(), hp.to_be_bytes());
    let mut h: u32 = 0x811c_9dc5;
    for &x in lo.iter().chain(&lp).chain(hi).chain(&hp).chain(&[proto]) {
        h = (h ^ u32::from(x)).wrapping_mul(0x0100_0193);
    }
    h
}

#[cfg(test)]
mod tests;
