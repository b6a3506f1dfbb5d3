//! flow: the fast path. A batch lookup of every packet's flow key; a hit applies the
//! cached action (taking the decision again first if the tables changed since), a miss
//! goes to flow-setup.

use super::drop;
use crate::chain;
use crate::context::Cx;
use crate::decide::{self, Lookup, Route};
use crate::drop::{DropReason, Reason};
use crate::forward::{Dest, dest};
use crate::meta::{Meta, flags};
use ovr_graph::{Node, VECTOR_SIZE, Vector, next_nodes};
use ovr_tables::chain::into_key_port;
use ovr_tables::flow::{FlowAction, FlowId, FlowKey, flags as flow_flags};
use ovr_tables::policy::PolicyAction;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;

next_nodes! {
    pub enum Next {
        Setup = "flow-setup",
        Gateway = "gateway",
        Flood = "flood",
        IpRewrite = "ip-rewrite",
        Vxlan = "encap-vxlan",
        Mpls = "encap-mpls",
        Output = "interface-output",
        Drop = "drop",
    }
}

impl Next {
    pub(crate) fn from_dest(d: Dest, meta: &mut crate::meta::Meta) -> Next {
        match d {
            Dest::IpRewrite => Next::IpRewrite,
            Dest::Output => Next::Output,
            Dest::Vxlan => Next::Vxlan,
            Dest::Mpls => Next::Mpls,
            Dest::Gateway => Next::Gateway,
            Dest::Drop(r) => drop(meta, r, Next::Drop),
        }
    }
}

pub struct Flow {
    keys: Box<[FlowKey; VECTOR_SIZE]>,
    found: Box<[Option<FlowId>; VECTOR_SIZE]>,
}

impl Default for Flow {
    fn default() -> Self {
        Self {
            keys: Box::new([FlowKey::default(); VECTOR_SIZE]),
            found: Box::new([None; VECTOR_SIZE]),
        }
    }
}

impl Node<Cx, ForwardingState> for Flow {
    fn name(&self) -> &'static str {
        "flow"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        Next::NAMES
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        let n = v.pkts.len();
        // A vector the one-pass path has just looked up in vain (a new-flow flood) is
        // not looked up twice; flow-setup looks each packet up again anyway.
        let mut all_missed = true;
        for (k, &p) in self.keys.iter_mut().zip(v.pkts) {
            let meta = cx.pool.meta_mut(p);
            all_missed &= meta.has(flags::FLOW_MISSED);
            meta.flags &= !flags::FLOW_MISSED;
            *k = meta.key;
        }
        if all_missed {
            self.found[..n].fill(None);
        } else {
            cx.flows.lookup_batch(&self.keys[..n], &mut self.found[..n]);
        }
        let epoch = st.epoch();
        for (i, &p) in v.pkts.iter().enumerate() {
            let Some(id) = self.found[i] else {
                v.next[i] = Next::Setup.into();
                continue;
            };
            // A bridged flow was decided by its destination MAC, which the key does not
            // hold: a frame of the same 5-tuple to another MAC (a moved or re-addressed
            // host, the two sides of a bump in the wire) takes the decision again for it.
            // The entry's first line says whether anything changed; the whole entry is
            // read and written only then.
            let (mut stale, mut moved) = (false, false);
            if let Some(h) = cx.flows.head(id) {
                let dst = cx.pool.data(p).first_chunk::<6>().copied();
                let new_mac = dst.filter(|d| h.bridged() && d != h.dst_mac());
                stale = new_mac.is_some() || h.epoch() != epoch;
                let meta = cx.pool.meta(p);
                if (new_mac.is_some() || meta.sent_by_another_head(h) != Some(false))
                    && let Some(mut e) = cx.flows.get_mut(id)
                {
                    if let Some(d) = new_mac {
                        e.dst_mac = d;
                    }
                    moved = sender_moved(&mut e, meta);
                }
            }
            if moved {
                moved_replies(cx, id, p, epoch);
            }
            if stale {
                let policy = policy_applies(st, cx.pool.meta(p));
                if !revalidate(cx, st, id, policy) {
                    v.next[i] = Next::Setup.into();
                    continue;
                }
                cx.pool.meta_mut(p).flags |= flags::FLOW_REVALIDATED;
            }
            cx.pool.meta_mut(p).flags |= flags::FLOW_HIT;
            v.next[i] = follow(cx, st, p, id).into();
        }
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        if !m.has(flags::FLOW_HIT) {
            return Some("flow miss: to the slow path".into());
        }
        let again = if m.has(flags::FLOW_REVALIDATED) {
            " (decision taken again: the tables changed)"
        } else {
            ""
        };
        let id = cx
            .flows
            .lookup(&m.key)
            .map_or(String::new(), |i| format!(" {}", i.0));
        Some(
            match cx
                .flows
                .lookup(&m.key)
                .and_then(|i| cx.flows.get(i)?.action)
            {
                Some(FlowAction::Drop { .. }) => format!("flow{id} hit{again}: cached drop"),
                _ => format!(
                    "flow{id} hit{again}: {}",
                    crate::describe::nexthop(st, m.next_hop)
                ),
            },
        )
    }
}

/// A packet of a flow set up out of a tunnel (`flow_flags::SENT`) that another host sent
/// on: the session moved (to a service instance there, say). Remembers the new sender;
/// the flows whose way back depends on it are to take their decision again at their
/// next packet, from this sender (`moved_replies`). The forward direction's own
/// decision does not depend on where it came from.
#[inline]
fn sender_moved(e: &mut ovr_tables::flow::FlowEntry, meta: &Meta) -> bool {
    if !meta.sent_by_another(e) {
        return false;
    }
    e.sender = meta.sender;
    true
}

/// The flow whose way back depends on the sender of flow `id`, which changed (packet
/// `p` came from another host): its reverse (`chain::reply_to_sender`, or for a flow
/// into a function from another host the instance there its request comes from, by the
/// source MAC, `chain::into`) takes its decision again at its next packet.
#[cold]
fn moved_replies(cx: &mut Cx, id: FlowId, p: u32, epoch: u32) {
    let Some(e) = cx.flows.get(id) else { return };
    let into = into_key_port(e.key.vrf).is_some();
    let Some(r) = e.reverse else { return };
    let src = cx
        .pool
        .data(p)
        .get(6..12)
        .and_then(|m| m.first_chunk::<6>().copied());
    if let Some(mut r) = cx.flows.get_mut(r) {
        // A past epoch: never current again.
        r.epoch = epoch.wrapping_sub(1);
        // The reverse of a flow into a function remembers the request's source MAC
        // (the sending instance's).
        if into && let Some(src) = src {
            r.dst_mac = src;
        }
    }
}

/// Whether a chain pass's pair, whose decision was taken again, now has its replies
/// coming back with another key than its reverse's (its instance moved between this
/// host and another, or between two ports here): then the pair is removed, for the
/// packet to set it up again with its reverse keyed as they come (else the replies
/// would set up a pair of their own, in the source network replacing the very flow).
fn rekey(
    cx: &mut Cx,
    id: FlowId,
    partner: Option<FlowKey>,
    rev: Option<(u32, ovr_tables::ids::NextHopId)>,
) -> bool {
    match (partner, rev) {
        (Some(p), Some((vrf, _))) if p.vrf != vrf => {
            cx.flows.remove(id);
            true
        }
        _ => false,
    }
}

/// Sends a packet the way its installed flow says, counting it on the flow.
pub(crate) fn follow(cx: &mut Cx, st: &ForwardingState, p: u32, id: FlowId) -> Next {
    let len = cx.pool.len(p) as u64;
    cx.flows.touch(id, len, cx.now);
    let action = cx.flows.head(id).and_then(|e| e.action());
    let meta = cx.pool.meta_mut(p);
    match action {
        Some(FlowAction::Forward { next_hop }) => {
            let d = dest(st, meta, next_hop);
            Next::from_dest(d, meta)
        }
        Some(FlowAction::Drop { reason }) => drop(meta, DropReason(reason), Next::Drop),
        // A live entry always has an action.
        None => drop(meta, Reason::NoNextHop, Next::Drop),
    }
}

/// Whether policy is enforced for a packet: always for what arrives in a tunnel, else
/// as the receiving interface says.
pub(crate) fn policy_applies(st: &ForwardingState, meta: &crate::meta::Meta) -> bool {
    policy_on(st, meta.rx_if, meta.has(flags::FROM_TUNNEL))
}

/// Whether policy is enforced for what arrives on `rx_if` (`from_tunnel`: decapsulated
/// there).
fn policy_on(st: &ForwardingState, rx_if: u32, from_tunnel: bool) -> bool {
    from_tunnel
        || st
            .interface(ovr_tables::ids::InterfaceId(rx_if))
            .is_none_or(|i| i.policy)
}

/// Takes flow `id`'s decision again for tables `st` unless it was taken for them
/// already, outside the packet path (the fast path re-checks the flows it carries
/// when the tables change): as the flow node would at the flow's next packet, which
/// arrived on `rx_if` (`from_tunnel`: decapsulated there). Returns false if the flow
/// is gone (or was removed: a bridged flow whose MAC is no longer known).
pub fn revalidate_flow(
    cx: &mut Cx,
    st: &ForwardingState,
    id: FlowId,
    rx_if: u32,
    from_tunnel: bool,
) -> bool {
    match cx.flows.head(id) {
        None => false,
        Some(e) if e.epoch() == st.epoch() => true,
        Some(_) => revalidate(cx, st, id, policy_on(st, rx_if, from_tunnel)),
    }
}

/// Takes a cached flow's decision again after a table change: the route (keeping the
/// ECMP member while it is still a member) and the policy verdict of its pair.
/// Returns false if the flow was removed instead (a bridged flow whose MAC is no longer
/// known floods again, which the slow path does).
fn revalidate(cx: &mut Cx, st: &ForwardingState, id: FlowId, policy: bool) -> bool {
    let Some(e) = cx.flows.get(id) else {
        return false;
    };
    cx.flow_counters.revalidated += 1;
    let previous = match e.action {
        Some(FlowAction::Forward { next_hop }) => Some(next_hop),
        _ => None,
    };
    let lookup = Lookup {
        key: e.key,
        dst_mac: MacAddr(e.dst_mac),
        pinned: None,
        previous,
        hash: e.key.symmetric_hash(),
    };
    let reverse = e.flags & flow_flags::REVERSE != 0;
    let partner_entry = e.reverse.and_then(|r| cx.flows.get(r));
    // The replies out of a function whose request came from another host's instance go
    // back into that instance while it is there: the one on the request's latest
    // sender with the MAC it sends from (`chain::into`).
    let back = match (chain::port_of_key(st, &e.key), partner_entry) {
        (Some(Ok(port)), Some(f))
            if reverse
                && port.hop > 0
                && f.flags & flow_flags::SENT != 0
                && into_key_port(f.key.vrf).is_some() =>
        {
            chain::sending_instance(
                st,
                port.chain,
                usize::from(port.hop) - 1,
                crate::meta::vtep(&f.sender),
                MacAddr(e.dst_mac),
            )
        }
        _ => None,
    };
    if let Some(via) = back
        && let Some(mut m) = cx.flows.get_mut(id)
    {
        m.action = Some(FlowAction::Forward { next_hop: via });
        m.epoch = st.epoch();
        return true;
    }
    let partner = partner_entry.map(|r| r.key);
    // A pass through a service chain keeps its instance while it is healthy.
    if let Some(d) = chain::decide_again(st, &e.key, MacAddr(e.dst_mac), previous, reverse) {
        if let Ok(s) = d
            && !reverse
            && rekey(cx, id, partner, s.rev)
        {
            return false;
        }
        let action = match d {
            Ok(s) => FlowAction::Forward { next_hop: s.nh },
            Err(r) => FlowAction::Drop {
                reason: DropReason::from(r).0,
            },
        };
        if let Some(mut m) = cx.flows.get_mut(id) {
            m.action = Some(action);
            m.epoch = st.epoch();
        }
        return true;
    }
    let route = decide::route(st, &lookup);
    if route == Ok(Route::Flood) {
        cx.flows.remove(id);
        return false;
    }
    // The verdict is always that of the pair's first direction.
    let verdict = if !policy {
        PolicyAction::Allow
    } else if reverse {
        match partner {
            Some(fwd) if !decide::allowed(st, &fwd, e.key.vrf()) => PolicyAction::Deny,
            _ => PolicyAction::Allow,
        }
    } else {
        let dst_net = match (partner, route) {
            // (A pair into a chain's instance on another host has its reverse in the
            // source network: the route says where the flow goes.)
            (Some(rev), _)
                if !ovr_tables::chain::is_service_key(rev.vrf) && rev.vrf != e.key.vrf =>
            {
                rev.vrf()
            }
            (_, Ok(Route::NextHop(nh))) => decide::destination_network(st, nh, e.key.vrf()),
            (_, _) => e.key.vrf(),
        };
        decide::verdict(st, &e.key, dst_net)
    };
    let allowed = verdict != PolicyAction::Deny;
    let action = match (verdict, route) {
        (PolicyAction::Deny, _) => FlowAction::Drop {
            reason: DropReason::from(Reason::PolicyDenied).0,
        },
        // Into a chain: the instance it had, while healthy.
        (PolicyAction::Chain(c), Ok(Route::NextHop(_))) if !e.key.bridged => {
            match chain::enter(st, c, e.key.symmetric_hash(), previous) {
                Ok((nh, rev_vrf)) => {
                    if rekey(cx, id, partner, Some((rev_vrf, nh))) {
                        return false;
                    }
                    FlowAction::Forward { next_hop: nh }
                }
                Err(r) => FlowAction::Drop {
                    reason: DropReason::from(r).0,
                },
            }
        }
        (PolicyAction::Chain(_), Ok(Route::NextHop(_))) => FlowAction::Drop {
            reason: DropReason::from(Reason::PolicyDenied).0,
        },
        (_, Ok(Route::NextHop(nh))) => FlowAction::Forward { next_hop: nh },
        (_, Err(r)) => FlowAction::Drop {
            reason: DropReason::from(r).0,
        },
        (_, Ok(Route::Flood)) => return false,
    };
    // A reply goes back to the host its request comes from lately, while that host runs
    // a service instance, as flow-setup decided it.
    let via = match (partner_entry, route) {
        (Some(f), Ok(Route::NextHop(nh)))
            if reverse && allowed && f.flags & flow_flags::SENT != 0 =>
        {
            chain::reply_to_sender(st, &e.key, crate::meta::vtep(&f.sender), Some(nh))
        }
        _ => None,
    };
    let action = match via {
        Some(nh) => FlowAction::Forward { next_hop: nh },
        None => action,
    };
    if let Some(mut m) = cx.flows.get_mut(id) {
        m.action = Some(action);
        m.epoch = st.epoch();
        match via {
            Some(_) => m.flags |= flow_flags::TO_SENDER,
            None => m.flags &= !flow_flags::TO_SENDER,
        }
        if allowed {
            m.flags &= !flow_flags::DENIED;
        } else {
            m.flags |= flow_flags::DENIED;
        }
    }
    true
}
