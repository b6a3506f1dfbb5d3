//! ovr's offload: a fast path for established flows below the user-space pipeline.
//!
//! The user-space pipeline stays the full implementation. When it forwards a packet of
//! an established flow whose treatment the fast path can reproduce exactly, the flow is
//! described ([`describe()`]: match key and action, learnt from the packet as it left)
//! and installed in the backend; the flow's later packets are forwarded there without
//! waking ovrd. [`FastPath`] owns what is offloaded (one place, as DESIGN.md asks):
//!
//! - a table change (a new epoch) has the owner take the decision of each flow it
//!   offloaded again before it forwards with the new tables (`recheck`): entries whose
//!   treatment is unchanged (the same next hop, or one with the same content) stay,
//!   the others are removed and their flows' next packets go to user space, which
//!   offloads them again. An interface attached, detached or changed (or more entries
//!   than a re-check should take) invalidates every entry at once instead (a
//!   generation number the backend checks per packet);
//! - a flow removed in user space (aged, deleted through the API, replaced) has its
//!   entry removed at the next sweep, and the sweep merges the backend's counters into
//!   the flow (packets, bytes, last seen, so that an active flow does not age) and into
//!   the interfaces' counters.
//!
//! The backend is a trait ([`Offload`]); [`bpf::Bpf`] is the kernel's (bpf/fast_path.c,
//! at XDP or TC).
//!
//! With several forwarding workers there is one backend (one program, one set of maps)
//! and one [`FastPath`] per worker, each over a handle on that backend and on one
//! [`Shared`] record. A worker offers only the flows in its own flow table, and a flow
//! belongs to exactly one worker: the one its symmetric hash (`ovr_wire::steer`, over
//! the innermost addresses, protocol and ports) falls to. A backend key holds that
//! same inner 5-tuple, so two workers never install the same key, and each owner
//! removes, merges and sweeps only its own entries. What must be one for all is in
//! [`Shared`]: the generation (whichever worker sees a table change or an interface
//! come or go first starts the next one, for every worker), the loss already counted
//! per interface, and the egresses left to user space.
#![forbid(unsafe_code)]

mod adopt;
pub mod bpf;
pub mod describe;
pub mod layout;
pub mod pin;
mod recheck;
mod redirects;
mod sync;

pub use describe::{Refused, describe};
pub use layout::{Action, Key, Usage};
pub use recheck::RECHECK_MAX;
use recheck::{Surroundings, Via};

use ovr_dataplane::context::Cx;
pub use ovr_dataplane::context::FastPathCounters;
use ovr_dataplane::meta::{Meta, flags as mf};
use ovr_tables::flow::{FlowAction, FlowId, FlowKey};
use ovr_tables::ids::InterfaceId;
use ovr_tables::state::ForwardingState;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    #[error("offload: {op}: {message}")]
    Bpf { op: &'static str, message: String },
}

/// A fast path that carries described flows (hardware-neutral; XDP is the first).
pub trait Offload {
    /// The host interface index of ovr's interface `id`, if the fast path is on it.
    fn ifindex(&self, id: InterfaceId) -> Option<u32>;
    /// Whether interfaces were attached or detached since the last call (by any handle
    /// on the backend: one caller learns of each change).
    fn take_changed(&mut self) -> bool;
    /// Re-reads what the fast path must know of each interface (kind, MAC, addresses,
    /// admin state) from the tables.
    fn refresh(&mut self, st: &ForwardingState) -> Result<(), OffloadError>;
    /// Only entries installed with generation `generation` are used from now on.
    fn set_generation(&mut self, generation: u32) -> Result<(), OffloadError>;
    /// Installs (or replaces) an entry, with zero counters.
    fn install(&mut self, key: &Key, action: &Action, generation: u32) -> Result<(), OffloadError>;
    fn remove(&mut self, key: &Key) -> Result<(), OffloadError>;
    /// The entry's counters, or None if it is not installed.
    fn usage(&self, key: &Key) -> Result<Option<Usage>, OffloadError>;
    /// Now on the clock of [`Usage::last_seen`].
    fn clock_ns(&self) -> u64;
    /// Reads about `max` entries (every owner's) with their counters into `out`, from
    /// `cursor` on (None: the start); returns where to go on (None: the table was read
    /// to its end). Many entries per call: one call per entry costs more than the read.
    fn scan(
        &self,
        cursor: Option<u32>,
        max: usize,
        out: &mut Vec<(Key, Usage)>,
    ) -> Result<Option<u32>, OffloadError>;
    /// Per interface the fast path is on: frames the host dropped on receipt so far.
    /// A redirect the egress cannot take (a veth whose peer runs no NAPI) is dropped
    /// and counted there, on the receiving interface.
    fn rx_dropped(&self) -> Vec<(InterfaceId, u64)>;
}

/// What every owner of one backend shares (clones share it): the generation in force
/// and the tables' epoch it was started for, the receive drops already counted as lost
/// redirects, and the egresses left to user space for a while.
#[derive(Clone, Default)]
pub struct Shared {
    /// The generation in force, read without the lock on every loop iteration.
    generation: Arc<AtomicU32>,
    state: Arc<Mutex<SharedState>>,
    /// Entries adopted from an earlier ovrd still tracked (`adopt`), read without the lock.
    adopted_len: Arc<AtomicUsize>,
}

#[derive(Default)]
struct SharedState {
    /// The newest tables' epoch a generation was started for.
    epoch: Option<u32>,
    generation: u32,
    /// An interface change taken by an owner whose tables were older than `epoch`:
    /// the next owner with current tables starts the generation.
    changed: bool,
    /// Bumped whenever the attached interfaces change (their drop counts start again).
    interfaces: u64,
    /// Per interface: receive drops up to which the loss was counted (by one owner).
    counted: HashMap<u32, u64>,
    /// Egress interfaces that dropped redirected frames, until when they are avoided.
    bad_egress: HashMap<u32, u64>,
    /// The generation was adopted for the tables this ovrd starts with (`adopt`).
    resume: bool,
    /// Entries adopted from an earlier ovrd, with their counters already merged.
    adopted: HashMap<Key, Usage>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, SharedState> {
        // A panic while holding the lock would be a bug; the record is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Whether epoch `a` is later than `b` (epochs wrap around).
fn later(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// One offloaded flow.
#[derive(Debug, Clone, Copy)]
struct Installed {
    key: Key,
    flow: FlowKey,
    rx_if: u32,
    tx_if: u32,
    strip: u64,
    growth: i64,
    /// The backend's counters already merged.
    seen: Usage,
    /// The generation it was installed in (only the current one is used).
    generation: u32,
    /// The next hop it was described from (`recheck`): its id and content.
    nh: ovr_tables::ids::NextHopId,
    via: Via,
    /// The last merge of everything (`sync`) that counted it.
    synced: u32,
    /// The outer source its entry takes (`Action::sender`).
    sender: [u8; 4],
}

/// The outer IPv4 source an entry for flow `e` takes: the host that sends it on, for a
/// flow set up out of a tunnel (`flow_flags::SENT`); zero (any) otherwise.
fn sender(e: &ovr_tables::flow::FlowEntry) -> [u8; 4] {
    match ovr_dataplane::meta::vtep(&e.sender) {
        core::net::IpAddr::V4(a) if e.flags & ovr_tables::flow::flags::SENT != 0 => a.octets(),
        _ => [0; 4],
    }
}

/// How often receive drops and other owners' avoided egresses are looked at.
const CHECK_EVERY_NS: u64 = 100_000_000;
/// Most entries one sweep step reads; the worker forwards nothing meanwhile, so the
/// sweep goes in small paced steps (see [`sweep_pass_ns`]), not in bursts that would
/// stall this worker's packets and, on a small host, whatever shares its core...
const SWEEP_STEP_MAX: usize = 1024;
/// ...and fewest: entries are read in batches (one bpf(2) call per entry costs more
/// than the entry), so time is saved up for a few.
const SWEEP_STEP_MIN: usize = 64;
/// How often a worker whose fast path holds entries wakes while user space is idle:
/// fast-path traffic does not wake it, and the sweep must keep its pace (at most
/// [`SWEEP_STEP_MAX`] entries a wakeup: 100 a second cover 1M entries well within a pass).
const SWEEP_WAKE_MS: i32 = 10;
/// How far back redirects merged count as the cause of receive drops seen now: two
/// checks, as the kernel may count a drop after the program counted the redirect.
const SUSPECT_NS: u64 = 2 * CHECK_EVERY_NS;
/// How long an egress that dropped redirected frames is left to user space.
const EGRESS_BACKOFF_NS: u64 = 30_000_000_000;

/// The owner of everything one worker offloaded: what to install, when to invalidate,
/// sweeping.
pub struct FastPath<O: Offload> {
    backend: O,
    shared: Shared,
    /// The generation this owner installs with; 0 while its tables are older than the
    /// generation's (it installs nothing then).
    generation: u32,
    epoch: Option<u32>,
    /// The tables' epoch this owner's entries in force were last decided for (by a
    /// re-check or a new generation): a re-check looks at what changed since.
    decided: Option<u32>,
    /// `Shared`'s interface changes seen.
    interfaces: u64,
    /// By flow id: the round in which the flow was last offered (0: never). A round
    /// starts with every generation and every table change: a flow refused for
    /// tables that changed since is offered again.
    tried: Vec<u32>,
    round: u32,
    /// What the entries were described from beyond their next hops, for the tables
    /// of the last generation or re-check (`recheck`).
    surroundings: Option<Surroundings>,
    installed: HashMap<u32, Installed>,
    /// Which flow an installed key belongs to.
    owner: HashMap<Key, u32>,
    /// Where the sweep reads the backend's table next (None: from the start).
    cursor: Option<u32>,
    /// Entries read in this pass, and in the whole table at the last complete pass.
    pass_read: usize,
    table_len: usize,
    /// When this pass and the last complete one began (backend's clock): an entry
    /// whose last packet came before the last pass began was read after it, and
    /// merged, by that pass.
    pass_began: u64,
    last_pass_began: u64,
    /// Time up to which the sweep has read its share of entries.
    swept_at: Option<u64>,
    checked_at: Option<u64>,
    failing: bool,
    /// Receive drops per interface at the last check.
    rx_dropped: HashMap<u32, u64>,
    /// Per receiving interface, the egresses its entries redirected to and when that
    /// was last merged (by a check or by the sweep in between): those of the last
    /// [`SUSPECT_NS`] are suspects when the interface's drops grow.
    redirected: HashMap<u32, Vec<(u32, u64)>>,
    /// Egress interfaces that dropped redirected frames, until when they are avoided
    /// (a copy of `Shared`'s, taken at each check).
    bad_egress: HashMap<u32, u64>,
    /// The merge of everything under way for a read through the API (`sync`), and
    /// its number (an entry merged by it, or installed since it began, has it).
    sync: Option<sync::SyncPass>,
    sync_no: u32,
    pub counters: FastPathCounters,
}

impl<O: Offload> FastPath<O> {
    /// The only owner of `backend`.
    pub fn new(backend: O) -> Self {
        Self::sharing(backend, Shared::default())
    }

    /// One of several owners of a backend (one per worker, each with a handle on the
    /// same backend and a clone of the same `shared`).
    pub fn sharing(backend: O, shared: Shared) -> Self {
        Self {
            backend,
            shared,
            generation: 0,
            epoch: None,
            decided: None,
            interfaces: 0,
            tried: Vec::new(),
            round: 0,
            surroundings: None,
            installed: HashMap::new(),
            owner: HashMap::new(),
            cursor: None,
            pass_read: 0,
            table_len: 0,
            pass_began: 0,
            last_pass_began: 0,
            swept_at: None,
            checked_at: None,
            failing: false,
            rx_dropped: HashMap::new(),
            redirected: HashMap::new(),
            bad_egress: HashMap::new(),
            sync: None,
            sync_no: 0,
            counters: FastPathCounters::default(),
        }
    }

    pub fn backend(&self) -> &O {
        &self.backend
    }

    /// Its counters with the flows offloaded now (`counters.flows` is filled only here).
    pub fn totals(&self) -> FastPathCounters {
        FastPathCounters {
            flows: self.installed.len() as u64,
            ..self.counters
        }
    }

    /// How long the worker may sleep without traffic at most, if the fast path needs
    /// it sooner than whatever else wakes the worker: while it holds entries.
    pub fn wake_within_ms(&self) -> Option<i32> {
        (!self.installed.is_empty() || self.shared.adopted() > 0).then_some(SWEEP_WAKE_MS)
    }

    /// Flows offloaded now (in any generation).
    pub fn len(&self) -> usize {
        self.installed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.installed.is_empty()
    }

    fn failed(&mut self, e: OffloadError) {
        self.counters.errors += 1;
        if !self.failing {
            self.failing = true;
            tracing::warn!("{e}");
        }
    }

    /// Follows a change of the tables or of the interfaces. A table change that leaves
    /// what entries are described from beyond their next hops as it was (`recheck`) has
    /// this owner's flows decided again, keeping the entries whose treatment is the
    /// same; anything else starts a new generation (whichever owner sees it first
    /// starts it for all), and the generation in force is taken up. Call before
    /// forwarding with `st`, every loop iteration.
    pub fn begin(&mut self, st: &ForwardingState, cx: &mut Cx) {
        let changed = self.backend.take_changed();
        let epoch = st.epoch();
        let in_force = self.shared.generation.load(Ordering::Acquire);
        if !changed && self.epoch == Some(epoch) && self.generation == in_force {
            return;
        }
        self.round = self.round.wrapping_add(1).max(1);
        let moved = self.epoch != Some(epoch);
        let since = self.decided;
        let around = moved.then(|| Surroundings::of(st));
        if !changed
            && self.generation != 0
            && self.generation == in_force
            && self.installed.len() <= RECHECK_MAX
            && around.is_some()
            && self.surroundings == around
        {
            let shared = self.shared.clone();
            let mut s = shared.lock();
            if !s.changed && s.generation == self.generation {
                if s.epoch.is_none_or(|e| later(epoch, e)) {
                    s.epoch = Some(epoch);
                }
                drop(s);
                self.epoch = Some(epoch);
                self.recheck(st, cx, since);
                self.decided = Some(epoch);
                return;
            }
        }
        self.epoch = Some(epoch);
        let mut started = false;
        let shared = self.shared.clone();
        let mut s = shared.lock();
        s.changed |= changed;
        adopt::resume(&mut s, epoch);
        // Another worker may already forward with newer tables: then this one waits
        // for them (its next loop iteration) rather than describe interfaces or flows
        // from older ones under the new generation.
        let behind = s.epoch.is_some_and(|e| later(e, epoch));
        let newer = s.epoch.is_none_or(|e| later(epoch, e));
        if !behind && (newer || s.changed) {
            if s.changed {
                s.changed = false;
                // New sockets start their drop counts again.
                s.interfaces += 1;
                s.counted.clear();
            }
            s.epoch = Some(epoch);
            s.generation = s.generation.wrapping_add(1).max(1);
            started = true;
            self.counters.invalidations += 1;
            let r = self
                .backend
                .refresh(st)
                .and_then(|()| self.backend.set_generation(s.generation));
            if let Err(e) = r {
                self.failed(e);
            }
            self.shared
                .generation
                .store(s.generation, Ordering::Release);
        }
        self.generation = if behind { 0 } else { s.generation };
        if s.interfaces != self.interfaces {
            self.interfaces = s.interfaces;
            self.rx_dropped.clear();
        }
        drop(s);
        if self.generation != 0 {
            // Entries still in force (another owner started no generation) are checked
            // against these tables all the same.
            if !started && moved {
                self.recheck(st, cx, since);
            }
            self.decided = Some(epoch);
            self.surroundings = Some(around.unwrap_or_else(|| Surroundings::of(st)));
        }
    }

    /// Offers the flow of a packet the pipeline forwarded (`frame`: as it left).
    pub fn observe(&mut self, st: &ForwardingState, cx: &mut Cx, meta: &Meta, frame: &[u8]) {
        if self.generation == 0
            || !meta.has(mf::FLOW_HIT | mf::FLOW_CREATED)
            || meta.has(mf::REPLICA)
        {
            return;
        }
        let Some(id) = cx.flows.lookup(&meta.key) else {
            return;
        };
        let sender = |cx: &Cx| cx.flows.get(id).map_or([0; 4], |e| sender(&e));
        let i = id.0 as usize;
        if self.tried.len() <= i {
            self.tried.resize(i + 1, 0);
        }
        // Its entry takes another host's packets than the flow's latest: the session
        // moved (the flow node followed it), so the flow is described again now, offered
        // this round or not. Only a packet out of a tunnel can say so.
        let moved = meta.has(mf::SENDER)
            && self
                .installed
                .get(&id.0)
                .is_some_and(|r| r.sender != sender(cx));
        if self.tried[i] == self.round && !moved {
            return;
        }
        let sender = sender(cx);
        self.tried[i] = self.round;
        // What is remembered per flow id is forgotten when the flow goes (the id is
        // reused by a new flow): the flow table reports the ids it removes from now on.
        cx.flows.log_removals();
        // Only a flow whose decision is current and is the one this packet followed.
        let current = cx.flows.get(id).is_some_and(|e| {
            e.epoch == st.epoch()
                && e.action
                    == Some(FlowAction::Forward {
                        next_hop: ovr_tables::ids::NextHopId(meta.next_hop),
                    })
        });
        let avoided = self
            .bad_egress
            .get(&meta.tx_if)
            .is_some_and(|&until| cx.now < until);
        // A policed interface's frames stay in user space, where its policer is.
        let policed = st
            .interface(ovr_tables::ids::InterfaceId(meta.rx_if))
            .is_some_and(|i| i.police.is_some());
        if !current || avoided || policed {
            self.counters.refused += 1;
            return;
        }
        let backend = &self.backend;
        match describe(st, meta, frame, |iface| backend.ifindex(iface)) {
            Ok((key, action)) => {
                let nh = ovr_tables::ids::NextHopId(meta.next_hop);
                let via = (nh, Via::of(st, nh));
                self.install(cx, id, meta, key, Action { sender, ..action }, via)
            }
            Err(_) => self.counters.refused += 1,
        }
        // The flow node left the reverse's way back to be taken again (towards the new
        // sender): its entry goes, so that its next packet comes to user space.
        if moved
            && let Some(rev) = cx.flows.get(id).and_then(|e| e.reverse)
            && let Some(rec) = self.installed.get(&rev.0).copied()
        {
            self.retire(cx, rev.0, rec, None);
        }
    }

    fn install(
        &mut self,
        cx: &mut Cx,
        id: FlowId,
        meta: &Meta,
        key: Key,
        action: Action,
        (nh, via): (ovr_tables::ids::NextHopId, Via),
    ) {
        // Counters of the entry this one replaces are merged first.
        if let Some(prev) = self.installed.get(&id.0).copied() {
            self.merge(cx, id.0, prev);
            if prev.key != key {
                self.drop_entry(id.0, prev.key);
            }
        }
        if let Some(other) = self.owner.insert(key, id.0)
            && other != id.0
            && let Some(o) = self.unlist(other)
        {
            self.merge(cx, other, o);
        }
        self.shared.claim(&key);
        if let Err(e) = self.backend.install(&key, &action, self.generation) {
            self.owner.remove(&key);
            self.unlist(id.0);
            return self.failed(e);
        }
        self.counters.installed += 1;
        self.list(
            id.0,
            Installed {
                key,
                flow: meta.key,
                rx_if: meta.rx_if,
                tx_if: meta.tx_if,
                strip: u64::from(action.strip),
                growth: action.growth(),
                seen: Usage::default(),
                generation: self.generation,
                nh,
                via,
                synced: 0,
                sender: action.sender,
            },
        );
    }

    /// Removes the backend's entry `key` if flow `id` still owns it.
    fn drop_entry(&mut self, id: u32, key: Key) {
        if self.owner.get(&key) == Some(&id) {
            self.owner.remove(&key);
            if let Err(e) = self.backend.remove(&key) {
                self.failed(e);
            }
        }
    }

    /// Adds what the backend counted since the last merge to the flow and interfaces.
    fn merge(&mut self, cx: &mut Cx, id: u32, rec: Installed) {
        match self.backend.usage(&rec.key) {
            Ok(Some(u)) => self.add_usage(cx, id, rec, u),
            Ok(None) => {}
            Err(e) => self.failed(e),
        }
    }

    /// [`Self::merge`] with the entry's counters `now` already read.
    fn add_usage(&mut self, cx: &mut Cx, id: u32, rec: Installed, now: Usage) {
        // Counters restart at zero when an entry is installed again.
        let base = if now.packets < rec.seen.packets {
            Usage::default()
        } else {
            rec.seen
        };
        let (dp, db) = (
            now.packets - base.packets,
            now.bytes.saturating_sub(base.bytes),
        );
        if let Some(r) = self.installed.get_mut(&id) {
            r.seen = now;
        }
        if dp == 0 {
            return;
        }
        let to = self.redirected.entry(rec.rx_if).or_default();
        match to.iter_mut().find(|(e, _)| *e == rec.tx_if) {
            Some((_, at)) => *at = cx.now,
            None => to.push((rec.tx_if, cx.now)),
        }
        self.counters.packets += dp;
        self.counters.bytes += db;
        let t = cx.now;
        // Not to a new flow that took the id of the entry's.
        if let Some(mut e) = cx.flows.get_mut(FlowId(id))
            && e.key == rec.flow
        {
            e.packets += dp;
            e.bytes += db.saturating_sub(dp * rec.strip);
            e.last_seen = e.last_seen.max(t);
        }
        let rx = cx.interface_counters(rec.rx_if);
        rx.rx_packets += dp;
        rx.rx_bytes += db;
        let tx = cx.interface_counters(rec.tx_if);
        tx.tx_packets += dp;
        tx.tx_bytes = tx
            .tx_bytes
            .saturating_add_signed(db as i64 + dp as i64 * rec.growth);
    }

    /// Removes entries (after their counters were merged) and lets their flows be
    /// offered again.
    fn forget(&mut self, gone: Vec<(u32, Key)>) {
        for (i, key) in gone {
            self.unlist(i);
            self.drop_entry(i, key);
            self.untry(i);
        }
    }

    /// Flow id `id` is offered again at its next packet.
    fn untry(&mut self, id: u32) {
        if let Some(t) = self.tried.get_mut(id as usize) {
            *t = 0;
        }
    }

    /// Checks one installed flow: gone or changed in user space → entry removed;
    /// otherwise its counters are merged.
    fn check(&mut self, cx: &mut Cx, id: u32) {
        if let Some(rec) = self.installed.get(&id).copied() {
            self.settle(cx, id, rec, None);
        }
    }

    /// Merges an entry's counters (`read` already, or read now) while its flow lives in
    /// user space; removes the entry once the flow is gone.
    fn settle(&mut self, cx: &mut Cx, id: u32, rec: Installed, read: Option<Usage>) {
        match (alive(cx, id, &rec), read) {
            (false, read) => self.retire(cx, id, rec, read),
            (true, Some(u)) => self.add_usage(cx, id, rec, u),
            (true, None) => self.merge(cx, id, rec),
        }
    }

    /// Removes the entry of a flow gone in user space, after what it carried since the
    /// last merge (`read` already, or read now) is counted (the interfaces' and the fast
    /// path's totals keep it); a new flow on its id is offered.
    fn retire(&mut self, cx: &mut Cx, id: u32, rec: Installed, read: Option<Usage>) {
        match read {
            Some(u) => self.add_usage(cx, id, rec, u),
            None => self.merge(cx, id, rec),
        }
        self.unlist(id);
        self.drop_entry(id, rec.key);
        self.untry(id);
        self.counters.removed += 1;
    }

    /// Looks at receive drops and avoided egresses (every [`CHECK_EVERY_NS`]) and
    /// checks the share of installed entries that the time since the last call earned.
    pub fn maintain(&mut self, cx: &mut Cx) {
        self.follow_removals(cx);
        if self
            .checked_at
            .is_none_or(|t| cx.now.saturating_sub(t) >= CHECK_EVERY_NS)
        {
            self.checked_at = Some(cx.now);
            self.check_redirects(cx);
            self.follow_bad_egress(cx);
        }
        self.sweep_step(cx);
        cx.fast_path = self.totals();
    }

    /// Removes the entries of flows the flow table removed (aged, deleted, replaced):
    /// the sweep looks only at entries with new packets. Whatever took a removed flow's
    /// id since is offered afresh, installed or refused before under that id or not.
    fn follow_removals(&mut self, cx: &mut Cx) {
        for id in cx.flows.take_removed() {
            match self.installed.get(&id).copied() {
                Some(rec) if alive(cx, id, &rec) => {}
                Some(rec) => self.retire(cx, id, rec, None),
                None => self.untry(id),
            }
        }
    }

    /// Reads the backend's table at a pace that goes through it once per
    /// [`sweep_pass_ns`], and checks this owner's entries among those read (the others'
    /// are skipped: the table is one for all owners, and reading it in batches costs
    /// less than reading only one's own entry by entry).
    fn sweep_step(&mut self, cx: &mut Cx) {
        let now = cx.now;
        let adopted = self.shared.adopted();
        if self.installed.is_empty() && adopted == 0 {
            self.swept_at = Some(now);
            return;
        }
        let entries = self.table_len.max(self.installed.len() + adopted) as u128;
        let pass = u128::from(sweep_pass_ns(cx.settings.idle_timeout_ns));
        // Time owed is capped at one pass (after a long sleep, one pass, not several).
        let last = self
            .swept_at
            .unwrap_or(now)
            .max(now.saturating_sub(pass as u64));
        self.swept_at = Some(last);
        let owed = u128::from(now.saturating_sub(last)) * entries / pass;
        let n = (owed as usize).min(SWEEP_STEP_MAX);
        if n == 0 || n < SWEEP_STEP_MIN.min(entries as usize) {
            return;
        }
        if self.cursor.is_none() {
            self.pass_began = self.backend.clock_ns();
        }
        let mut read = Vec::with_capacity(n);
        let next = match self.backend.scan(self.cursor, n, &mut read) {
            Ok(next) => next,
            Err(e) => {
                self.cursor = None;
                return self.failed(e);
            }
        };
        // Time not yet paid for in entries read is kept for the next step.
        self.swept_at = Some(last + (read.len().max(1) as u128 * pass / entries) as u64);
        self.pass_read += read.len();
        let merged_before = self.last_pass_began;
        if next.is_none() {
            self.table_len = std::mem::take(&mut self.pass_read);
            self.last_pass_began = self.pass_began;
        }
        self.cursor = next;
        if adopted > 0 {
            self.age_adopted(cx, &read);
        }
        for (key, usage) in read {
            // Most entries of a large table carry nothing new: skipped before ovr's
            // records of them are looked up (those lookups are the sweep's main cost).
            if usage.last_seen < merged_before {
                continue;
            }
            let Some(&id) = self.owner.get(&key) else {
                continue;
            };
            if let Some(rec) = self.installed.get(&id).copied() {
                self.settle(cx, id, rec, Some(usage));
            }
        }
    }
}

/// Whether the user-space flow an entry was installed for is still there.
fn alive(cx: &Cx, id: u32, rec: &Installed) -> bool {
    cx.flows.get(FlowId(id)).is_some_and(|e| e.key == rec.flow)
}

/// How long one pass of the sweep over every installed entry takes: a quarter of the
/// flows' idle timeout, so that a flow the fast path alone carries has its counters
/// merged (and its user-space flow kept alive) well before it could age; at most 15 s
/// so that counters logged stay recent, at least 100 ms.
pub fn sweep_pass_ns(idle_timeout_ns: u64) -> u64 {
    (idle_timeout_ns / 4).clamp(100_000_000, 15_000_000_000)
}

#[cfg(test)]
mod tests;
