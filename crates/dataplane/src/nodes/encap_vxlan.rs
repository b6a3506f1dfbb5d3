//! encap-vxlan: an Ethernet frame into VXLAN (RFC 7348) towards its next hop's VTEP.

use super::outer::{Next, Rewrites, Shim, Transport};
use crate::context::Cx;
use ovr_graph::{Node, Vector};
use ovr_tables::nexthop::Encap;
use ovr_tables::state::ForwardingState;
use ovr_wire::udp_port;
use ovr_wire::vxlan::VxlanRepr;

#[derive(Default)]
pub struct EncapVxlan {
    rewrites: Rewrites,
}

pub(super) fn vxlan(e: Encap) -> Option<Shim> {
    let Encap::Vxlan { vni } = e else {
        return None;
    };
    let mut bytes = [0u8; 8];
    VxlanRepr { vni }.emit(&mut bytes);
    Some(Shim {
        transport: Transport::Udp {
            dst_port: udp_port::VXLAN,
        },
        bytes,
        len: 8,
    })
}

impl Node<Cx, ForwardingState> for EncapVxlan {
    fn name(&self) -> &'static str {
        "encap-vxlan"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        self.rewrites.process(cx, st, v, vxlan);
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        Rewrites::trace(cx, st, pkt)
    }
}
