//! What the latest changes touched, so that a decision cached from older tables (an
//! offloaded flow's) is taken again only where a change can alter it.
//!
//! A flow's decision reads the route of its destination in its network (or the bridge
//! entry of its destination MAC), the next hop found, and, through composites, their
//! members; the rest (interfaces, networks, labels, policies, chains, flooding) is
//! recorded as "everything": a reader that asks from before such a change is told the
//! changes are unknown, as it is when it asks from further back than the log holds.

use super::TableOp;
use crate::ids::{NextHopId, VrfId};
use crate::prefix::IpPrefix;
use ovr_wire::ethernet::MacAddr;
use std::collections::VecDeque;

/// Most touches the log holds: a reader further behind than that re-checks everything.
pub const TOUCHED_MAX: usize = 8192;

/// One thing a change touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Touch {
    /// The route of exactly this prefix (added, replaced or removed): decisions for
    /// destinations inside it, in that network.
    Route { vrf: VrfId, prefix: IpPrefix },
    /// The bridge entry of this MAC in that network.
    Bridge { vrf: VrfId, mac: MacAddr },
    /// A next hop replaced or removed; a composite's members before and after are
    /// touched too (a flow's cached decision names the member it took).
    NextHop(NextHopId),
}

/// The touches of the latest changes, oldest first, with the epoch each came at.
#[derive(Debug, Clone, Default)]
pub(super) struct TouchLog {
    log: VecDeque<(u32, Touch)>,
    /// Every change after this epoch is in the log.
    complete_after: u32,
}

/// Whether epoch `a` is later than `b` (epochs wrap around).
fn later(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

impl TouchLog {
    /// Records what `op`, applied at `epoch`, touches; `old` is the next hop it
    /// replaces or removes, if any.
    pub(super) fn record(
        &mut self,
        epoch: u32,
        op: &TableOp,
        old: Option<&crate::nexthop::NextHop>,
    ) {
        let mut push = |t| self.log.push_back((epoch, t));
        match op {
            TableOp::AddRoute { vrf, prefix, .. } | TableOp::RemoveRoute { vrf, prefix } => {
                push(Touch::Route {
                    vrf: *vrf,
                    prefix: *prefix,
                })
            }
            TableOp::AddBridge { vrf, mac, .. } | TableOp::RemoveBridge { vrf, mac } => {
                push(Touch::Bridge {
                    vrf: *vrf,
                    mac: *mac,
                })
            }
            TableOp::UpsertNextHop(id, nh) => {
                push(Touch::NextHop(*id));
                for m in nh
                    .members()
                    .iter()
                    .chain(old.map_or(&[][..], |o| o.members()))
                {
                    push(Touch::NextHop(*m));
                }
            }
            TableOp::RemoveNextHop(id) => {
                push(Touch::NextHop(*id));
                for m in old.map_or(&[][..], |o| o.members()) {
                    push(Touch::NextHop(*m));
                }
            }
            // Anything else may alter any decision: what came before is forgotten.
            _ => {
                self.log.clear();
                self.complete_after = epoch;
            }
        }
        while self.log.len() > TOUCHED_MAX {
            let Some((e, _)) = self.log.pop_front() else {
                break;
            };
            self.complete_after = e;
        }
        // Touches of the epoch just forgotten go too (the log holds whole changes).
        while self
            .log
            .front()
            .is_some_and(|(e, _)| !later(*e, self.complete_after))
        {
            self.log.pop_front();
        }
    }

    /// What the changes after `epoch` touched, or None if that is not known.
    pub(super) fn since(&self, epoch: u32) -> Option<impl Iterator<Item = &Touch>> {
        if later(self.complete_after, epoch) {
            return None;
        }
        Some(
            self.log
                .iter()
                .filter(move |(e, _)| later(*e, epoch))
                .map(|(_, t)| t),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nexthop::{Ecmp, NextHop};

    fn route(n: u8) -> TableOp {
        TableOp::RemoveRoute {
            vrf: VrfId(1),
            prefix: IpPrefix::new(core::net::Ipv4Addr::new(10, n, 0, 0).into(), 16)
                .expect("prefix"),
        }
    }

    fn touched(l: &TouchLog, since: u32) -> Option<Vec<Touch>> {
        l.since(since).map(|t| t.copied().collect())
    }

    #[test]
    fn the_log_tells_what_came_after_an_epoch_and_only_as_far_back_as_it_reaches() {
        let mut l = TouchLog::default();
        l.record(1, &route(1), None);
        l.record(2, &route(2), None);
        let Some(t) = touched(&l, 1) else {
            panic!("known")
        };
        assert_eq!(t.len(), 1);
        assert_eq!(touched(&l, 2), Some(vec![]));
        assert_eq!(touched(&l, 0).map(|t| t.len()), Some(2));
        // Something it does not scope: nothing before it is known any more.
        l.record(
            3,
            &TableOp::SetFlowQuota {
                vrf: VrfId(1),
                max: None,
            },
            None,
        );
        assert_eq!(touched(&l, 2), None);
        assert_eq!(touched(&l, 3), Some(vec![]));
        // Past its size, the oldest changes are forgotten whole.
        for e in 4..4 + TOUCHED_MAX as u32 + 1 {
            l.record(e, &route(0), None);
        }
        assert_eq!(touched(&l, 3), None);
        assert_eq!(touched(&l, 4).map(|t| t.len()), Some(TOUCHED_MAX));
    }

    #[test]
    fn a_composite_touches_its_members_before_and_after() {
        let mut l = TouchLog::default();
        let old = NextHop::Composite(Ecmp::new(&[NextHopId(1), NextHopId(2)]));
        let new = NextHop::Composite(Ecmp::new(&[NextHopId(2), NextHopId(3)]));
        l.record(1, &TableOp::UpsertNextHop(NextHopId(9), new), Some(&old));
        let mut t: Vec<Touch> = touched(&l, 0).expect("known");
        t.sort_by_key(|t| match t {
            Touch::NextHop(n) => n.0,
            _ => u32::MAX,
        });
        t.dedup();
        assert_eq!(
            t,
            [1, 2, 3, 9].map(|n| Touch::NextHop(NextHopId(n))).to_vec()
        );
    }
}
