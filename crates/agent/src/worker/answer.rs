//! The worker's side: answering requests without holding up forwarding.
//!
//! The worker forwards nothing while it answers, so no loop iteration does more than a
//! bounded piece of a request's work: a flow dump or delete walks the flow table
//! [`WALK_STEP`] slots (and at most [`FLOW_STEP`] flows recorded or removed) per
//! iteration, and merging a fast path's counters before a read goes [`SYNC_STEP`]
//! entries per iteration ([`Below`]). A request that needs more is kept as the
//! worker's job and goes on at its next iteration; the worker does not sleep meanwhile.
//! Answered in one piece, a dump of a table of 256K flows held the worker 15-70 ms
//! (bench/RESULTS.md), the time for its receive rings to overflow under churn.
//!
//! Requests are taken in order: the ones behind a job wait for it to end. A dump read
//! in steps sees the table as it is when each slot is read: flows that come or go
//! while it is read may be in it or not, as with any dump of a live table.

use super::{BUDGET, FlowDump, FlowFilter, FlowRecord, Request, Requests, wake};
use super::{TraceDump, TraceStepRecord, TracedPacketRecord};
use ovr_dataplane::capture::Ended;
use ovr_dataplane::counters::Snapshot;
use ovr_dataplane::{DropReason, Pipeline};
use ovr_graph::Trace;
use ovr_graph::trace::MAX_STEPS;
use ovr_tables::flow::{FlowAction, FlowEntry, FlowId, flags};
use std::sync::atomic::Ordering;
use std::time::Instant;
use tokio::sync::oneshot;

/// Flow table slots one loop iteration reads for a request at most (about 0.3 ms; a
/// table of 1M slots is read in 64 iterations).
pub const WALK_STEP: usize = 16_384;
/// Flows one loop iteration records (for a dump) or removes at most.
pub const FLOW_STEP: usize = 1_024;
/// Fast path entries one loop iteration merges at most.
pub const SYNC_STEP: usize = 1_024;

/// A fast path below the pipeline (`ovrd --offload`), which counts the packets it
/// carries itself: its counters are merged into the pipeline's before the counters or
/// flows are read, and the flows deleted are taken out of it after a delete.
pub trait Below {
    /// Starts merging everything it counted.
    fn sync_begin(&mut self, pipe: &mut Pipeline);
    /// Merges about `max` more entries; true once the merge begun is over.
    fn sync_step(&mut self, pipe: &mut Pipeline, max: usize) -> bool;
    /// Whether it carries flow `id` now (the dump's `offloaded`).
    fn carries(&self, pipe: &Pipeline, id: FlowId) -> bool;
}

/// No fast path.
impl Below for () {
    fn sync_begin(&mut self, _: &mut Pipeline) {}
    fn sync_step(&mut self, _: &mut Pipeline, _: usize) -> bool {
        true
    }
    fn carries(&self, _: &Pipeline, _: FlowId) -> bool {
        false
    }
}

/// A request answered over several loop iterations.
pub(super) struct Job {
    kind: Kind,
    phase: Phase,
}

enum Kind {
    Counters(oneshot::Sender<Snapshot>),
    Flows(FlowFilter, FlowDump, oneshot::Sender<FlowDump>),
    /// Flows removed so far.
    Delete(FlowFilter, usize, oneshot::Sender<usize>),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The fast path's counters are merged (`begun`: the merge was started).
    Sync {
        begun: bool,
    },
    /// The flow table is read from this slot on.
    Walk {
        next: usize,
    },
    Answer,
}

/// Answers what is waiting, for up to `BUDGET`, and ends captures whose time is up: call
/// once per loop iteration.
pub fn drain(requests: &mut Requests, pipe: &mut Pipeline) {
    drain_with(requests, pipe, &mut ());
}

/// Like [`drain`], with a fast path below the pipeline whose counters are merged before
/// a read and which follows a delete.
pub fn drain_with(requests: &mut Requests, pipe: &mut Pipeline, below: &mut impl Below) {
    if !pipe.taps.is_empty() {
        pipe.taps.expire(Instant::now());
    }
    let start = Instant::now();
    // One step of a job per iteration; answering what needs no step goes on for BUDGET.
    let mut stepped = false;
    loop {
        if let Some(job) = requests.job.take() {
            if stepped {
                requests.job = Some(job);
                break;
            }
            stepped = true;
            if !job.abandoned() {
                requests.job = job.step(pipe, below);
                if requests.job.is_some() {
                    break;
                }
            }
        }
        if start.elapsed() >= BUDGET {
            break;
        }
        let Ok(r) = requests.rx.try_recv() else {
            return;
        };
        if !r.abandoned() {
            requests.job = take(pipe, r);
        }
    }
    // More to do: the next iteration must not sleep.
    wake(&requests.wake);
}

/// Answers one request whole (for a thread that does nothing else).
pub fn serve(pipe: &mut Pipeline, request: Request) {
    let mut job = take(pipe, request);
    while let Some(j) = job {
        job = j.step(pipe, &mut ());
    }
}

/// Answers a request that takes no step at once; the others become a job.
fn take(pipe: &mut Pipeline, request: Request) -> Option<Job> {
    let job = |kind, phase| Some(Job { kind, phase });
    let sync = Phase::Sync { begun: false };
    match request {
        Request::Counters(taken, reply) => {
            // Reads from now on start a round of their own.
            taken.store(true, Ordering::Release);
            return job(Kind::Counters(reply), sync);
        }
        Request::Flows(filter, reply) => {
            let dump = FlowDump {
                flows: Vec::new(),
                matched: 0,
                active: 0,
            };
            return job(Kind::Flows(filter, dump, reply), sync);
        }
        Request::DeleteFlows(filter, reply) => {
            let walk = Phase::Walk {
                next: walk_from(&filter),
            };
            return job(Kind::Delete(filter, 0, reply), walk);
        }
        Request::TraceAdd(n, reply) => {
            let _ = reply.send(pipe.graph_mut().trace_mut().add(n));
        }
        Request::Trace(reply) => {
            let _ = reply.send(trace(pipe.graph().trace()));
        }
        Request::TraceClear(reply) => {
            pipe.graph_mut().trace_mut().clear();
            let _ = reply.send(());
        }
        Request::CaptureStart(c, reply) => {
            pipe.taps.expire(Instant::now());
            pipe.taps.add(c.tap);
            let _ = reply.send(());
        }
        Request::CaptureStop(id, reply) => {
            let _ = reply.send(pipe.taps.remove(id, Ended::Stopped));
        }
    }
    None
}

/// The first slot a walk for `f` reads: a flow id names its slot.
fn walk_from(f: &FlowFilter) -> usize {
    f.id.map_or(0, |id| id as usize)
}

/// The slot after the last one a walk for `f` reads.
fn walk_end(pipe: &Pipeline, f: &FlowFilter) -> usize {
    let slots = pipe.cx.flows.capacity();
    f.id.map_or(slots, |id| (id as usize + 1).min(slots))
}

impl Job {
    /// Whether whoever asked has gone.
    fn abandoned(&self) -> bool {
        match &self.kind {
            Kind::Counters(r) => r.is_closed(),
            Kind::Flows(_, _, r) => r.is_closed(),
            Kind::Delete(_, _, r) => r.is_closed(),
        }
    }

    /// Does one bounded piece of each phase it reaches (a phase that ends lets the next
    /// begin in the same call: a merge step and a walk step at most); the job, if it
    /// is not over.
    fn step(mut self, pipe: &mut Pipeline, below: &mut impl Below) -> Option<Job> {
        for _ in 0..2 {
            let before = self.phase;
            self.phase = self.piece(pipe, below);
            let same = core::mem::discriminant(&before) == core::mem::discriminant(&self.phase);
            if same || self.phase == Phase::Answer {
                break;
            }
        }
        if self.phase != Phase::Answer {
            return Some(self);
        }
        match self.kind {
            Kind::Counters(reply) => {
                let _ = reply.send(pipe.snapshot(|_| None));
            }
            Kind::Flows(_, mut dump, reply) => {
                dump.active = pipe.cx.flows.len();
                let _ = reply.send(dump);
            }
            Kind::Delete(_, removed, reply) => {
                let _ = reply.send(removed);
            }
        }
        None
    }

    /// One bounded piece of the current phase; the phase to go on with.
    fn piece(&mut self, pipe: &mut Pipeline, below: &mut impl Below) -> Phase {
        match self.phase {
            Phase::Sync { begun } => {
                if !begun {
                    below.sync_begin(pipe);
                }
                if !below.sync_step(pipe, SYNC_STEP) {
                    return Phase::Sync { begun: true };
                }
                match &self.kind {
                    Kind::Flows(f, ..) => Phase::Walk { next: walk_from(f) },
                    _ => Phase::Answer,
                }
            }
            Phase::Walk { next } => {
                let (next, end) = self.walk(pipe, below, next);
                match (&self.kind, next >= end) {
                    (_, false) => Phase::Walk { next },
                    // Deleted flows are taken out of the fast path (their counters
                    // merged into the interfaces' first).
                    (Kind::Delete(..), true) => Phase::Sync { begun: false },
                    (_, true) => Phase::Answer,
                }
            }
            Phase::Answer => Phase::Answer,
        }
    }

    /// Reads up to [`WALK_STEP`] slots from `next` (stopping after [`FLOW_STEP`] flows
    /// recorded or removed); returns where to go on, and where the walk ends.
    fn walk(&mut self, pipe: &mut Pipeline, below: &impl Below, next: usize) -> (usize, usize) {
        let f = match &self.kind {
            Kind::Flows(f, ..) | Kind::Delete(f, ..) => *f,
            Kind::Counters(_) => return (0, 0),
        };
        let end = walk_end(pipe, &f);
        let stop = end.min(next.saturating_add(WALK_STEP));
        let (mut slot, mut done) = (next, 0);
        while slot < stop && done < FLOW_STEP {
            let id = FlowId(slot as u32);
            slot += 1;
            let Some(e) = pipe.cx.flows.get(id) else {
                continue;
            };
            if !matches(&f, id, &e) {
                continue;
            }
            match &mut self.kind {
                Kind::Flows(_, dump, _) => {
                    dump.matched += 1;
                    if dump.flows.len() < f.limit {
                        let offloaded = below.carries(pipe, id);
                        dump.flows.push(record(pipe, id, &e, offloaded));
                        done += 1;
                    }
                }
                Kind::Delete(_, removed, _) => {
                    *removed += pipe.cx.flows.remove(id);
                    done += 1;
                }
                Kind::Counters(_) => {}
            }
        }
        (slot, end)
    }
}

fn matches(f: &FlowFilter, id: FlowId, e: &FlowEntry) -> bool {
    let k = &e.key;
    f.id.is_none_or(|i| i == id.0)
        && f.vrf.is_none_or(|v| v == k.vrf)
        && f.addr.is_none_or(|a| a == k.src_ip() || a == k.dst_ip())
        && f.port.is_none_or(|p| p == k.src_port || p == k.dst_port)
}

fn record(pipe: &Pipeline, id: FlowId, e: &FlowEntry, offloaded: bool) -> FlowRecord {
    let now = pipe.cx.now;
    let ms = |ns: u64| now.saturating_sub(ns) / 1_000_000;
    let k = &e.key;
    let (action, nexthop, drop_reason) = match e.action {
        Some(FlowAction::Forward { next_hop }) => ("forward", Some(next_hop.0), None),
        Some(FlowAction::Drop { reason }) => ("drop", None, Some(DropReason(reason).name())),
        None => ("pending", None, None),
    };
    FlowRecord {
        id: id.0,
        vrf: k.vrf,
        network: None,
        src: k.src_ip(),
        dst: k.dst_ip(),
        protocol: k.protocol,
        src_port: k.src_port,
        dst_port: k.dst_port,
        bridged: k.bridged,
        action,
        nexthop,
        nexthop_name: None,
        drop_reason,
        reverse: e.reverse.map(|r| r.0),
        denied: e.flags & flags::DENIED != 0,
        offloaded,
        packets: e.packets,
        bytes: e.bytes,
        age_ms: ms(e.created),
        idle_ms: ms(e.last_seen),
    }
}

fn trace(t: &Trace) -> TraceDump {
    let packets = t
        .by_packet()
        .map(|(p, steps)| {
            let steps: Vec<TraceStepRecord> = steps
                .into_iter()
                .map(|s| TraceStepRecord {
                    node: s.node,
                    detail: s.detail.clone(),
                    next: s.next,
                })
                .collect();
            // A step with no next is where a copy left the graph: sent or dropped.
            let ends: Vec<&str> = steps
                .iter()
                .filter(|s| s.next.is_none())
                .map(|s| s.detail.as_deref().unwrap_or(s.node))
                .collect();
            TracedPacketRecord {
                id: p.packet,
                rx_interface_id: p.origin,
                rx_interface: None,
                fate: if ends.is_empty() {
                    "in flight".into()
                } else {
                    ends.join("; ")
                },
                steps,
            }
        })
        .collect();
    TraceDump {
        pending: t.pending(),
        packets,
        full: t.steps().len() >= MAX_STEPS,
    }
}
