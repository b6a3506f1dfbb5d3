//! encap-mpls: a packet under one MPLS label, in UDP (RFC 7510) or GRE (RFC 4023),
//! towards its next hop. Routed packets travel as bare IP, bridged ones as Ethernet
//! frames: the label, which the receiver allocated, tells it which.

use super::drop;
use super::outer::{Rewrites, Transport};
use crate::context::Cx;
use crate::drop::Reason;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;
use ovr_wire::mpls::LabelEntry;
use ovr_wire::udp_port;

next_nodes! { pub enum Next { Output = "interface-output", Drop = "drop" } }

#[derive(Default)]
pub struct EncapMpls {
    rewrites: Rewrites,
}

/// TTL of the label entry: the tunnel is one hop of the overlay.
const LABEL_TTL: u8 = 64;

impl Node<Cx, ForwardingState> for EncapMpls {
    fn name(&self) -> &'static str {
        "encap-mpls"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        for (i, &p) in v.pkts.iter().enumerate() {
            let nh = NextHopId(cx.pool.meta(p).next_hop);
            let r = match st.nexthop(nh) {
                Some(NextHop::Tunnel(t)) => match mpls_transport(t.encap) {
                    Some((label, transport)) => {
                        let entry = LabelEntry {
                            label,
                            tc: 0,
                            bottom: true,
                            ttl: LABEL_TTL,
                        };
                        self.rewrites.encapsulate(
                            cx,
                            st,
                            p,
                            (nh, t),
                            transport,
                            &entry.to_word().to_be_bytes(),
                        )
                    }
                    None => Err(Reason::NextHopUnsupported),
                },
                _ => Err(Reason::NextHopUnsupported),
            };
            v.next[i] = match r {
                Ok(()) => Next::Output,
                Err(e) => drop(cx.pool.meta_mut(p), e, Next::Drop),
            }
            .into();
        }
    }

    fn trace(&self, cx: &Cx, pkt: u32) -> Option<String> {
        Some(format!("next hop {}", cx.pool.meta(pkt).next_hop))
    }
}

/// The label and the carrier of an MPLS tunnel.
fn mpls_transport(e: Encap) -> Option<(u32, Transport)> {
    match e {
        Encap::MplsOverUdp { label } => Some((
            label,
            Transport::Udp {
                dst_port: udp_port::MPLS_IN_UDP,
            },
        )),
        Encap::MplsOverGre { label } => Some((label, Transport::Gre)),
        Encap::Vxlan { .. } => None,
    }
}
