//! encap-vxlan: an Ethernet frame into VXLAN (RFC 7348) towards its next hop's VTEP.

use super::drop;
use super::outer::{Rewrites, Transport};
use crate::context::Cx;
use crate::drop::Reason;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;
use ovr_wire::udp_port;
use ovr_wire::vxlan::VxlanRepr;

next_nodes! { pub enum Next { Output = "interface-output", Drop = "drop" } }

#[derive(Default)]
pub struct EncapVxlan {
    rewrites: Rewrites,
}

impl Node<Cx, ForwardingState> for EncapVxlan {
    fn name(&self) -> &'static str {
        "encap-vxlan"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        for (i, &p) in v.pkts.iter().enumerate() {
            if let Some(&n) = v.pkts.get(i + 4) {
                cx.pool.prefetch(n);
            }
            let nh = NextHopId(cx.pool.meta(p).next_hop);
            let r = match st.nexthop(nh) {
                Some(NextHop::Tunnel(t)) => match t.encap {
                    Encap::Vxlan { vni } => {
                        let mut shim = [0u8; 8];
                        VxlanRepr { vni }.emit(&mut shim);
                        let udp = Transport::Udp {
                            dst_port: udp_port::VXLAN,
                        };
                        self.rewrites.encapsulate(cx, st, p, (nh, t), udp, &shim)
                    }
                    _ => Err(Reason::NextHopUnsupported),
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
