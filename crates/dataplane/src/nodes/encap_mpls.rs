//! encap-mpls: a packet under one MPLS label, in UDP (RFC 7510) or GRE (RFC 4023),
//! towards its next hop. Routed packets travel as bare IP, bridged ones as Ethernet
//! frames: the label, which the receiver allocated, tells it which.

use super::outer::{Next, Rewrites, Shim, Transport};
use crate::context::Cx;
use ovr_graph::{Node, Vector};
use ovr_tables::nexthop::Encap;
use ovr_tables::state::ForwardingState;
use ovr_wire::mpls::LabelEntry;
use ovr_wire::udp_port;

#[derive(Default)]
pub struct EncapMpls {
    rewrites: Rewrites,
}

/// TTL of the label entry: the tunnel is one hop of the overlay.
const LABEL_TTL: u8 = 64;

pub(super) fn mpls(e: Encap) -> Option<Shim> {
    let (label, transport) = match e {
        Encap::MplsOverUdp { label } => (
            label,
            Transport::Udp {
                dst_port: udp_port::MPLS_IN_UDP,
            },
        ),
        Encap::MplsOverGre { label } => (label, Transport::Gre),
        Encap::Vxlan { .. } => return None,
    };
    let entry = LabelEntry {
        label,
        tc: 0,
        bottom: true,
        ttl: LABEL_TTL,
    };
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&entry.to_word().to_be_bytes());
    Some(Shim {
        transport,
        bytes,
        len: 4,
    })
}

impl Node<Cx, ForwardingState> for EncapMpls {
    fn name(&self) -> &'static str {
        "encap-mpls"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        self.rewrites.process(cx, st, v, mpls);
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        Rewrites::trace(cx, st, pkt)
    }
}
