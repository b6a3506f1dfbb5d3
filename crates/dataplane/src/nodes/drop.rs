//! drop: counts each packet under its reason and frees it.

use crate::context::Cx;
use ovr_graph::{CONSUMED, Node, Vector};
use ovr_tables::state::ForwardingState;

pub struct Drop;

impl Node<Cx, ForwardingState> for Drop {
    fn name(&self) -> &'static str {
        "drop"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        &[]
    }

    fn process(&mut self, cx: &mut Cx, _st: &ForwardingState, v: &mut Vector<'_>) {
        for &p in v.pkts {
            let r = usize::from(cx.pool.meta(p).drop);
            if let Some(c) = cx.drops.get_mut(r) {
                *c += 1;
            }
        }
        cx.pool.free(v.pkts);
        v.next.fill(CONSUMED);
    }

    fn trace(&self, cx: &Cx, _st: &ForwardingState, pkt: u32) -> Option<String> {
        Some(crate::describe::dropped(cx.pool.meta(pkt)))
    }
}
