//! `ovrctl bench engine`: the pipeline's own speed on one core, without kernel I/O.
//!
//! Packets come from an in-memory generator (frames built once per flow, side by side in
//! one buffer, and copied into the pipeline's buffers, as a copy-mode driver would) and
//! leave to a sink that frees them. The first pass over the flows sets every flow up
//! (the slow path: that is the flow-setup rate); then the flows are cycled in a fixed
//! order for the measured time.

mod scenario;

use ovr_dataplane::{Pipeline, Settings};
use ovr_graph::VECTOR_SIZE;
use ovr_tables::hugemem::{HugeArray, Pages};
use ovr_tables::ids::InterfaceId;
use ovr_tables::prefetch::prefetch;
use ovr_tables::state::{ForwardingState, new_tables};
use scenario::{SCENARIOS, Scale};
use std::time::{Duration, Instant};

/// Flow counts measured when none is given: 1K, 8K, 64K, 256K and 1M (binary, as the
/// goals in bench/RESULTS.md name them).
pub const FLOWS: &[usize] = &[1 << 10, 1 << 13, 1 << 16, 1 << 18, 1 << 20];

#[derive(clap::Args)]
pub struct Args {
    /// One scenario (vxlan-l2-encap, mplsudp-l3-encap, vxlan-decap, l2-local: bridged
    /// between two workloads of the host, as between two memif interfaces, l3-local:
    /// routed between two networks of the host, chain-local: the same through a network
    /// function on the host, two passes per packet); all by default.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(SCENARIOS))]
    pub scenario: Option<String>,
    /// One flow count; 1K, 8K, 64K, 256K and 1M by default.
    #[arg(long)]
    pub flows: Option<usize>,
    /// Measured time per point.
    #[arg(long, default_value_t = 2.0, value_parser = crate::traffic::non_negative)]
    pub seconds: f64,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Also show each node's time per packet on the fast path.
    #[arg(long)]
    pub nodes: bool,
    /// Every packet through the whole graph, without the one-pass path for
    /// established flows (to compare the two in one binary).
    #[arg(long)]
    pub graph_only: bool,
    /// The flow table on 4 KiB pages instead of huge pages (to compare the two in one
    /// binary).
    #[arg(long)]
    pub small_pages: bool,
    /// vxlan-l2-encap at scale: remote VTEPs the flows spread over, each with its
    /// tunnel, a bridge entry and a /32 route.
    #[arg(long, default_value_t = 1)]
    pub vteps: usize,
    /// vxlan-l2-encap at scale: networks (VNIs), each with a workload; VTEP j is in
    /// network j mod networks.
    #[arg(long, default_value_t = 1)]
    pub networks: usize,
}

/// What one measurement gave.
struct Result {
    scenario: String,
    flows: usize,
    mpps: f64,
    ns_per_packet: f64,
    /// Packets per second of the time the thread was on a CPU (None where the kernel
    /// does not say): on a shared machine, wall time also counts other processes'
    /// turns on the core.
    cpu_mpps: Option<f64>,
    setup_flows_per_sec: f64,
    forwarded: u64,
    dropped: u64,
    packets: u64,
    /// Per node of the fast path: (name, ns per packet through it, packets per vector).
    nodes: Vec<(&'static str, f64, f64)>,
    /// Resident memory the tables took when committed (both copies).
    tables_bytes: Option<u64>,
    /// What backs the flow table.
    pages: Pages,
}

/// The generator's frames side by side in one buffer on huge pages, each at a multiple
/// of a stride of whole cache lines, as frames sit in a receive ring or an AF_XDP UMEM.
/// The generator is not what the bench measures, yet with a `Vec` per frame (an
/// allocation each, reached through a pointer, on 4 KiB pages) and no prefetch it cost
/// ~10 ns a packet more at 1M flows than at 1K (bench/RESULTS.md, "The generator's
/// frames").
struct Frames {
    rx: Vec<InterfaceId>,
    lens: Vec<u16>,
    stride: usize,
    data: HugeArray<u8>,
}

impl Frames {
    fn new(frames: Vec<(InterfaceId, Vec<u8>)>) -> Frames {
        let longest = frames.iter().map(|(_, f)| f.len()).max().unwrap_or(0);
        let stride = longest.div_ceil(64).max(1) * 64;
        let mut data = HugeArray::new(stride * frames.len(), true);
        for (i, (_, f)) in frames.iter().enumerate() {
            data[i * stride..][..f.len()].copy_from_slice(f);
        }
        Frames {
            rx: frames.iter().map(|(rx, _)| *rx).collect(),
            lens: frames.iter().map(|(_, f)| f.len() as u16).collect(),
            stride,
            data,
        }
    }

    fn len(&self) -> usize {
        self.rx.len()
    }

    fn frame(&self, i: usize) -> &[u8] {
        &self.data[i * self.stride..][..usize::from(self.lens[i])]
    }
}

/// Sends `frames` in vectors (each from one interface), `count` packets from `start`,
/// cycling; returns packets transmitted (the sink's count).
fn pump(
    pipe: &mut Pipeline,
    st: &ForwardingState,
    frames: &Frames,
    start: usize,
    count: usize,
) -> u64 {
    let mut sent = 0u64;
    let mut at = start;
    let mut left = count;
    while left > 0 {
        let rx = frames.rx[at];
        let n = (0..left.min(VECTOR_SIZE))
            .take_while(|k| frames.rx[(at + k) % frames.len()] == rx)
            .count();
        let batch = (0..n).map(|k| {
            // A few frames ahead: at 1M flows the frames come from memory (a NIC's come
            // from its ring, in the cache), and the copy in waited for each.
            prefetch(frames.frame((at + k + 8) % frames.len()).as_ptr());
            frames.frame((at + k) % frames.len())
        });
        pipe.cx.now += 1_000;
        pipe.receive(st, rx, batch);
        pipe.run(st);
        pipe.drain_tx(|_, _| sent += 1);
        at = (at + n) % frames.len();
        left -= n;
    }
    sent
}

/// This process's resident memory, in bytes.
fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn measure(scenario: &str, flows: usize, a: &Args) -> std::result::Result<Result, String> {
    let seconds = a.seconds;
    let scale = Scale {
        vteps: a.vteps,
        networks: a.networks,
    }
    .check(scenario)?;
    let before = resident_bytes();
    let (mut w, r) = new_tables();
    w.commit(scenario::tables(scenario, scale))
        .map_err(|e| e.to_string())?;
    let tables_bytes = resident_bytes()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(b));
    let frames = Frames::new(scenario::frames(scenario, flows, scale).ok_or_else(|| {
        format!(
            "unknown scenario '{scenario}' (known: {})",
            SCENARIOS.join(", ")
        )
    })?);
    let settings = Settings {
        // Each frame's flow is a pair: room for both directions, and a quarter more.
        flow_capacity: (frames.len() * 2).max(1024) * 5 / 4,
        frames: 2 * VECTOR_SIZE,
        // The slow path's own rate is measured here, so it is not limited.
        setup_rate: None,
        established_path: !a.graph_only,
        huge_pages: !a.small_pages,
        // Nothing reads what was sent but the sink's count (as in an ovrd without the
        // kernel fast path, whose learning reads the metadata).
        tx_observed: false,
        ..Settings::default()
    };
    let mut pipe = Pipeline::new(settings);
    let guard = r.enter().ok_or("tables closed")?;
    let st = &*guard;
    // Slow path: every flow once.
    let t = Instant::now();
    pump(&mut pipe, st, &frames, 0, frames.len());
    let setup = t.elapsed().as_secs_f64();
    let created = pipe.cx.flow_counters.created;
    pipe.graph_mut().reset_stats();
    // Fast path, for the measured time, in rounds of about a million packets.
    let round = 1 << 20;
    let (mut packets, mut forwarded) = (0u64, 0u64);
    let drops_before: u64 = pipe.cx.drops.iter().sum();
    let cpu_before = on_cpu_ns();
    let t = Instant::now();
    let budget = Duration::from_secs_f64(seconds);
    // At least one round unless none was asked for (under valgrind a millisecond passes
    // before the first check).
    while (packets == 0 && seconds > 0.0) || t.elapsed() < budget {
        forwarded += pump(
            &mut pipe,
            st,
            &frames,
            packets as usize % frames.len(),
            round,
        );
        packets += round as u64;
    }
    let took = t.elapsed().as_secs_f64();
    let cpu = on_cpu_ns()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before) as f64 / 1e9);
    let dropped = pipe.cx.drops.iter().sum::<u64>() - drops_before;
    let nodes = pipe
        .graph()
        .stats()
        .filter(|(_, s)| s.packets > 0)
        .map(|(n, s)| (n, s.nanos as f64 / packets as f64, s.average_vector()))
        .collect();
    Ok(Result {
        scenario: scenario.to_string(),
        flows,
        mpps: packets as f64 / took / 1e6,
        ns_per_packet: took * 1e9 / packets as f64,
        cpu_mpps: cpu.filter(|c| *c > 0.0).map(|c| packets as f64 / c / 1e6),
        setup_flows_per_sec: created as f64 / setup,
        forwarded,
        dropped,
        packets,
        nodes,
        tables_bytes,
        pages: pipe.cx.flows.pages(),
    })
}

pub fn run(a: &Args) -> std::result::Result<(), String> {
    let scenarios: Vec<&str> = match &a.scenario {
        Some(s) => vec![s.as_str()],
        None => SCENARIOS.to_vec(),
    };
    let flows: Vec<usize> = match a.flows {
        Some(f) => vec![f.max(1)],
        None => FLOWS.to_vec(),
    };
    if !a.json {
        outln!(
            "{:<18} {:>9} {:>8} {:>8} {:>9} {:>14} {:>10}",
            "scenario",
            "flows",
            "Mpps",
            "ns/pkt",
            "CPU Mpps",
            "setup flows/s",
            "forwarded"
        );
    }
    for s in &scenarios {
        for &f in &flows {
            let r = measure(s, f, a)?;
            if a.json {
                let mut v = serde_json::json!({
                    "scenario": r.scenario,
                    "flows": r.flows,
                    "mpps": round(r.mpps, 3),
                    "ns_per_packet": round(r.ns_per_packet, 2),
                    "cpu_mpps": r.cpu_mpps.map(|m| round(m, 3)),
                    "setup_flows_per_sec": r.setup_flows_per_sec.round(),
                    "packets": r.packets,
                    "forwarded": r.forwarded,
                    "dropped": r.dropped,
                    "vteps": a.vteps,
                    "networks": a.networks,
                    "flow_table_pages": format!("{:?}", r.pages).to_lowercase(),
                    "tables_mib": r.tables_bytes.map(|b| round(b as f64 / (1 << 20) as f64, 1)),
                });
                if a.nodes {
                    v["nodes"] = r
                        .nodes
                        .iter()
                        .map(|(n, ns, vec)| {
                            serde_json::json!({
                                "name": n,
                                "ns_per_packet": round(*ns, 1),
                                "average_vector": round(*vec, 1),
                            })
                        })
                        .collect();
                }
                outln!("{v}");
            } else {
                outln!(
                    "{:<18} {:>9} {:>8.2} {:>8.1} {:>9} {:>14.0} {:>9.1}%",
                    r.scenario,
                    r.flows,
                    r.mpps,
                    r.ns_per_packet,
                    r.cpu_mpps.map_or("-".into(), |m| format!("{m:.2}")),
                    r.setup_flows_per_sec,
                    100.0 * r.forwarded as f64 / r.packets as f64
                );
                if a.nodes {
                    for (n, ns, vec) in &r.nodes {
                        outln!("    {n:<18} {ns:>6.1} ns/pkt  {vec:>5.1} pkts/vector");
                    }
                }
            }
            // (Under --json the object says it: packets, forwarded, dropped.)
            if r.forwarded < r.packets && !a.json {
                eprintln!(
                    "warning: {} of {} packets were not forwarded ({} dropped)",
                    r.packets - r.forwarded,
                    r.packets,
                    r.dropped
                );
            }
        }
    }
    Ok(())
}

/// Nanoseconds this thread has run on a CPU (the first field of Linux's
/// /proc/thread-self/schedstat), if the kernel says.
fn on_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// `x` to `digits` decimals (for JSON as short as the table).
fn round(x: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (x * m).round() / m
}
