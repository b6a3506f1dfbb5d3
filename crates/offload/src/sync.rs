//! Merging everything the fast path counted into the pipeline's flows and counters,
//! before the API reads them: one pass over the backend's table, in steps.
//!
//! A pass is not done at once: the worker forwards nothing while it merges, and a
//! table of 256K entries took tens of milliseconds to read and merge, during which the
//! frames owed to user space piled up in the receive rings and were lost under churn.
//! The worker takes one step per loop iteration (at most `max` entries), forwarding in
//! between; the read is answered when the pass ends. Entries installed after the pass
//! began count as merged (their counters start at zero after the read was asked for).
//!
//! Whatever the table's read did not return (an entry the kernel's walk skipped, or an
//! error) is merged entry by entry at the end, also in steps. The pass knows whether
//! there is any without looking at every entry: it keeps the number of entries merged
//! by it (or installed since it began) that are still installed.

use super::{FastPath, Installed, Offload};
use ovr_dataplane::context::Cx;
use ovr_tables::flow::FlowId;

/// Entries asked for per read of the backend's table.
const SYNC_BATCH: usize = 4096;

/// A merge of everything under way.
#[derive(Default)]
pub(crate) struct SyncPass {
    /// Where the read goes on (None: from the start).
    cursor: Option<u32>,
    /// The table was read to its end.
    scanned: bool,
    /// Installed entries whose `synced` is this pass's number.
    merged: usize,
    /// Entries the read did not return, to be merged one by one (found once the read
    /// is over, and only if there are any).
    missed: Option<Vec<u32>>,
}

impl<O: Offload> FastPath<O> {
    /// Starts merging everything (a pass over the backend's table): go on with
    /// [`Self::sync_step`] until it says the pass is over. A pass under way is
    /// started again.
    pub fn sync_begin(&mut self) {
        self.sync_no = self.sync_no.wrapping_add(1);
        self.sync = Some(SyncPass::default());
    }

    /// Merges about `max` more entries of the pass (at least one read); true once it is
    /// over (or none was begun), with the fast path's totals in `cx`.
    pub fn sync_step(&mut self, cx: &mut Cx, max: usize) -> bool {
        let max = max.max(1);
        let Some(p) = self.sync.as_mut() else {
            return true;
        };
        if !p.scanned {
            self.read_some(cx, max);
            return false;
        }
        if p.missed.is_none() {
            let no = self.sync_no;
            p.missed = Some(if p.merged >= self.installed.len() {
                Vec::new()
            } else {
                self.installed
                    .iter()
                    .filter(|(_, r)| r.synced != no)
                    .map(|(&id, _)| id)
                    .collect()
            });
        }
        let missed = self
            .sync
            .as_mut()
            .and_then(|p| p.missed.as_mut())
            .expect("a pass under way");
        let some: Vec<u32> = missed.drain(missed.len().saturating_sub(max)..).collect();
        let over = missed.is_empty();
        for id in some {
            self.check(cx, id);
        }
        if over {
            self.sync = None;
            cx.fast_path = self.totals();
        }
        over
    }

    /// Merges everything now (ovrd's exit; tests).
    pub fn sync_all(&mut self, cx: &mut Cx) {
        self.sync_begin();
        while !self.sync_step(cx, usize::MAX) {}
    }

    /// Whether the fast path carries flow `id` now (an entry of the generation in
    /// force, for the flow as it is in the table): the flow dump's `offloaded`.
    pub fn carries(&self, cx: &Cx, id: FlowId) -> bool {
        self.generation != 0
            && self.installed.get(&id.0).is_some_and(|r| {
                r.generation == self.generation && cx.flows.get(id).is_some_and(|e| e.key == r.flow)
            })
    }

    /// One read of the pass: the entries it returns are merged (each once a pass).
    fn read_some(&mut self, cx: &mut Cx, max: usize) {
        let cursor = self.sync.as_ref().and_then(|p| p.cursor);
        let mut read = Vec::with_capacity(max.min(SYNC_BATCH));
        let next = if self.installed.is_empty() {
            Ok(None)
        } else {
            self.backend.scan(cursor, max.min(SYNC_BATCH), &mut read)
        };
        let no = self.sync_no;
        for (key, usage) in read {
            let Some(&id) = self.owner.get(&key) else {
                continue;
            };
            let Some(rec) = self.installed.get_mut(&id) else {
                continue;
            };
            if rec.key != key || rec.synced == no {
                continue;
            }
            rec.synced = no;
            let rec = *rec;
            if let Some(p) = self.sync.as_mut() {
                p.merged += 1;
            }
            self.settle(cx, id, rec, Some(usage));
        }
        let next = next.unwrap_or_else(|e| {
            self.failed(e);
            None
        });
        if let Some(p) = self.sync.as_mut() {
            p.cursor = next;
            p.scanned = next.is_none();
        }
    }

    /// Records an entry (installed now: merged as far as a pass under way goes).
    pub(crate) fn list(&mut self, id: u32, mut rec: Installed) {
        self.unlist(id);
        rec.synced = self.sync_no;
        if let Some(p) = self.sync.as_mut() {
            p.merged += 1;
        }
        self.installed.insert(id, rec);
    }

    /// Forgets an entry's record (the pass's count follows).
    pub(crate) fn unlist(&mut self, id: u32) -> Option<Installed> {
        let rec = self.installed.remove(&id)?;
        if let Some(p) = self.sync.as_mut()
            && rec.synced == self.sync_no
        {
            p.merged -= 1;
        }
        Some(rec)
    }
}
