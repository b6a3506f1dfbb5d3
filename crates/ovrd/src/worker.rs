//! One forwarding worker: its interfaces, its pipeline (with its share of the flows),
//! its loop. With several workers, a frame belongs to the worker its flow hashes to
//! (`ovr_wire::steer`, the same both ways and through every tunnel), so that a flow's
//! state lives in one place; a frame read by another worker is handed over
//! (`handoff`). Frames with no flow (ARP, broadcasts) stay with the worker that read them.
//!
//! With `--offload xdp|tc`, each worker has its own `FastPath` for the flows it owns, over
//! the one fast path program and set of maps of the whole ovrd (`ovr_offload` says why their
//! entries never collide and how a table change invalidates them for every worker).

use crate::handoff::{Mailbox, Outbox};
use crate::pacer::{Pacer, Pacing};
use crate::ports::{Ports, Share};
use ovr_agent::worker::Requests;
use ovr_dataplane::Pipeline;
use ovr_dataplane::counters::Snapshot;
use ovr_dataplane::drop::Reason;
use ovr_offload::FastPath;
use ovr_offload::bpf::Bpf;
use ovr_tables::flow::FlowId;
use ovr_tables::nexthop::{Inner, NextHop};
use ovr_tables::state::{ForwardingState, TablesReader};
use ovr_wire::offload::VNET_HDR_LEN;
use ovr_wire::steer::{self, MplsPayload};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::info;

/// How long an idle worker sleeps in poll(2) before looking at its stop flag again
/// (less if the fast path asks, `FastPath::wake_within_ms`, or health probes are due,
/// `Prober::wake_within_ms`). Frames, other workers'
/// hand-overs and the API's requests wake it at once.
const IDLE_POLL_MS: i32 = 100;

/// How often the drivers' own losses (full rings and queues) are added to the drop
/// reasons.
const LOSSES_EVERY: Duration = Duration::from_millis(200);

/// How a worker runs.
pub struct Options {
    /// At exit, leave the fast path's program on the interfaces (pinned).
    pub keep_fast_path: bool,
    /// When to keep looking for frames and when to sleep.
    pub pacing: Pacing,
    pub stats_every: Option<Duration>,
}

pub struct Worker {
    pub share: Share,
    pub ports: Ports,
    pub pipe: Pipeline,
    pub requests: Requests,
    /// Present with more than one worker.
    pub handoff: Option<(Mailbox, Outbox)>,
    /// The fast path of this worker's flows (`--offload xdp|tc`).
    pub fast: Option<FastPath<Bpf>>,
}

impl Worker {
    /// Forwards until `stop`; returns the counters (interfaces named; the fast path's
    /// merged in) and closes the interfaces.
    pub fn run(
        mut self,
        reader: &TablesReader,
        o: &Options,
        start: Instant,
        stop: &AtomicBool,
    ) -> Result<Snapshot, String> {
        let mut last_stats = Instant::now();
        let mut last_losses = Instant::now();
        let mut policed_seen = 0;
        let mut pacer = Pacer::new(o.pacing, Instant::now());
        // The clock is read once per iteration (a spinning worker's iterations are short
        // enough for more reads to show in its profile); a frame arriving during the
        // iteration is dated to its start.
        let mut now = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if pacer.should_sleep(now) {
                self.sleep()?;
                now = Instant::now();
            }
            let Some(guard) = reader.enter() else { break };
            let st = &*guard;
            self.pipe.cx.now = (now - start).as_nanos() as u64;
            if let Some(f) = self.fast.as_mut() {
                f.begin(st, &mut self.pipe.cx);
            }
            let received = self.receive(st);
            pacer.received(now, received);
            if received == 0 {
                // Spinning with nothing to do: let the other threads on this core (on a
                // small host, the workloads and the kernel's own packet work) run first.
                std::thread::yield_now();
            }
            let Self {
                ports,
                pipe,
                requests,
                fast,
                ..
            } = &mut self;
            pipe.run(st);
            match fast {
                Some(f) => {
                    pipe.for_each_flow_tx(|cx, meta, head| f.observe(st, cx, meta, head));
                    f.maintain(&mut pipe.cx);
                    // The fast path's counters are merged into the flows before they are
                    // read (in steps), and flows deleted are taken out of it.
                    ovr_agent::worker::drain_with(requests, pipe, &mut Fast(f));
                }
                None => ovr_agent::worker::drain(requests, pipe),
            }
            pipe.drain_tx_batches(|iface, frames| ports.send(iface, frames));
            ports.maintain(st, now);
            if let Some(ids) = ports.policed_in_kernel(&mut policed_seen) {
                pipe.police_in_kernel(ids);
            }
            if now - last_losses >= LOSSES_EVERY {
                last_losses = now;
                count_losses(ports, pipe);
            }
            if let Some(every) = o.stats_every
                && now - last_stats >= every
            {
                last_stats = now;
                if let Some(f) = self.fast.as_ref() {
                    info!(
                        worker = self.share.index,
                        "fast path: {}; {}",
                        f.totals(),
                        program_line(f.backend())
                    );
                }
                info!(
                    worker = self.share.index,
                    "counters\n{}",
                    snapshot(&self.pipe, st)
                );
            }
            now = Instant::now();
        }
        if let Some(f) = self.fast.as_mut() {
            f.sync_all(&mut self.pipe.cx);
        }
        count_losses(&mut self.ports, &mut self.pipe);
        let snap = reader.enter().map(|st| snapshot(&self.pipe, &st));
        if let Some((_, out)) = &self.handoff {
            info!(
                worker = self.share.index,
                handed = out.handed,
                dropped = out.dropped,
                "frames handed over to the workers owning their flows (dropped: mailbox full)"
            );
        }
        self.ports.close(o.keep_fast_path);
        Ok(snap.unwrap_or_else(|| self.pipe.snapshot(|_| None)))
    }

    /// Sleeps until a frame arrives, another worker hands some over, or the API asks.
    fn sleep(&mut self) -> Result<(), String> {
        let ms = self
            .fast
            .as_ref()
            .and_then(|f| f.wake_within_ms())
            .into_iter()
            .chain(self.pipe.cx.probes.wake_within_ms())
            .min()
            .unwrap_or(IDLE_POLL_MS);
        let r = self.wait(ms);
        // Before this iteration drains them: a request queued later wakes the next sleep.
        self.requests.awake();
        r
    }

    fn wait(&mut self, ms: i32) -> Result<(), String> {
        match &mut self.handoff {
            None => self.ports.wait(ms),
            Some((mailbox, _)) => {
                let r = if mailbox.may_sleep() {
                    self.ports.wait(ms)
                } else {
                    Ok(())
                };
                mailbox.awake();
                r
            }
        }
    }

    /// Takes what arrived on this worker's interfaces and, with several workers, what
    /// others handed over; returns how many frames.
    fn receive(&mut self, st: &ForwardingState) -> usize {
        let Self {
            share,
            ports,
            pipe,
            handoff,
            ..
        } = self;
        let Some((mailbox, outbox)) = handoff else {
            return ports.recv(|id, vnet, frames| {
                if vnet {
                    pipe.receive_offloaded(st, id, frames)
                } else {
                    pipe.receive(st, id, frames)
                }
            });
        };
        let (me, n) = (share.index, share.count as u32);
        let label = |l: u32| label_payload(st, l);
        let mut received = ports.recv(|id, vnet, frames| {
            let mine = frames.filter(|f| {
                let frame = if vnet {
                    f.get(VNET_HDR_LEN..).unwrap_or_default()
                } else {
                    f
                };
                match steer::flow_hash(frame, &label).map(|h| (h % n) as usize) {
                    Some(owner) if owner != me => {
                        outbox.push(owner, id, vnet, f);
                        false
                    }
                    _ => true,
                }
            });
            if vnet {
                pipe.receive_offloaded(st, id, mine)
            } else {
                pipe.receive(st, id, mine)
            }
        });
        outbox.flush();
        while let Some(b) = mailbox.take() {
            received += b.frames().count();
            if b.vnet {
                pipe.receive_offloaded(st, b.iface, b.frames())
            } else {
                pipe.receive(st, b.iface, b.frames())
            }
        }
        received
    }
}

/// Counts what the drivers lost since the last call under drop reasons, and what the
/// kernel policed as received and policed.
fn count_losses(ports: &mut Ports, pipe: &mut Pipeline) {
    let (rx, tx) = ports.take_losses(|id, frames, bytes| {
        pipe.count_policed_in_kernel(id, frames, bytes);
    });
    pipe.cx.count_drops(Reason::RxQueueFull, rx);
    pipe.cx.count_drops(Reason::TxQueueFull, tx);
}

/// The fast path, as the API's requests see it below the pipeline.
struct Fast<'a>(&'a mut FastPath<Bpf>);

impl ovr_agent::worker::Below for Fast<'_> {
    fn sync_begin(&mut self, _: &mut Pipeline) {
        self.0.sync_begin();
    }

    fn sync_step(&mut self, pipe: &mut Pipeline, max: usize) -> bool {
        self.0.sync_step(&mut pipe.cx, max)
    }

    fn carries(&self, pipe: &Pipeline, id: FlowId) -> bool {
        self.0.carries(&pipe.cx, id)
    }
}

/// What an MPLS label carries, from the next hop the label table gives it (as the
/// dataplane's mpls-decap decides).
fn label_payload(st: &ForwardingState, label: u32) -> MplsPayload {
    match st.labels().lookup(label).and_then(|nh| st.nexthop(nh)) {
        Some(NextHop::Interface { .. })
        | Some(NextHop::Vrf {
            inner: Inner::Ip, ..
        }) => MplsPayload::Ip,
        Some(NextHop::Vrf {
            inner: Inner::Ethernet,
            ..
        }) => MplsPayload::Ethernet,
        _ => MplsPayload::Unknown,
    }
}

pub fn snapshot(pipe: &Pipeline, st: &ForwardingState) -> Snapshot {
    pipe.snapshot(|i| st.interface(i).map(|x| x.name.clone()))
}

/// The fast path program's own counters (the whole ovrd's: every worker shares it), on
/// one line.
pub fn program_line(program: &Bpf) -> String {
    let mut s = "program:".to_string();
    for (name, v) in program.counters() {
        s.push_str(&format!(" {name} {v}"));
    }
    s
}
