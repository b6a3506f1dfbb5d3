//! gateway: the virtual gateway answers pings to its addresses (IPv4 and IPv6), so that
//! a workload can check its default gateway as it would on any network. A service
//! function's echo reply to a health probe is taken here (`probe`).

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::{Meta, flags};
use ovr_graph::{CONSUMED, Node, Vector, next_nodes};
use ovr_tables::ids::VrfId;
use ovr_tables::state::ForwardingState;
use ovr_wire::checksum;
use ovr_wire::ethernet::EthernetFrame;
use ovr_wire::ipv4::Ipv4Packet;
use ovr_wire::ipv6::Ipv6Packet;
use ovr_wire::{WireError, icmpv4, icmpv6, ip_proto};

next_nodes! { pub enum Next { Output = "interface-output", Drop = "drop" } }

pub struct Gateway;

impl Node<Cx, ForwardingState> for Gateway {
    fn name(&self) -> &'static str {
        "gateway"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        v.map(|_, p| {
            // A function's answer to a health probe ends here.
            if crate::probe::take_echo_reply(cx, st, p) {
                return CONSUMED;
            }
            let (meta, data) = cx.pool.split_mut(p);
            answer(st, meta, data).into()
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        Some(format!(
            "echo request to the gateway of {}: reply on {}",
            crate::describe::vrf(st, m.vrf),
            crate::describe::interface(st, m.tx_if)
        ))
    }
}

fn answer(st: &ForwardingState, meta: &mut Meta, data: &mut [u8]) -> Next {
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(meta, Reason::NoVrf, Next::Drop);
    };
    let (l3, l4) = (usize::from(meta.l3), usize::from(meta.l4));
    let echo = |proto: u8, ty: u8| {
        (meta.key.protocol == proto && l4 > l3 && data.get(l4) == Some(&ty)).then_some(())
    };
    let ok = if meta.has(flags::IPV6) {
        echo(ip_proto::ICMPV6, icmpv6::msg_type::ECHO_REQUEST)
            .and_then(|()| echo_v6(data, l3, l4).ok())
    } else {
        echo(ip_proto::ICMP, icmpv4::msg_type::ECHO_REQUEST)
            .and_then(|()| echo_v4(data, l3, l4).ok())
    };
    if ok.is_none() {
        return drop(meta, Reason::GatewayUnsupported, Next::Drop);
    }
    let mut eth = EthernetFrame::new_unchecked(&mut data[..]);
    let requester = eth.src();
    eth.set_dst(requester);
    eth.set_src(vrf.router_mac);
    meta.tx_if = meta.rx_if;
    Next::Output
}

/// Turns an ICMPv4 echo request into its reply in place.
fn echo_v4(data: &mut [u8], l3: usize, l4: usize) -> Result<(), WireError> {
    let mut ip = Ipv4Packet::new_checked(&mut data[l3..])?;
    let end = ip.total_len() as usize;
    let icmp = &mut ip.payload_mut()[..end - (l4 - l3)];
    if !checksum::verify(icmp) {
        return Err(WireError::Icmpv4BadChecksum);
    }
    icmp[0] = icmpv4::msg_type::ECHO_REPLY;
    icmp[2..4].fill(0);
    let c = checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let b = &mut data[l3..];
    swap_addresses(b, 12, 4);
    b[8] = 64;
    Ipv4Packet::new_unchecked(b).fill_checksum();
    Ok(())
}

/// Turns an ICMPv6 echo request into its reply in place.
fn echo_v6(data: &mut [u8], l3: usize, l4: usize) -> Result<(), WireError> {
    let ip = Ipv6Packet::new_checked(&data[l3..])?;
    let (src, dst) = (ip.src(), ip.dst());
    let end = l3 + 40 + usize::from(ip.payload_len());
    let icmp = &mut data[l4..end];
    let len = icmp.len() as u32;
    if !checksum::verify_with(
        checksum::pseudo_header_v6(src, dst, ip_proto::ICMPV6, len),
        icmp,
    ) {
        return Err(WireError::Icmpv6BadChecksum);
    }
    icmp[0] = icmpv6::msg_type::ECHO_REPLY;
    icmp[2..4].fill(0);
    let c = checksum::checksum_with(
        checksum::pseudo_header_v6(dst, src, ip_proto::ICMPV6, len),
        icmp,
    );
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let b = &mut data[l3..];
    swap_addresses(b, 8, 16);
    b[7] = 64;
    Ok(())
}

/// Swaps the source and destination addresses of an IP header (`n` bytes each, the
/// destination right after the source).
fn swap_addresses(b: &mut [u8], src_at: usize, n: usize) {
    let (s, d) = b[src_at..src_at + 2 * n].split_at_mut(n);
    s.swap_with_slice(d);
}
