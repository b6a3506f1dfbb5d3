//! encap-vxlan: an Ethernet frame into VXLAN (RFC 7348) towards its next hop's VTEP.

use super::drop;
use super::outer::{Transport, encapsulate};
use crate::context::Cx;
use crate::drop::Reason;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;
use ovr_wire::udp_port;
use ovr_wire::vxlan::VxlanRepr;

next_nodes! { pub enum Next { Output = "interface-output", Drop = "drop" } }

pub struct EncapVxlan;

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
            let r = match st.nexthop(NextHopId(cx.pool.meta(p).next_hop)) {
                Some(NextHop::Tunnel(t)) => match t.encap {
                    Encap::Vxlan { vni } => {
                        let mut shim = [0u8; 8];
                        VxlanRepr { vni }.emit(&mut shim);
                        let udp = Transport::Udp {
                            dst_port: udp_port::VXLAN,
                        };
                        encapsulate(cx, st, p, t, udp, &shim)
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
