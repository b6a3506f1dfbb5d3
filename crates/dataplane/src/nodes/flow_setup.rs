//! flow-setup: the slow path for packets without a flow. Looks the destination up
//! (bridge table or FIB, or the next hop an MPLS label chose), picks the ECMP member,
//! asks the policy, and installs the flow with its reverse so that replies pass
//! (stateful policy). A denied flow is installed too, as a drop that ages out quickly, so
//! that a blocked sender costs a lookup, not a slow path, per packet.

use super::drop;
use super::flow::{Next, follow, policy_applies};
use crate::context::Cx;
use crate::decide::{self, Lookup, Route};
use crate::drop::{DropReason, Reason};
use crate::forward::dest;
use crate::meta::{Meta, flags};
use ovr_graph::{Node, Vector};
use ovr_tables::flow::{FlowAction, FlowInsertError};
use ovr_tables::ids::NextHopId;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;

#[derive(Default)]
pub struct FlowSetup {
    /// Per receiving interface, the new-flow allowance.
    limits: Vec<TokenBucket>,
}

/// A token bucket in nanosecond units: `rate` flows per second accrue continuously, up
/// to a tenth of a second's worth.
#[derive(Debug, Clone, Copy, Default)]
struct TokenBucket {
    /// Flows available, times 10^9.
    credit: u64,
    /// When credit was last added; `None` until first used (it starts full).
    last: Option<u64>,
}

const NS: u64 = 1_000_000_000;

impl TokenBucket {
    fn take(&mut self, now: u64, rate: u32) -> bool {
        let rate = u64::from(rate);
        let cap = (rate / 10).max(64) * NS;
        let elapsed = self.last.map_or(NS, |l| now.saturating_sub(l).min(NS));
        self.last = Some(self.last.map_or(now, |l| l.max(now)));
        self.credit = (self.credit + elapsed * rate).min(cap);
        if self.credit >= NS {
            self.credit -= NS;
            true
        } else {
            false
        }
    }
}

impl FlowSetup {
    /// Whether packets from `rx` may set up one more flow now.
    fn admit(&mut self, cx: &Cx, rx: u32) -> bool {
        let Some(rate) = cx.settings.setup_rate else {
            return true;
        };
        let i = rx as usize;
        if self.limits.len() <= i {
            self.limits.resize(i + 1, TokenBucket::default());
        }
        self.limits[i].take(cx.now, rate)
    }
}

/// flow-setup sends packets on as the flow node does, minus flow-setup itself.
const NEXTS: &[&str] = {
    let (_, rest) = Next::NAMES.split_at(1);
    rest
};

impl Node<Cx, ForwardingState> for FlowSetup {
    fn name(&self) -> &'static str {
        "flow-setup"
    }

    fn next_nodes(&self) -> &'static [&'static str] {
        NEXTS
    }

    fn process(&mut self, cx: &mut Cx, st: &ForwardingState, v: &mut Vector<'_>) {
        cx.follow_quotas(st);
        v.map(|_, p| {
            let next = setup(cx, st, p, |cx| self.admit(cx, cx.pool.meta(p).rx_if));
            // Indices shift by one against the flow node's list (no flow-setup here).
            (next as u16).saturating_sub(1)
        });
    }

    fn trace(&self, cx: &Cx, st: &ForwardingState, pkt: u32) -> Option<String> {
        let m = cx.pool.meta(pkt);
        let entry = cx
            .flows
            .lookup(&m.key)
            .and_then(|i| Some((i, cx.flows.get(i)?)));
        Some(match entry {
            Some((id, e)) => {
                let pair = if e.reverse.is_some() {
                    " with its reverse"
                } else {
                    ""
                };
                let how = if m.has(flags::FLOW_CREATED) {
                    "created"
                } else {
                    "found"
                };
                match e.action {
                    Some(FlowAction::Forward { next_hop }) => format!(
                        "lookup in {}: flow {} {how}{pair}, {}",
                        crate::describe::vrf(st, m.key.vrf),
                        id.0,
                        crate::describe::nexthop(st, next_hop.0)
                    ),
                    _ => format!("flow {} {how}: drop", id.0),
                }
            }
            None => format!(
                "lookup in {}: no flow installed",
                crate::describe::vrf(st, m.key.vrf)
            ),
        })
    }
}

fn setup(cx: &mut Cx, st: &ForwardingState, p: u32, admit: impl FnOnce(&Cx) -> bool) -> Next {
    let data = cx.pool.data(p);
    let dst_mac = MacAddr(data[0..6].try_into().unwrap_or_default());
    let src_mac = MacAddr(data[6..12].try_into().unwrap_or_default());
    let meta = *cx.pool.meta(p);
    // An earlier packet of the same new flow in this vector has installed it already.
    if let Some(id) = cx.flows.lookup(&meta.key) {
        return follow(cx, st, p, id);
    }
    let lookup = Lookup {
        key: meta.key,
        dst_mac,
        pinned: meta.has(flags::PINNED).then_some(NextHopId(meta.pinned)),
        previous: None,
        hash: meta.hash,
    };
    let nh = match decide::route(st, &lookup) {
        Ok(Route::NextHop(nh)) => nh,
        Ok(Route::Flood) => return Next::Flood,
        Err(r) => return drop(cx.pool.meta_mut(p), r, Next::Drop),
    };
    if !admit(cx) {
        return drop(cx.pool.meta_mut(p), Reason::FlowSetupLimited, Next::Drop);
    }
    let key = meta.key;
    let dst_net = decide::destination_network(st, nh, key.vrf());
    let now = cx.now;
    let epoch = st.epoch();
    if policy_applies(st, &meta) && !decide::allowed(st, &key, dst_net) {
        let reason = DropReason::from(Reason::PolicyDenied).0;
        if let Ok(id) = cx.flows.insert(key, FlowAction::Drop { reason }, now) {
            if let Some(e) = cx.flows.get_mut(id) {
                e.epoch = epoch;
            }
            // The packet that set the flow up is the flow's first.
            cx.flows.touch(id, cx.pool.len(p) as u64, now);
            cx.flow_counters.created += 1;
        }
        return drop(cx.pool.meta_mut(p), Reason::PolicyDenied, Next::Drop);
    }
    // The reply arrives in the destination network and goes back where this came from.
    let mut rev_key = key.reverse();
    rev_key.vrf = dst_net.0;
    let rev_lookup = Lookup {
        key: rev_key,
        dst_mac: src_mac,
        pinned: None,
        previous: None,
        hash: meta.hash,
    };
    // A reverse flow left from earlier (say, denied) gives way to this pair.
    if let Some(old) = cx.flows.lookup(&rev_key) {
        cx.flows.remove(old);
    }
    let fwd = (key, FlowAction::Forward { next_hop: nh });
    let installed = match decide::route(st, &rev_lookup) {
        Ok(Route::NextHop(rev_nh)) => cx
            .flows
            .insert_pair(
                fwd,
                (rev_key, FlowAction::Forward { next_hop: rev_nh }),
                now,
            )
            .map(|(f, r)| (f, Some(r))),
        // No way back known yet: the reply will set up its own flow.
        _ => cx.flows.insert(fwd.0, fwd.1, now).map(|f| (f, None)),
    };
    match installed {
        Ok((f, r)) => {
            for (id, mac) in [(Some(f), dst_mac), (r, src_mac)] {
                if let Some(e) = id.and_then(|id| cx.flows.get_mut(id)) {
                    e.epoch = epoch;
                    e.dst_mac = mac.0;
                }
            }
            cx.flows.touch(f, cx.pool.len(p) as u64, now);
            cx.flow_counters.created += 1;
            cx.pool.meta_mut(p).flags |= flags::FLOW_CREATED;
        }
        Err(FlowInsertError::Exists(id)) => return follow(cx, st, p, id),
        Err(_) => return drop(cx.pool.meta_mut(p), Reason::FlowTableFull, Next::Drop),
    }
    let meta: &mut Meta = cx.pool.meta_mut(p);
    let d = dest(st, meta, nh);
    Next::from_dest(d, meta)
}
