//! Questions for the forwarding workers, whose `Pipeline`s own the counters and the flow
//! tables (each worker its share of the flows). Each worker drains its channel once per
//! loop iteration (`drain`: one `try_recv` when there is nothing, no lock) and answers
//! on a one-shot channel; the API asks every worker, waits for the answers with a
//! timeout and merges them.
//!
//! Under a flood of requests: each worker's queue is bounded (a full one is 503 with
//! Retry-After, at once); a request wakes its worker (an eventfd in the worker's poll
//! set), so an idle worker answers at once instead of at its next idle timeout; a
//! request whose client gave up is skipped; and concurrent counter reads share one
//! round trip (`CounterRounds`).
//!
//! Flow ids are per worker; the API shows `local id × workers + worker`, which is the
//! worker's own id when there is one worker.

mod answer;

pub use answer::{Below, FLOW_STEP, SYNC_STEP, WALK_STEP, drain, drain_with, serve};

use crate::error::ApiError;
use core::net::IpAddr;
use ovr_dataplane::capture::Tap;
use ovr_dataplane::counters::Snapshot;
use rustix::event::{EventfdFlags, eventfd};
use serde::Serialize;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use utoipa::ToSchema;

/// Requests waiting for one worker at most. Counter reads are coalesced, so this bounds
/// the other kinds (flow dumps, trace, captures): beyond it the API answers 503 with
/// Retry-After rather than queueing work the worker cannot get to.
pub const QUEUE: usize = 256;

/// Time a worker spends answering per loop iteration (at least one request): its own
/// work, forwarding, comes first.
const BUDGET: Duration = Duration::from_millis(2);

/// How long the API waits for the worker.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// Seconds a client told the queue is full should wait (Retry-After).
pub const RETRY_AFTER_S: u32 = 1;

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
    /// The counters, for a round of coalesced reads: `taken` is set when a worker takes
    /// it, so that later reads start a round of their own (and see what happened since).
    Counters(Arc<AtomicBool>, oneshot::Sender<Snapshot>),
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

/// The worker's end: its queue, and the eventfd written when a request is queued (to be
/// polled with the worker's interfaces).
pub struct Requests {
    rx: mpsc::Receiver<Request>,
    wake: Arc<OwnedFd>,
    /// The request being answered over several loop iterations (`answer`).
    job: Option<answer::Job>,
}

impl Requests {
    /// Readable when a request has been queued since the last `drain`.
    pub fn fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// The next request, waiting for it (for a thread that does nothing else); `None`
    /// once the API is gone.
    pub fn recv(&self) -> Option<Request> {
        self.rx.recv().ok()
    }

    /// Clears the wake-up: call when the worker wakes, before it drains, so that a
    /// request queued after the drain looked wakes it again.
    pub fn awake(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(self.wake.as_fd(), &mut b);
    }
}

fn wake(fd: &OwnedFd) {
    // An eventfd counts up; a full counter (never in practice) still reads as readable.
    let _ = rustix::io::write(fd.as_fd(), &1u64.to_ne_bytes());
}

impl Request {
    /// Whether whoever asked has gone (the HTTP client hung up, or the API stopped
    /// waiting): its answer would be thrown away, so the work is not done.
    pub fn abandoned(&self) -> bool {
        match self {
            Request::Counters(_, r) => r.is_closed(),
            Request::Flows(_, r) => r.is_closed(),
            Request::DeleteFlows(_, r) => r.is_closed(),
            Request::TraceAdd(_, r) => r.is_closed(),
            Request::Trace(r) => r.is_closed(),
            Request::TraceClear(r) => r.is_closed(),
            Request::CaptureStart(_, r) => r.is_closed(),
            Request::CaptureStop(_, r) => r.is_closed(),
        }
    }
}

/// The API's end: asks the workers and waits for their answers.
#[derive(Clone)]
pub struct WorkerClient {
    txs: Vec<mpsc::SyncSender<Request>>,
    wakes: Vec<Arc<OwnedFd>>,
    counters: Arc<Mutex<Option<Round>>>,
}

/// A round of coalesced counter reads: open (others may join) until a worker takes it.
struct Round {
    taken: Arc<AtomicBool>,
    answer: Arc<watch::Sender<Option<Result<Snapshot, ApiError>>>>,
}

/// Channels to `workers` workers: the client for the API, a receiver for each worker loop.
pub fn channel(workers: usize) -> (WorkerClient, Vec<Requests>) {
    channel_of(workers, QUEUE)
}

fn channel_of(workers: usize, queue: usize) -> (WorkerClient, Vec<Requests>) {
    let mut client = WorkerClient {
        txs: Vec::new(),
        wakes: Vec::new(),
        counters: Arc::default(),
    };
    let mut rxs = Vec::new();
    for _ in 0..workers.max(1) {
        let (tx, rx) = mpsc::sync_channel(queue);
        let wake = Arc::new(
            eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC)
                .expect("an eventfd for the worker's requests"),
        );
        client.txs.push(tx);
        client.wakes.push(Arc::clone(&wake));
        rxs.push(Requests {
            rx,
            wake,
            job: None,
        });
    }
    (client, rxs)
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

    /// Queues a request for worker `w` and wakes it; a full queue is refused at once.
    pub fn send(&self, w: usize, r: Request) -> Result<(), ApiError> {
        match self.txs[w].try_send(r) {
            Ok(()) => {
                wake(&self.wakes[w]);
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(ApiError::Busy(format!(
                "the forwarding worker has {QUEUE} requests waiting: try again"
            ))),
            Err(TrySendError::Disconnected(_)) => Err(ApiError::Unavailable(
                "the forwarding workers are not running".into(),
            )),
        }
    }

    /// Wakes every worker without a request: after the tables changed, so that a worker
    /// idle in poll(2) follows them (opens a new interface) now rather than at its next
    /// timeout.
    pub fn wake_all(&self) {
        for w in &self.wakes {
            wake(w);
        }
    }

    /// Asks worker `w`.
    async fn ask_one<T>(
        &self,
        w: usize,
        make: impl FnOnce(oneshot::Sender<T>) -> Request,
    ) -> Result<T, ApiError> {
        let (reply, rx) = oneshot::channel();
        self.send(w, make(reply))?;
        answer(rx).await
    }

    /// Asks every worker (all at once), answers in worker order.
    async fn ask_all<T>(
        &self,
        make: impl Fn(oneshot::Sender<T>) -> Request,
    ) -> Result<Vec<T>, ApiError> {
        let mut pending = Vec::with_capacity(self.txs.len());
        for w in 0..self.txs.len() {
            let (reply, rx) = oneshot::channel();
            self.send(w, make(reply))?;
            pending.push(rx);
        }
        let mut out = Vec::with_capacity(pending.len());
        for rx in pending {
            out.push(answer(rx).await?);
        }
        Ok(out)
    }

    /// Every worker's counters, summed. Reads made while a round is still queued join
    /// it (the snapshot is taken after they arrived, so none sees older counters than
    /// it asked for): a thousand concurrent reads cost the workers one round or two.
    pub async fn counters(&self) -> Result<Snapshot, ApiError> {
        let mut rx = {
            let mut open = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
            match open.as_ref() {
                Some(r) if !r.taken.load(Ordering::Acquire) && r.answer.borrow().is_none() => {
                    r.answer.subscribe()
                }
                _ => {
                    let r = self.counters_round();
                    let rx = r.answer.subscribe();
                    *open = Some(r);
                    rx
                }
            }
        };
        // The round ends within ANSWER_TIMEOUT; this bound is only against a bug.
        let v = tokio::time::timeout(ANSWER_TIMEOUT * 2, rx.wait_for(Option::is_some))
            .await
            .map_err(|_| ApiError::Unavailable("the counters did not come".into()))?
            .map_err(|_| ApiError::Internal("the counters round was dropped".into()))?;
        v.clone()
            .unwrap_or_else(|| Err(ApiError::Internal("no counters".into())))
    }

    /// Starts a round on its own task: a reader that gives up must not take the others'
    /// answer with it. A round always runs to its end (one snapshot per worker, at most
    /// ANSWER_TIMEOUT), so that a reader joining late never waits on an abandoned one.
    fn counters_round(&self) -> Round {
        let taken = Arc::new(AtomicBool::new(false));
        let answer = Arc::new(watch::channel(None).0);
        let (this, flag, tx) = (self.clone(), Arc::clone(&taken), Arc::clone(&answer));
        tokio::spawn(async move {
            let all = this
                .ask_all(|r| Request::Counters(Arc::clone(&flag), r))
                .await;
            let sum = all.and_then(|all| {
                let mut all = all.into_iter();
                let mut sum = all
                    .next()
                    .ok_or_else(|| ApiError::Internal("no worker".into()))?;
                for s in all {
                    sum.merge(s);
                }
                Ok(sum)
            });
            // Closed for joining before the answer is visible.
            flag.store(true, Ordering::Release);
            tx.send_replace(Some(sum));
        });
        Round { taken, answer }
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

#[cfg(test)]
mod tests;
