//! What the fast path must do to a flow's frames, learnt from what the user-space
//! pipeline did to one of them: the frame as it left (its outer headers become the
//! template, its inner MACs the rewrite), the packet's metadata (where it came from and
//! went, routed or bridged, from a tunnel) and the tables (router MAC, VNI, MTU).
//!
//! Only what the XDP program reproduces exactly is described: VXLAN over IPv4 with an
//! IPv4 inner packet, TCP, UDP or ICMP echo (so that a ping survives ovrd's restart as a
//! TCP session does), between a workload and the underlay (both ways) or
//! between two local workloads; bridged or routed. Anything else stays in user space.

use crate::layout::{Action, Key, TPL_LEN, VXLAN_HEAD, flags};
use ovr_dataplane::meta::{Meta, flags as mf};
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::InterfaceKind;
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::HEADER_LEN;

/// Why a packet's flow is not offloaded (counted, not an error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not a flow's packet (flood replica, gateway), IPv6, MPLS, ICMP but echo, ...
    Shape,
    /// The next hop or the interfaces are of a kind the fast path does not handle.
    Path,
    /// An interface without the XDP program (or unknown to the host).
    NotAttached,
}

const UDP_VXLAN: u16 = 4789;

/// Describes the flow of packet `meta`, which left as `frame`. `ifindex` maps ovr's
/// interface ids to the host's interface indexes (None: no XDP program there).
pub fn describe(
    st: &ForwardingState,
    meta: &Meta,
    frame: &[u8],
    ifindex: impl Fn(InterfaceId) -> Option<u32>,
) -> Result<(Key, Action), Refused> {
    let m = meta;
    if !m.has(mf::FLOW_HIT | mf::FLOW_CREATED)
        || m.has(mf::REPLICA | mf::IPV6 | mf::PINNED | mf::OUTER_GRE)
        || !matches!(m.key.protocol, 1 | 6 | 17)
    {
        return Err(Refused::Shape);
    }
    let rx = st.interface(InterfaceId(m.rx_if)).ok_or(Refused::Path)?;
    let tx = st.interface(InterfaceId(m.tx_if)).ok_or(Refused::Path)?;
    let vrf = st.vrf(VrfId(m.vrf)).ok_or(Refused::Path)?;
    let routed = m.has(mf::ROUTED);
    let from_tunnel = m.has(mf::FROM_TUNNEL);
    let nh = st.nexthop(NextHopId(m.next_hop)).ok_or(Refused::Path)?;
    let (vni, strip, push) = match (rx.kind, from_tunnel, nh, tx.kind) {
        (InterfaceKind::Underlay, true, NextHop::Interface { .. }, k)
            if k != InterfaceKind::Underlay =>
        {
            (vrf.vni.ok_or(Refused::Path)?, VXLAN_HEAD, 0)
        }
        (k, false, NextHop::Interface { .. }, t)
            if k != InterfaceKind::Underlay && t != InterfaceKind::Underlay =>
        {
            (0, 0, 0)
        }
        (k, false, NextHop::Tunnel(t), InterfaceKind::Underlay)
            if k != InterfaceKind::Underlay
                && matches!(t.encap, Encap::Vxlan { .. })
                && t.dst.is_ipv4()
                && t.inner_dst.is_none() =>
        {
            (0, 0, VXLAN_HEAD)
        }
        _ => return Err(Refused::Path),
    };
    let head = usize::from(push);
    // The frame as it left: [outer headers] inner Ethernet, IPv4 (no options), L4.
    if frame.len() < head + HEADER_LEN + 20 + 8 {
        return Err(Refused::Shape);
    }
    if push > 0 {
        let o = &frame[..head];
        let vxlan_v4 = o[12..14] == [0x08, 0x00]
            && o[14] == 0x45
            && o[23] == 17
            && u16::from_be_bytes([o[36], o[37]]) == UDP_VXLAN;
        if !vxlan_v4 {
            return Err(Refused::Shape);
        }
    }
    let inner = &frame[head..];
    if inner[12..14] != [0x08, 0x00] || inner[HEADER_LEN] != 0x45 {
        return Err(Refused::Shape);
    }
    let ip = &inner[HEADER_LEN..];
    let l4 = &ip[20..];
    let icmp = ip[9] == 1;
    // An echo's flow is keyed by its identifier both ways (as user space keys it).
    let (src_port, dst_port) = match (icmp, l4[0]) {
        (true, 0 | 8) => {
            let id = u16::from_be_bytes([l4[4], l4[5]]);
            (id, id)
        }
        (true, _) => return Err(Refused::Shape),
        _ => (
            u16::from_be_bytes([l4[0], l4[1]]),
            u16::from_be_bytes([l4[2], l4[3]]),
        ),
    };
    let key_dst_mac = if routed {
        vrf.router_mac.0
    } else {
        inner[0..6].try_into().unwrap_or_default()
    };
    let key = Key {
        ifindex: ifindex(rx.id).ok_or(Refused::NotAttached)?,
        vni,
        // As the packet arrived: a routed packet's addresses and ports are not
        // rewritten, only its MACs and TTL.
        src: ip[12..16].try_into().unwrap_or_default(),
        dst: ip[16..20].try_into().unwrap_or_default(),
        src_port,
        dst_port,
        dst_mac: key_dst_mac,
        protocol: ip[9],
    };
    let mut template = [0u8; TPL_LEN];
    template[..head].copy_from_slice(&frame[..head]);
    let mut f = 0;
    if routed {
        f |= flags::SET_MAC;
        if !from_tunnel {
            f |= flags::DEC_TTL;
        }
    }
    if !from_tunnel && !icmp {
        // A workload may have left its checksum to the NIC: only a complete one passes
        // (the kernel sums ICMP itself; its checksum has no pseudo-header to check with).
        f |= flags::CHECK_L4;
    }
    let action = Action {
        egress: ifindex(tx.id).ok_or(Refused::NotAttached)?,
        strip,
        push,
        max_len: tx.mtu.saturating_add(HEADER_LEN as u16),
        flags: f,
        mac: inner[0..12].try_into().unwrap_or_default(),
        template,
        sender: [0; 4],
    };
    Ok((key, action))
}
