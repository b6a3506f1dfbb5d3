//! Questions for the forwarding worker, whose `Pipeline` owns the counters and the flow
//! table. The worker drains the channel once per loop iteration (`drain`: one
//! `try_recv` when there is nothing, no lock) and answers on a one-shot channel; the API
//! waits for the answer with a timeout.

use crate::error::ApiError;
use core::net::IpAddr;
use ovr_dataplane::counters::Snapshot;
use ovr_dataplane::{DropReason, Pipeline};
use ovr_tables::flow::{FlowAction, FlowId, flags};
use serde::Serialize;
use std::sync::mpsc;
use std::time::Duration;
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

pub enum Request {
    Counters(oneshot::Sender<Snapshot>),
    Flows(FlowFilter, oneshot::Sender<FlowDump>),
    /// Removes matching flows (with their reverse); answers how many entries went.
    DeleteFlows(FlowFilter, oneshot::Sender<usize>),
}

/// The worker's end.
pub type Requests = mpsc::Receiver<Request>;

/// Answers what is waiting, a few at most: call once per loop iteration.
pub fn drain(requests: &Requests, pipe: &mut Pipeline) {
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
}
