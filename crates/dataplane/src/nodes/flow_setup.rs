//! flow-setup: the slow path for packets without a flow. Looks the destination up
//! (bridge table or FIB, or the next hop an MPLS label chose), picks the ECMP member,
//! asks the policy, and installs the flow with its reverse so that replies pass
//! (stateful policy). A denied flow is installed too, as a drop that ages out quickly, so
//! that a blocked sender costs a lookup, not a slow path, per packet.

use super::drop;
use super::flow::{Next, follow, policy_applies};
use crate::chain;
use crate::context::Cx;
use crate::decide::{self, Lookup, Route};
use crate::drop::{DropReason, Reason};
use crate::forward::dest;
use crate::meta::{Meta, flags};
use crate::rate::{PerInterface, default_burst};
use ovr_graph::{Node, Vector};
use ovr_tables::chain::into_key_port;
use ovr_tables::flow::{FlowAction, FlowInsertError, FlowKey, flags as flow_flags};
use ovr_tables::ids::NextHopId;
use ovr_tables::nexthop::NextHop;
use ovr_tables::policy::PolicyAction;
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;

#[derive(Default)]
pub struct FlowSetup {
    /// Per receiving interface, the new-flow allowance (bursts of a tenth of a second).
    limits: PerInterface,
}

impl FlowSetup {
    /// Whether packets from `rx` may set up one more flow now.
    fn admit(&mut self, cx: &Cx, rx: u32) -> bool {
        let Some(rate) = cx.settings.setup_rate else {
            return true;
        };
        self.limits.take(rx, cx.now, rate, default_burst(rate))
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
                let back = e.reverse.and_then(|r| cx.flows.get(r));
                let pair = match back {
                    Some(r) if r.flags & flow_flags::TO_SENDER != 0 => {
                        " with its reverse (back to the instance's host it came from)"
                    }
                    Some(_) => " with its reverse",
                    None => "",
                };
                let how = if m.has(flags::FLOW_CREATED) {
                    "created"
                } else {
                    "found"
                };
                match e.action {
                    Some(FlowAction::Forward { next_hop }) => format!(
                        "lookup in {}: flow {} {how}{pair}, {}",
                        crate::chain::describe_key_vrf(st, m.key.vrf),
                        id.0,
                        crate::describe::nexthop(st, next_hop.0)
                    ),
                    _ => format!("flow {} {how}: drop", id.0),
                }
            }
            None => format!(
                "lookup in {}: no flow installed",
                crate::chain::describe_key_vrf(st, m.key.vrf)
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
    let key = meta.key;
    let (nh, rev_key, back) = match steer(cx, st, &meta, dst_mac, src_mac, admit) {
        Ok(Steer::Forward { nh, rev_key, back }) => (nh, rev_key, back),
        Ok(Steer::Deny) => return deny(cx, st, p, key),
        Ok(Steer::Flood) => return Next::Flood,
        Err(r) => return drop(cx.pool.meta_mut(p), r, Next::Drop),
    };
    let now = cx.now;
    let epoch = st.epoch();
    // A reverse flow left from earlier (say, denied) gives way to this pair.
    if let Some(old) = rev_key.and_then(|k| cx.flows.lookup(&k)) {
        cx.flows.remove(old);
    }
    let fwd = (key, FlowAction::Forward { next_hop: nh });
    let installed = match (back.route, rev_key) {
        (Ok(Route::NextHop(rev_nh)), Some(rev_key)) => cx
            .flows
            .insert_pair(
                fwd,
                (rev_key, FlowAction::Forward { next_hop: rev_nh }),
                now,
            )
            .map(|(f, r)| (f, Some(r))),
        // No way back known yet (or none to install): the reply sets up its own flow.
        _ => cx.flows.insert(fwd.0, fwd.1, now).map(|f| (f, None)),
    };
    match installed {
        Ok((f, r)) => {
            // A reverse into a function from another host: its frames come to the
            // function's MAC.
            let rev_mac = match (rev_key, back.route) {
                (Some(k), Ok(Route::NextHop(nh))) if into_key_port(k.vrf).is_some() => {
                    match st.nexthop(nh) {
                        Some(NextHop::Interface { dst_mac, .. }) => *dst_mac,
                        _ => src_mac,
                    }
                }
                _ => src_mac,
            };
            for (id, mac) in [(Some(f), dst_mac), (r, rev_mac)] {
                if let Some(mut e) = id.and_then(|id| cx.flows.get_mut(id)) {
                    e.epoch = epoch;
                    e.dst_mac = mac.0;
                }
            }
            if back.to_sender
                && let Some(mut e) = r.and_then(|id| cx.flows.get_mut(id))
            {
                e.flags |= flow_flags::TO_SENDER;
            }
            if back.watch_sender
                && let Some(mut e) = cx.flows.get_mut(f)
            {
                e.flags |= flow_flags::SENT;
                e.sender = meta.sender;
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

/// Installs a flow the policy denied, as a drop that ages out quickly.
fn deny(cx: &mut Cx, st: &ForwardingState, p: u32, key: FlowKey) -> Next {
    let now = cx.now;
    let reason = DropReason::from(Reason::PolicyDenied).0;
    if let Ok(id) = cx.flows.insert(key, FlowAction::Drop { reason }, now) {
        if let Some(mut e) = cx.flows.get_mut(id) {
            e.epoch = st.epoch();
        }
        // The packet that set the flow up is the flow's first.
        cx.flows.touch(id, cx.pool.len(p) as u64, now);
        cx.flow_counters.created += 1;
    }
    drop(cx.pool.meta_mut(p), Reason::PolicyDenied, Next::Drop)
}

/// What the slow path decided for a new flow.
enum Steer {
    /// To this next hop, with the reverse flow's key and the way back (no reverse flow
    /// without a key).
    Forward {
        nh: NextHopId,
        rev_key: Option<FlowKey>,
        back: Back,
    },
    /// Denied by the policy.
    Deny,
    /// Bridged to an unknown MAC.
    Flood,
}

/// Where the reverse flow of a new pair goes.
struct Back {
    /// Its next hop (an error or a flood: none known yet, the reply sets up its own).
    route: Result<Route, Reason>,
    /// Back to the host the flow came from rather than where the route says.
    to_sender: bool,
    /// The flow came out of a tunnel and its way back depends on the host that sent it
    /// (`chain::reply_to_sender`): the forward flow remembers that host.
    watch_sender: bool,
}

impl Back {
    fn to(nh: NextHopId) -> Self {
        Back {
            route: Ok(Route::NextHop(nh)),
            to_sender: false,
            watch_sender: false,
        }
    }
}

/// Route, admission, policy and service chains for a packet without a flow.
fn steer(
    cx: &Cx,
    st: &ForwardingState,
    meta: &Meta,
    dst_mac: MacAddr,
    src_mac: MacAddr,
    admit: impl FnOnce(&Cx) -> bool,
) -> Result<Steer, Reason> {
    let key = meta.key;
    let mut rev_key = key.reverse();
    // Out of a network function: on along its chain, the reply back into it. Into one
    // from another host: into it, the reply back to the instance the request came from.
    let into = into_key_port(key.vrf);
    let steered = match (into, chain::port_of_key(st, &key)) {
        (Some(port), _) => Some(chain::into(st, port, meta.sender(), src_mac)?),
        (None, Some(port)) => Some(chain::from_port(st, port?, &key, dst_mac, meta.hash, None)?),
        (None, None) => None,
    };
    if let Some(chain::Steered { nh, rev }) = steered {
        if !admit(cx) {
            return Err(Reason::FlowSetupLimited);
        }
        // A flow into a function from another host remembers that host: its reverse is
        // taken again when the session comes from elsewhere.
        let watch_sender = into.is_some() && meta.sender().is_some();
        let Some((rev_vrf, rev_nh)) = rev else {
            return Ok(Steer::Forward {
                nh,
                rev_key: None,
                back: Back {
                    watch_sender,
                    ..Back::to(nh)
                },
            });
        };
        rev_key.vrf = rev_vrf;
        // (Sent into a port by another host: a bridged frame, to the function's MAC.)
        rev_key.bridged = into_key_port(rev_vrf).is_some();
        return Ok(Steer::Forward {
            nh,
            rev_key: Some(rev_key),
            back: Back {
                watch_sender,
                ..Back::to(rev_nh)
            },
        });
    }
    let lookup = Lookup {
        key,
        dst_mac,
        pinned: meta.has(flags::PINNED).then_some(NextHopId(meta.pinned)),
        previous: None,
        hash: meta.hash,
    };
    let nh = match decide::route(st, &lookup)? {
        Route::NextHop(nh) => nh,
        Route::Flood => return Ok(Steer::Flood),
    };
    if !admit(cx) {
        return Err(Reason::FlowSetupLimited);
    }
    let dst_net = decide::destination_network(st, nh, key.vrf());
    let verdict = if policy_applies(st, meta) {
        decide::verdict(st, &key, dst_net)
    } else {
        PolicyAction::Allow
    };
    // The reply arrives in the destination network and goes back where this came from.
    rev_key.vrf = dst_net.0;
    let mut rev_lookup = Lookup {
        key: rev_key,
        dst_mac: src_mac,
        pinned: None,
        previous: None,
        hash: meta.hash,
    };
    let nh = match verdict {
        PolicyAction::Deny => return Ok(Steer::Deny),
        PolicyAction::Allow => nh,
        // Into the chain; its first function's reply comes back out of the port, and
        // is routed back here in the source network.
        PolicyAction::Chain(_) if key.bridged => return Ok(Steer::Deny),
        PolicyAction::Chain(c) => {
            let (first, rev_vrf) = chain::enter(st, c, meta.hash, None)?;
            rev_lookup.key.vrf = key.vrf;
            rev_key.vrf = rev_vrf;
            first
        }
    };
    let route = decide::route(st, &rev_lookup);
    // Sent on by a service instance's host: the replies go back through it.
    let sender = meta.sender().filter(|_| verdict == PolicyAction::Allow);
    if let Some(sender) = sender {
        let rev_nh = match route {
            Ok(Route::NextHop(n)) => Some(n),
            _ => None,
        };
        if let Some(via) = chain::reply_to_sender(st, &rev_key, sender, rev_nh) {
            return Ok(Steer::Forward {
                nh,
                rev_key: Some(rev_key),
                back: Back {
                    route: Ok(Route::NextHop(via)),
                    to_sender: true,
                    watch_sender: true,
                },
            });
        }
    }
    Ok(Steer::Forward {
        nh,
        rev_key: Some(rev_key),
        back: Back {
            route,
            to_sender: false,
            watch_sender: sender.is_some(),
        },
    })
}
