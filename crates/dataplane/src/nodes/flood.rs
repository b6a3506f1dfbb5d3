//! flood: broadcast, multicast and unknown-unicast frames are replicated to the members
//! of the network's flood list (local interfaces, and remote VTEPs: ingress
//! replication). Never back where the frame came from, and what came from a tunnel is not
//! sent into tunnels again (split horizon: every VTEP replicates to all the others).

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::meta::flags;
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::VrfId;
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::ForwardingState;

next_nodes! {
    pub enum Next {
        Vxlan = "encap-vxlan",
        Mpls = "encap-mpls",
        Output = "interface-output",
        Drop = "drop",
    }
}

pub struct Flood;

impl Node<Cx, ForwardingState> for Flood {
    fn name(&self) -> &'static str {
        "flood"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        for i in 0..v.pkts.len() {
            let p = v.pkts[i];
            v.next[i] = replicate(cx, st, p, v).into();
        }
    }

    fn trace(&self, cx: &Cx, pkt: u32) -> Option<String> {
        Some(format!("to next hop {}", cx.pool.meta(pkt).next_hop))
    }
}

/// Where one copy goes.
fn target(nh: &NextHop, rx_if: u32, from_tunnel: bool) -> Option<(Next, u32)> {
    match nh {
        NextHop::Interface { interface, .. } if interface.0 != rx_if => {
            Some((Next::Output, interface.0))
        }
        NextHop::Tunnel(t) if !from_tunnel => Some((
            match t.encap {
                Encap::Vxlan { .. } => Next::Vxlan,
                _ => Next::Mpls,
            },
            t.underlay.0,
        )),
        _ => None,
    }
}

/// Sends copies to all targets but the last, which takes the packet itself.
fn replicate(cx: &mut Cx, st: &ForwardingState, p: u32, v: &mut Vector<'_>) -> Next {
    let meta = *cx.pool.meta(p);
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(cx.pool.meta_mut(p), Reason::NoVrf, Next::Drop);
    };
    let from_tunnel = meta.has(flags::FROM_TUNNEL);
    let mut targets = vrf.flood.iter().filter_map(|&nh| {
        let t = target(st.nexthop(nh)?, meta.rx_if, from_tunnel)?;
        Some((nh, t))
    });
    let Some(mut last) = targets.next() else {
        return drop(cx.pool.meta_mut(p), Reason::FloodEmpty, Next::Drop);
    };
    for t in targets {
        let (nh, (next, tx_if)) = last;
        match cx.pool.duplicate(p) {
            Some(copy) => {
                let m = cx.pool.meta_mut(copy);
                m.next_hop = nh.0;
                m.tx_if = tx_if;
                m.flags |= flags::REPLICA;
                v.emit(copy, next);
            }
            None => cx.count_drop(Reason::NoBuffers),
        }
        last = t;
    }
    let (nh, (next, tx_if)) = last;
    let m = cx.pool.meta_mut(p);
    m.next_hop = nh.0;
    m.tx_if = tx_if;
    next
}
