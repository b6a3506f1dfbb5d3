//! interface-output: the last checks (interface up, MTU) and the transmit queue.

use super::drop;
use crate::context::Cx;
use crate::drop::Reason;
use ovr_graph::{CONSUMED, Node, Vector, next_nodes};
use ovr_tables::ids::InterfaceId;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::HEADER_LEN;

next_nodes! { pub enum Next { Drop = "drop" } }

pub struct InterfaceOutput;

impl Node<Cx, ForwardingState> for InterfaceOutput {
    fn name(&self) -> &'static str {
        "interface-output"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        for (i, &p) in v.pkts.iter().enumerate() {
            let tx_if = cx.pool.meta(p).tx_if;
            let len = cx.pool.len(p);
            let refused = match st.interface(InterfaceId(tx_if)) {
                None => Some(Reason::UnknownInterface),
                Some(iface) if !iface.admin_up => Some(Reason::InterfaceDown),
                // The MTU counts the L3 packet, not the Ethernet header.
                Some(iface) if len > usize::from(iface.mtu) + HEADER_LEN => {
                    Some(Reason::MtuExceeded)
                }
                Some(_) => None,
            };
            v.next[i] = match refused {
                Some(r) => drop(cx.pool.meta_mut(p), r, Next::Drop).into(),
                None => {
                    cx.transmit(p, tx_if);
                    CONSUMED
                }
            };
        }
    }

    /// A packet that passed is queued for transmission (the step has no next); one
    /// that did not goes to drop with its reason.
    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        Some(format!(
            "sent on {}, {} bytes",
            crate::describe::interface(st, m.tx_if),
            cx.pool.len(pkt)
        ))
    }
}
