//! Redirects the kernel dropped: an egress that drops what the fast path redirects to it
//! (a veth whose peer runs no NAPI) is left to user space for a while, and the loss is
//! counted and logged, never a silent black hole.

use crate::{EGRESS_BACKOFF_NS, FastPath, Installed, Key, Offload, SUSPECT_NS};
use ovr_dataplane::context::Cx;

impl<O: Offload> FastPath<O> {
    /// Whether an interface dropped frames on receipt while the fast path redirected
    /// its frames: then the egresses it redirected to are avoided for a while, their
    /// entries removed, and the loss counted and logged (never a silent black hole).
    pub(crate) fn check_redirects(&mut self, cx: &mut Cx) {
        let since = cx.now.saturating_sub(SUSPECT_NS);
        for (id, dropped) in self.backend.rx_dropped() {
            let before = self.rx_dropped.insert(id.0, dropped);
            let delta = before.map_or(0, |b| dropped.saturating_sub(b));
            if delta == 0 {
                continue;
            }
            let from_here: Vec<(u32, Installed)> = self
                .installed
                .iter()
                .filter(|(_, r)| r.rx_if == id.0)
                .map(|(i, r)| (*i, *r))
                .collect();
            for (i, r) in from_here {
                self.merge(cx, i, r);
            }
            let suspects: Vec<u32> = self.redirected.get(&id.0).map_or(Vec::new(), |to| {
                to.iter()
                    .filter(|(_, at)| *at >= since)
                    .map(|(e, _)| *e)
                    .collect()
            });
            if suspects.is_empty() {
                continue;
            }
            // Each owner whose flows redirected from here sees the same drops: the
            // first counts them.
            let shared = self.shared.clone();
            let mut s = shared.lock();
            let counted = s.counted.entry(id.0).or_insert(0);
            let lost = dropped.saturating_sub((*counted).max(dropped - delta));
            *counted = (*counted).max(dropped);
            for &e in &suspects {
                s.bad_egress.insert(e, cx.now + EGRESS_BACKOFF_NS);
            }
            drop(s);
            self.counters.redirect_failed += lost;
            tracing::warn!(
                "fast path: interface {} dropped {delta} redirected frames; egress {:?} left \
                 to user space for {} s (a veth egress needs NAPI on its peer: GRO on, or \
                 an XDP program there)",
                id.0,
                suspects,
                EGRESS_BACKOFF_NS / 1_000_000_000
            );
            let gone: Vec<(u32, Key)> = self
                .installed
                .iter()
                .filter(|(_, r)| suspects.contains(&r.tx_if))
                .map(|(i, r)| (*i, r.key))
                .collect();
            self.forget(gone);
            for s in suspects {
                self.bad_egress.insert(s, cx.now + EGRESS_BACKOFF_NS);
            }
        }
        self.redirected.retain(|_, to| {
            to.retain(|(_, at)| *at >= since);
            !to.is_empty()
        });
    }

    /// Takes up the egresses other owners found dropping redirected frames: this
    /// owner's entries towards them go too.
    pub(crate) fn follow_bad_egress(&mut self, cx: &mut Cx) {
        let shared = self.shared.lock().bad_egress.clone();
        let new: Vec<u32> = shared
            .iter()
            .filter(|(e, until)| cx.now < **until && self.bad_egress.get(e) != Some(until))
            .map(|(e, _)| *e)
            .collect();
        self.bad_egress = shared;
        if new.is_empty() {
            return;
        }
        let towards: Vec<(u32, Installed)> = self
            .installed
            .iter()
            .filter(|(_, r)| new.contains(&r.tx_if))
            .map(|(i, r)| (*i, *r))
            .collect();
        let mut gone = Vec::with_capacity(towards.len());
        for (i, r) in towards {
            self.merge(cx, i, r);
            gone.push((i, r.key));
        }
        self.forget(gone);
    }
}
