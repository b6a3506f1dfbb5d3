//! Questions for the forwarding worker, whose `Pipeline` owns the counters and the flow
//! table. The worker drains the channel once per loop iteration (`drain`: one
//! `try_recv` when there is nothing, no lock) and answers on a one-shot channel; the API
//! waits for the answer with a timeout.

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
    if !pipe.taps.is_empty() {
        pipe.taps.expire(Instant::now());
    }
    for _ in 0..PER_ITERATION {
        match requests.try_recv() {
            Ok(r) => serve(pipe, r),
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

/// The API's end: asks the worker and waits for its answer.
#[derive(Clone)]
pub struct WorkerClient {
    tx: mpsc::Sender<Request>,
}

/// A channel to the worker: the client for the API, the receiver for the worker loop.
pub fn channel() -> (WorkerClient, Requests) {
    let (tx, rx) = mpsc::channel();
    (WorkerClient { tx }, rx)
}

impl WorkerClient {
    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Request,
    ) -> Result<T, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(make(reply))
            .map_err(|_| ApiError::Unavailable("the forwarding worker is not running".into()))?;
        match tokio::time::timeout(ANSWER_TIMEOUT, answer).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(ApiError::Unavailable(
                "the forwarding worker stopped".into(),
            )),
            Err(_) => Err(ApiError::Unavailable(
                "the forwarding worker did not answer in time".into(),
            )),
        }
    }

    pub async fn counters(&self) -> Result<Snapshot, ApiError> {
        self.ask(Request::Counters).await
    }

    pub async fn flows(&self, f: FlowFilter) -> Result<FlowDump, ApiError> {
        self.ask(|r| Request::Flows(f, r)).await
    }

    pub async fn delete_flows(&self, f: FlowFilter) -> Result<usize, ApiError> {
        self.ask(|r| Request::DeleteFlows(f, r)).await
    }

    pub async fn trace_add(&self, n: u32) -> Result<u32, ApiError> {
        self.ask(|r| Request::TraceAdd(n, r)).await
    }

    pub async fn trace(&self) -> Result<TraceDump, ApiError> {
        self.ask(Request::Trace).await
    }

    pub async fn trace_clear(&self) -> Result<(), ApiError> {
        self.ask(Request::TraceClear).await
    }

    pub async fn capture_start(&self, tap: Tap) -> Result<(), ApiError> {
        self.ask(|r| Request::CaptureStart(Box::new(CaptureStart { tap }), r))
            .await
    }

    pub async fn capture_stop(&self, id: u32) -> Result<bool, ApiError> {
        self.ask(|r| Request::CaptureStop(id, r)).await
    }
}
