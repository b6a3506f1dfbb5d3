//! What the pipeline tests share: an interface with its address, and a small UDP packet
//! built field by field.
// Each test crate compiles this module and uses only part of it.
#![allow(dead_code)]

use ovr_tables::ids::{InterfaceId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress, InterfaceKind};
use ovr_tables::state::TableOp;
use ovr_wire::ethernet::{EthernetRepr, MacAddr, ethertype};
use ovr_wire::ip_proto;
use ovr_wire::ipv4::Ipv4Repr;
use ovr_wire::udp::UdpRepr;
use std::net::Ipv4Addr;

/// An Ethernet/IPv4/UDP frame with 4 bytes of payload (46 bytes), IPv4 identification
/// `ident`, TTL 64.
pub fn udp_frame(
    (src_mac, dst_mac): (MacAddr, MacAddr),
    (src, dst): (Ipv4Addr, Ipv4Addr),
    (src_port, dst_port): (u16, u16),
    ident: u16,
) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 4];
    EthernetRepr {
        dst: dst_mac,
        src: src_mac,
        tags: [None, None],
        ethertype: ethertype::IPV4,
    }
    .emit(&mut f);
    Ipv4Repr {
        src,
        dst,
        protocol: ip_proto::UDP,
        ttl: 64,
        dscp: 0,
        ecn: 0,
        ident,
        dont_frag: false,
        payload_len: 12,
    }
    .emit(&mut f[14..]);
    UdpRepr {
        src_port,
        dst_port,
        payload_len: 4,
    }
    .emit(&mut f[34..]);
    f
}

/// An interface (MTU 1500, policy on, up) with at most one address, in a /24.
pub fn interface(
    id: InterfaceId,
    name: &str,
    kind: InterfaceKind,
    vrf: Option<VrfId>,
    mac: MacAddr,
    addr: Option<Ipv4Addr>,
) -> TableOp {
    TableOp::UpsertInterface(Interface {
        id,
        name: name.into(),
        kind,
        vrf,
        mac,
        addresses: addr
            .map(|a| InterfaceAddress {
                addr: a.into(),
                prefix_len: 24,
            })
            .into_iter()
            .collect(),
        mtu: 1500,
        policy: true,
        admin_up: true,
        memif: None,
        police: None,
    })
}
