//! A table change that leaves an offloaded flow's treatment as it was keeps its entry.
//!
//! Invalidating every entry at once (a new generation) on every change sends every
//! offloaded flow back through user space to be installed again: under route churn
//! (a route flipped between equivalent next hops twice a second, batches of unrelated
//! routes) that was every flow of the host several times a second, each packet of the
//! window through the slow path and each flow one more map update. Instead, when only
//! routes, next hops, bridge entries, labels, policies or chains changed, the owner takes
//! the decision of each flow it offloaded again (as the flow node would at its next
//! packet, `ovr_dataplane::nodes::flow::revalidate_flow`), before forwarding with the new
//! tables, and:
//!
//! - keeps the entry when the flow still forwards through a next hop whose content is
//!   the one the entry was described from (the same next hop, or an equivalent one: the
//!   same tunnel, VNI, remote MAC, or the same interface and MAC): the entry's bytes
//!   would be the same;
//! - removes it otherwise (another path, a drop, the flow gone): the flow's next packet
//!   goes to user space, which forwards it with the new decision and offers it again.
//!
//! Only the entries a change can affect are taken again ([`Scope`]): the tables say what
//! the changes since the last re-check touched (`ForwardingState::touched_since`:
//! routes, bridge entries, next hops), and an entry whose flow's decision reads none of
//! them (its destination outside every touched prefix of its network, its MAC not
//! touched, its next hop not touched) keeps it without a look. When the tables cannot
//! say (an interface, network, policy, label or chain changed, or too many changes
//! came), and for flows whose decision reads more (service chains, replies sent back
//! to the host a request came from), every entry is taken again.
//!
//! What every entry is described from beyond its next hop (interfaces: kind, MAC, MTU,
//! addresses, admin state; networks: VNI, router MAC) is compared as a whole
//! ([`Surroundings`]): when it changed, or when the owner holds more entries than a
//! re-check should take ([`RECHECK_MAX`]), a new generation invalidates every entry, as
//! before.

use crate::{FastPath, Installed, Offload};
use ovr_dataplane::context::Cx;
use ovr_dataplane::nodes::flow::revalidate_flow;
use ovr_tables::flow::{FlowAction, FlowEntry, FlowId, flags as flow_flags};
use ovr_tables::ids::{NextHopId, VrfId};
use ovr_tables::interface::Interface;
use ovr_tables::nexthop::{NextHop, Tunnel};
use ovr_tables::prefix::{IpPrefix, mask};
use ovr_tables::state::{ForwardingState, Touch};
use ovr_wire::ethernet::MacAddr;
use std::collections::HashSet;

/// Most entries one owner re-checks on a table change (about 0.2-0.5 µs each); with
/// more, a new generation invalidates them all at once instead.
pub const RECHECK_MAX: usize = 200_000;

/// The next hop an entry was described from, as content (not id): two next hops with
/// the same content give entries with the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Interface {
        interface: ovr_tables::ids::InterfaceId,
        dst_mac: MacAddr,
    },
    Tunnel(Tunnel),
    /// A kind the fast path does not carry (never kept across a change).
    Other,
}

impl Via {
    pub(crate) fn of(st: &ForwardingState, nh: NextHopId) -> Self {
        match st.nexthop(nh) {
            Some(NextHop::Interface { interface, dst_mac }) => Via::Interface {
                interface: *interface,
                dst_mac: *dst_mac,
            },
            Some(NextHop::Tunnel(t)) => Via::Tunnel(*t),
            _ => Via::Other,
        }
    }
}

/// What every entry's description read from the tables beyond its next hop.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Surroundings {
    interfaces: Vec<Interface>,
    networks: Vec<(VrfId, Option<u32>, MacAddr)>,
}

impl Surroundings {
    pub(crate) fn of(st: &ForwardingState) -> Self {
        Self {
            interfaces: st.interfaces().iter().cloned().collect(),
            networks: st.vrfs().map(|v| (v.id, v.vni, v.router_mac)).collect(),
        }
    }
}

/// What the changes since an entry's decision touched, in the form an entry is tested
/// against: hash sets, and the prefix lengths of the touched routes (a destination is
/// inside a touched prefix iff its network at one of those lengths is one).
#[derive(Debug, Default)]
pub(crate) struct Scope {
    routes: HashSet<(VrfId, IpPrefix)>,
    lengths: Vec<(bool, u8)>,
    bridges: HashSet<(VrfId, MacAddr)>,
    nexthops: HashSet<NextHopId>,
}

impl Scope {
    /// What tables `st` changed since epoch `since`; None if they cannot tell.
    pub(crate) fn since(st: &ForwardingState, since: u32) -> Option<Self> {
        let mut s = Scope::default();
        for t in st.touched_since(since)? {
            match *t {
                Touch::Route { vrf, prefix } => {
                    let l = (prefix.addr().is_ipv4(), prefix.prefix_len());
                    if !s.lengths.contains(&l) {
                        s.lengths.push(l);
                    }
                    s.routes.insert((vrf, prefix));
                }
                Touch::Bridge { vrf, mac } => {
                    s.bridges.insert((vrf, mac));
                }
                Touch::NextHop(n) => {
                    s.nexthops.insert(n);
                }
            }
        }
        Some(s)
    }

    /// Whether the decision of flow `e` (installed from next hop `nh`) may read
    /// something touched. Flows whose decision reads more than their route or bridge
    /// entry and next hop (chains, replies back to a sender) always may.
    pub(crate) fn affects(&self, cx: &Cx, e: &FlowEntry, nh: NextHopId) -> bool {
        let partner_sent = e
            .reverse
            .and_then(|r| cx.flows.get(r))
            .is_some_and(|p| p.flags & flow_flags::SENT != 0);
        if partner_sent
            || e.flags & (flow_flags::SENT | flow_flags::TO_SENDER) != 0
            || ovr_tables::chain::is_service_key(e.key.vrf)
        {
            return true;
        }
        let vrf = e.key.vrf();
        let cached = match e.action {
            Some(FlowAction::Forward { next_hop }) => next_hop,
            _ => return true,
        };
        if self.nexthops.contains(&nh) || self.nexthops.contains(&cached) {
            return true;
        }
        if e.key.bridged {
            return self.bridges.contains(&(vrf, MacAddr(e.dst_mac)));
        }
        let dst = e.key.dst_ip();
        self.lengths.iter().any(|&(v4, len)| {
            v4 == dst.is_ipv4()
                && IpPrefix::new(mask(dst, len), len).is_ok_and(|p| self.routes.contains(&(vrf, p)))
        })
    }
}

impl<O: Offload> FastPath<O> {
    /// Takes the decision of every flow this owner offloaded again for tables `st`
    /// (those the changes since epoch `since` can affect, if the tables tell), keeping
    /// the entries whose treatment is unchanged and removing the others (after their
    /// counters are merged).
    pub(crate) fn recheck(&mut self, st: &ForwardingState, cx: &mut Cx, since: Option<u32>) {
        let scope = since.and_then(|e| Scope::since(st, e));
        // Entries of an older generation are not used any more (nothing to check).
        let ids: Vec<(u32, Installed)> = self
            .installed
            .iter()
            .filter(|(_, r)| r.generation == self.generation)
            .map(|(i, r)| (*i, *r))
            .collect();
        if ids.is_empty() {
            return;
        }
        self.counters.rechecks += 1;
        let mut gone = Vec::new();
        for (id, rec) in ids {
            if !crate::alive(cx, id, &rec) {
                self.retire(cx, id, rec, None);
                continue;
            }
            if let Some(scope) = &scope
                && let Some(e) = cx.flows.get(FlowId(id))
                && !scope.affects(cx, &e, rec.nh)
            {
                self.counters.recheck_skipped += 1;
                continue;
            }
            let same = revalidate_flow(cx, st, FlowId(id), rec.rx_if, rec.strip > 0)
                && match cx.flows.get(FlowId(id)).and_then(|e| e.action) {
                    Some(FlowAction::Forward { next_hop }) => {
                        rec.via != Via::Other && Via::of(st, next_hop) == rec.via
                    }
                    _ => false,
                };
            if same {
                self.counters.rechecked_kept += 1;
            } else {
                self.merge(cx, id, rec);
                gone.push((id, rec.key));
            }
        }
        self.counters.rechecked_removed += gone.len() as u64;
        self.forget(gone);
    }
}
