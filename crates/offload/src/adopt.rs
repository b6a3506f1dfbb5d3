//! A fast path taken over from an earlier ovrd (its maps were pinned, `crate::pin`):
//! what its entries are to this one.
//!
//! - The generation goes on from the pinned one, never back to 1: an old entry must
//!   not become valid again by chance for other tables.
//! - If this ovrd starts from the tables the old one left (the state file, written on
//!   every change), the generation in force stays so for them: the adopted entries keep
//!   forwarding, nothing is flushed. A configuration new to the state, or an interface
//!   attached anew, starts a new generation as any change does: the adopted entries go
//!   stale and their flows come back to user space (and are offloaded again).
//! - This ovrd has no user-space flow for an adopted entry: the entry is a flow the fast
//!   path alone carries. The sweep merges its counters into the fast path's totals and
//!   removes it once idle for the flows' idle timeout (by the program's `last_seen`),
//!   as user space would age the flow; a flow offered again from user space takes the
//!   entry over (`Shared::claim`).

use crate::{FastPath, Key, Offload, Shared, SharedState, Usage};
use ovr_dataplane::context::Cx;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

impl Shared {
    /// The record of a fast path adopted with generation `generation` in force and these
    /// `entries`; `resumed`: the tables are those the entries were described from.
    pub fn adopting(generation: u32, entries: Vec<(Key, Usage)>, resumed: bool) -> Self {
        let s = Self::default();
        {
            let mut st = s.lock();
            st.generation = generation;
            st.resume = resumed;
            st.adopted = entries.into_iter().collect::<HashMap<_, _>>();
            s.adopted_len.store(st.adopted.len(), Ordering::Release);
        }
        if resumed {
            s.generation.store(generation, Ordering::Release);
        }
        s
    }

    /// Adopted entries not yet aged or taken over.
    pub fn adopted(&self) -> usize {
        self.adopted_len.load(Ordering::Acquire)
    }

    /// Flow entry `key` is installed by this ovrd from now on: no longer an adopted one.
    pub(crate) fn claim(&self, key: &Key) {
        if self.adopted() == 0 {
            return;
        }
        let mut s = self.lock();
        if s.adopted.remove(key).is_some() {
            self.adopted_len.store(s.adopted.len(), Ordering::Release);
        }
    }
}

/// At the first tables any owner sees after adopting entries for resumed tables: those
/// tables are the generation's, not a change (unless an interface was attached anew).
pub(crate) fn resume(s: &mut SharedState, epoch: u32) {
    if std::mem::take(&mut s.resume) && !s.changed && s.epoch.is_none() {
        s.epoch = Some(epoch);
    }
}

impl<O: Offload> FastPath<O> {
    /// Of the entries the sweep just read, merges the adopted ones' counters (once,
    /// whichever owner reads them first) and removes those idle for the idle timeout.
    pub(crate) fn age_adopted(&mut self, cx: &Cx, read: &[(Key, Usage)]) {
        let now = self.backend.clock_ns();
        let idle = cx.settings.idle_timeout_ns;
        let shared = self.shared.clone();
        let mut s = shared.lock();
        for (key, usage) in read {
            let Some(seen) = s.adopted.get_mut(key) else {
                continue;
            };
            if usage.packets >= seen.packets {
                self.counters.packets += usage.packets - seen.packets;
                self.counters.bytes += usage.bytes.saturating_sub(seen.bytes);
            }
            *seen = *usage;
            if now.saturating_sub(usage.last_seen) >= idle {
                s.adopted.remove(key);
                match self.backend.remove(key) {
                    Ok(()) => self.counters.removed += 1,
                    Err(e) => self.failed(e),
                }
            }
        }
        shared.adopted_len.store(s.adopted.len(), Ordering::Release);
    }
}
