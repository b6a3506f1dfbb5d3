//! Questions for the forwarding workers, whose `Pipeline`s own the counters and the flow
//! tables (each worker its share of the flows). Each worker drains its channel once per
//! loop iteration (`drain`: one `try_recv` when there is nothing, no lock) and answers
//! on a one-shot channel; the API asks every worker, waits for the answers with a
//! timeout and merges them.
//!
//! Flow ids are per worker; the API shows `local id × workers + worker`, which is the
//! worker's own id when there is one worker.

use crate::error::ApiError;
use core::net::IpAddr;
use ovr_dataplane::capture::{Ended, Tap};
use ovr_dataplane::counters::Snapshot;
use ovr_dataplane::{DropReason, Pipeline};
use ovr_graph::Trace;
use ovr_graph::trace::MAX_STEPS;
use ovr_tables::flow::{FlowAction, FlowId, flags};
use serde::Serialize;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use utoipa::ToSchema;

/// Requests answered per loop iteration at most: the worker's own work comes first.
const PER_ITERATION: usize = 4;

/// How long the API waits for the worker (it looks at the channel at least every
/// 100 ms when idle).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Which flows (all conditions must hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowFilter {
    pub vrf: Option<u32>,
    /// Source or destination address.
    pub addr: Option<IpAddr>,
    /// Source or destination port.
    pub port: Option<u16>,
    pub id: Option<u32>,
    /// Most flows returned (a dump of a million flows would stall forwarding).
    pub limit: usize,
}

/// One direction of a flow and its counters.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FlowRecord {
    pub id: u32,
    pub vrf: u32,
    /// The network's name (filled in by the API).
    pub network: Option<String>,
    #[schema(value_type = String)]
    pub src: IpAddr,
    #[schema(value_type = String)]
    pub dst: IpAddr,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub bridged: bool,
    /// "forward", "drop" or "pending" (no decision cached yet).
    pub action: &'static str,
    pub nexthop: Option<u32>,
    /// The next hop's name (filled in by the API).
    pub nexthop_name: Option<String>,
    pub drop_reason: Option<&'static str>,
    pub reverse: Option<u32>,
    pub denied: bool,
    /// A fast path below the pipeline carries it now (`ovrd --offload`): its packets
    /// are counted here as the fast path reports them.
    pub offloaded: bool,
    pub packets: u64,
    pub bytes: u64,
    pub age_ms: u64,
    pub idle_ms: u64,
}

/// Flows matching a filter: up to its limit, and how many matched in all.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct FlowDump {
    pub flows: Vec<FlowRecord>,
    pub matched: usize,
    pub active: usize,
}

/// One step of a traced packet: a node, what it decided, where the packet went next.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TraceStepRecord {
    pub node: &'static str,
    /// What the node decided (VRF, lookup result, next hop, flow hit or miss, encap,
    /// drop reason).
    pub detail: Option<String>,
    /// The node the packet went to next; null where it left the graph.
    pub next: Option<&'static str>,
}

/// One traced packet.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TracedPacketRecord {
    /// 1, 2, ... in the order the packets arrived.
    pub id: u32,
    pub rx_interface_id: u32,
    /// The receiving interface's name (filled in by the API).
    pub rx_interface: Option<String>,
    /// The nodes in order (a flooded packet's copies follow the original).
    pub steps: Vec<TraceStepRecord>,
    /// Where it ended: "sent on IF, N bytes" or "dropped: REASON (...)"; one per copy,
    /// joined by "; ". "in flight" if it has not left the graph yet.
    pub fate: String,
}

/// The packet trace: what is still to be traced, and the packets recorded.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct TraceDump {
    /// Arriving packets still to be traced.
    pub pending: u32,
    pub packets: Vec<TracedPacketRecord>,
    /// Whether the record is full (at most 100000 steps are kept).
    pub full: bool,
}

/// A capture's tap, to be added to the pipeline.
pub struct CaptureStart {
    pub tap: Tap,
}

pub enum Request {
    Counters(oneshot::Sender<Snapshot>),
    Flows(FlowFilter, oneshot::Sender<FlowDump>),
    /// Removes matching flows (with their reverse); answers how many entries went.
    DeleteFlows(FlowFilter, oneshot::Sender<usize>),
    /// Traces the next N arriving packets; answers how many are pending.
    TraceAdd(u32, oneshot::Sender<u32>),
    Trace(oneshot::Sender<TraceDump>),
    /// Forgets the record and what is pending.
    TraceClear(oneshot::Sender<()>),
    /// Adds a capture tap.
    CaptureStart(Box<CaptureStart>, oneshot::Sender<()>),
    /// Removes a capture's tap (its writer flushes and finishes); answers whether it
    /// was still there.
    CaptureStop(u32, oneshot::Sender<bool>),
}

/// The worker's end.
pub type Requests = mpsc::Receiver<Request>;

/// Answers what is waiting, a few at most, and ends captures whose time is up: call
/// once per loop iteration.
pub fn drain(requests: &Requests, pipe: &mut Pipeline) {
    drain_with(requests, pipe, |_| {});
}

/// Like [`drain`], with `sync` called just before a request reads the counters or the
/// flows, and just after one deletes flows (a fast path below the pipeline merges its
/// counters into the flows before they are read, and takes deleted flows out after).
pub fn drain_with(requests: &Requests, pipe: &mut Pipeline, mut sync: impl FnMut(&mut Pipeline)) {
    if !pipe.taps.is_empty() {
        pipe.taps.expire(Instant::now());
    }
    for _ in 0..PER_ITERATION {
        match requests.try_recv() {
            Ok(r) => {
                let reads = matches!(r, Request::Counters(_) | Request::Flows(..));
                let deletes = matches!(r, Request::DeleteFlows(..));
                if reads {
                    sync(pipe);
                }
                serve(pipe, r);
                if deletes {
                    sync(pipe);
                }
            }
            Err(_) => return,
        }
    }
}

/// Answers one request. A closed reply channel (the client gave up) is not an error.
pub fn serve(pipe: &mut Pipeline, request: Request) {
    match request {
        Request::Counters(reply) => {
            let _ = reply.send(pipe.snapshot(|_| None));
        }
        Request::Flows(filter, reply) => {
            let _ = reply.send(dump(pipe, &filter));
        }
        Request::DeleteFlows(filter, reply) => {
            let ids: Vec<FlowId> = matching(pipe, &filter).map(|(id, _)| id).collect();
            let removed = ids.into_iter().map(|id| pipe.cx.flows.remove(id)).sum();
            let _ = reply.send(removed);
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
}

fn trace(t: &Trace) -> TraceDump {
    let packets = t
        .packets()
        .iter()
        .map(|p| {
            let steps: Vec<TraceStepRecord> = t
                .steps_of(p.packet)
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

fn matching<'a>(
    pipe: &'a Pipeline,
    f: &'a FlowFilter,
) -> impl Iterator<Item = (FlowId, &'a ovr_tables::flow::FlowEntry)> + 'a {
    pipe.cx.flows.iter().filter(move |(id, e)| {
        let k = &e.key;
        f.id.is_none_or(|i| i == id.0)
            && f.vrf.is_none_or(|v| v == k.vrf)
            && f.addr.is_none_or(|a| a == k.src_ip() || a == k.dst_ip())
            && f.port.is_none_or(|p| p == k.src_port || p == k.dst_port)
    })
}

fn dump(pipe: &Pipeline, f: &FlowFilter) -> FlowDump {
    let now = pipe.cx.now;
    let ms = |ns: u64| now.saturating_sub(ns) / 1_000_000;
    let mut flows = Vec::new();
    let mut matched = 0;
    for (id, e) in matching(pipe, f) {
        matched += 1;
        if flows.len() >= f.limit {
            continue;
        }
        let k = &e.key;
        let (action, nexthop, drop_reason) = match e.action {
            Some(FlowAction::Forward { next_hop }) => ("forward", Some(next_hop.0), None),
            Some(FlowAction::Drop { reason }) => ("drop", None, Some(DropReason(reason).name())),
            None => ("pending", None, None),
        };
        flows.push(FlowRecord {
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
            offloaded: e.flags & flags::OFFLOADED != 0,
            packets: e.packets,
            bytes: e.bytes,
            age_ms: ms(e.created),
            idle_ms: ms(e.last_seen),
        });
    }
    FlowDump {
        flows,
        matched,
        active: pipe.cx.flows.len(),
    }
}

/// The API's end: asks the workers and waits for their answers.
#[derive(Clone)]
pub struct WorkerClient {
    txs: Vec<mpsc::Sender<Request>>,
}

/// Channels to `workers` workers: the client for the API, a receiver for each worker loop.
pub fn channel(workers: usize) -> (WorkerClient, Vec<Requests>) {
    let (txs, rxs) = (0..workers.max(1)).map(|_| mpsc::channel()).unzip();
    (WorkerClient { txs }, rxs)
}

async fn answer<T>(answer: oneshot::Receiver<T>) -> Result<T, ApiError> {
    match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(ApiError::Unavailable("a forwarding worker stopped".into())),
        Err(_) => Err(ApiError::Unavailable(
            "a forwarding worker did not answer in time".into(),
        )),
    }
}

impl WorkerClient {
    fn workers(&self) -> u32 {
        self.txs.len() as u32
    }

    /// Asks worker `w`.
    async fn ask_one<T>(
        &self,
        w: usize,
        make: impl FnOnce(oneshot::Sender<T>) -> Request,
    ) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.txs[w]
            .send(make(reply))
            .map_err(|_| ApiError::Unavailable("the forwarding workers are not running".into()))?;
        answer(rx).await
    }

    /// Asks every worker (all at once), answers in worker order.
    async fn ask_all<T>(
        &self,
        make: impl Fn(oneshot::Sender<T>) -> Request,
    ) -> Result<Vec<T>, ApiError> {
        let mut pending = Vec::with_capacity(self.txs.len());
        for tx in &self.txs {
            let (reply, rx) = oneshot::channel();
            tx.send(make(reply)).map_err(|_| {
                ApiError::Unavailable("the forwarding workers are not running".into())
            })?;
            pending.push(rx);
        }
        let mut out = Vec::with_capacity(pending.len());
        for rx in pending {
            out.push(answer(rx).await?);
        }
        Ok(out)
    }

    pub async fn counters(&self) -> Result<Snapshot, ApiError> {
        let mut all = self.ask_all(Request::Counters).await?.into_iter();
        let mut sum = all
            .next()
            .ok_or_else(|| ApiError::Internal("no worker".into()))?;
        for s in all {
            sum.merge(s);
        }
        Ok(sum)
    }

    /// The filter for one worker, and which workers to ask: a flow id names its worker.
    fn split(&self, f: FlowFilter) -> (FlowFilter, core::ops::Range<usize>) {
        let n = self.workers();
        match f.id {
            Some(id) => {
                let w = (id % n) as usize;
                (
                    FlowFilter {
                        id: Some(id / n),
                        ..f
                    },
                    w..w + 1,
                )
            }
            None => (f, 0..n as usize),
        }
    }

    pub async fn flows(&self, f: FlowFilter) -> Result<FlowDump, ApiError> {
        let (local, workers) = self.split(f);
        let n = self.workers();
        let mut out = FlowDump {
            flows: Vec::new(),
            matched: 0,
            active: 0,
        };
        for w in 0..self.txs.len() {
            let d = if workers.contains(&w) {
                self.ask_one(w, |r| Request::Flows(local, r)).await?
            } else {
                self.ask_one(w, |r| Request::Flows(FlowFilter { limit: 0, ..local }, r))
                    .await?
            };
            out.matched += if workers.contains(&w) { d.matched } else { 0 };
            out.active += d.active;
            let global = |id: u32| id * n + w as u32;
            for mut r in d.flows {
                if out.flows.len() < f.limit {
                    r.id = global(r.id);
                    r.reverse = r.reverse.map(global);
                    out.flows.push(r);
                }
            }
        }
        Ok(out)
    }

    pub async fn delete_flows(&self, f: FlowFilter) -> Result<usize, ApiError> {
        let (local, workers) = self.split(f);
        let mut removed = 0;
        for w in workers {
            removed += self.ask_one(w, |r| Request::DeleteFlows(local, r)).await?;
        }
        Ok(removed)
    }

    /// Each worker traces the next `n` packets it forwards; answers how many are pending
    /// in all.
    pub async fn trace_add(&self, n: u32) -> Result<u32, ApiError> {
        let pending = self.ask_all(|r| Request::TraceAdd(n, r)).await?;
        Ok(pending.into_iter().fold(0u32, u32::saturating_add))
    }

    /// Every worker's traced packets, worker by worker, numbered again from 1.
    pub async fn trace(&self) -> Result<TraceDump, ApiError> {
        let mut all = TraceDump {
            pending: 0,
            packets: Vec::new(),
            full: false,
        };
        for d in self.ask_all(Request::Trace).await? {
            all.pending = all.pending.saturating_add(d.pending);
            all.full |= d.full;
            all.packets.extend(d.packets);
        }
        for (i, p) in all.packets.iter_mut().enumerate() {
            p.id = i as u32 + 1;
        }
        Ok(all)
    }

    pub async fn trace_clear(&self) -> Result<(), ApiError> {
        self.ask_all(Request::TraceClear).await.map(|_| ())
    }

    /// Puts a copy of the tap in every worker (they share its queue and frame budget).
    pub async fn capture_start(&self, tap: Tap) -> Result<(), ApiError> {
        self.ask_all(|r| Request::CaptureStart(Box::new(CaptureStart { tap: tap.clone() }), r))
            .await
            .map(|_| ())
    }

    pub async fn capture_stop(&self, id: u32) -> Result<bool, ApiError> {
        let stopped = self.ask_all(|r| Request::CaptureStop(id, r)).await?;
        Ok(stopped.into_iter().any(|s| s))
    }
}
