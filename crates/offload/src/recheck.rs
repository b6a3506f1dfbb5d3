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
//! What every entry is described from beyond its next hop (interfaces: kind, MAC, MTU,
//! addresses, admin state; networks: VNI, router MAC) is compared as a whole
//! ([`Surroundings`]): when it changed, or when the owner holds more entries than a
//! re-check should take ([`RECHECK_MAX`]), a new generation invalidates every entry, as
//! before.

use crate::{FastPath, Installed, Offload};
use ovr_dataplane::context::Cx;
use ovr_dataplane::nodes::flow::revalidate_flow;
use ovr_tables::flow::{FlowAction, FlowId};
use ovr_tables::ids::{NextHopId, VrfId};
use ovr_tables::interface::Interface;
use ovr_tables::nexthop::{NextHop, Tunnel};
use ovr_tables::state::ForwardingState;
use ovr_wire::ethernet::MacAddr;

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

impl<O: Offload> FastPath<O> {
    /// Takes the decision of every flow this owner offloaded again for tables `st`,
    /// keeping the entries whose treatment is unchanged and removing the others (after
    /// their counters are merged).
    pub(crate) fn recheck(&mut self, st: &ForwardingState, cx: &mut Cx) {
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
