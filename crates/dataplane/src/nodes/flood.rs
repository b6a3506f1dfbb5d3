//! flood: broadcast, multicast and unknown-unicast frames are replicated to the members
//! of the network's flood list (local interfaces, and remote VTEPs: ingress
//! replication). Never back where the frame came from, and what came from a tunnel is not
//! sent into tunnels again (split horizon: every VTEP replicates to all the others).

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use crate::forward::{Dest, dest};
use crate::meta::{Meta, flags};
use ovr_graph::{Node, Vector, next_nodes};
use ovr_tables::ids::{NextHopId, VrfId};
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

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        // Only the original is seen here (its copies are traced from their next node).
        let m = cx.pool.meta(pkt);
        Some(format!(
            "flooded in {}; this copy to {}",
            crate::describe::vrf(st, m.vrf),
            crate::describe::nexthop(st, m.next_hop)
        ))
    }
}

/// Where the copy for flood member `nh` goes, with its metadata; `None` where split
/// horizon forbids it (back out of the receiving interface, or from a tunnel into one).
fn target(st: &ForwardingState, meta: &Meta, nh: NextHopId) -> Option<(Next, Meta)> {
    let mut m = *meta;
    // A flooded frame is bridged as it is.
    m.flags &= !flags::ROUTED;
    let from_tunnel = meta.has(flags::FROM_TUNNEL);
    let next = match dest(st, &mut m, nh) {
        Dest::Output if m.tx_if != meta.rx_if => Next::Output,
        Dest::Vxlan if !from_tunnel => Next::Vxlan,
        Dest::Mpls if !from_tunnel => Next::Mpls,
        _ => return None,
    };
    Some((next, m))
}

/// Sends copies to all targets but the last, which takes the packet itself.
fn replicate(cx: &mut Cx, st: &ForwardingState, p: u32, v: &mut Vector<'_>) -> Next {
    let meta = *cx.pool.meta(p);
    let Some(vrf) = st.vrf(VrfId(meta.vrf)) else {
        return drop(cx.pool.meta_mut(p), Reason::NoVrf, Next::Drop);
    };
    let mut targets = vrf.flood.iter().filter_map(|&nh| target(st, &meta, nh));
    let Some(mut last) = targets.next() else {
        return drop(cx.pool.meta_mut(p), Reason::FloodEmpty, Next::Drop);
    };
    for t in targets {
        match cx.pool.duplicate(p) {
            Some(copy) => {
                *cx.pool.meta_mut(copy) = Meta {
                    flags: last.1.flags | flags::REPLICA,
                    ..last.1
                };
                v.emit(copy, last.0);
            }
            None => cx.count_drop(Reason::NoBuffers),
        }
        last = t;
    }
    *cx.pool.meta_mut(p) = last.1;
    last.0
}
