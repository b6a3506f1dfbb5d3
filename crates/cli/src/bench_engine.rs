//! `ovrctl bench engine`: the pipeline's own speed on one core, without kernel I/O.
//!
//! Packets come from an in-memory generator (frames built once per flow and copied into
//! the pipeline's buffers, as a copy-mode driver would) and leave to a sink that frees
//! them. The first pass over the flows sets every flow up (the slow path: that is the
//! flow-setup rate); then the flows are cycled in a fixed order for the measured time.

use ovr_dataplane::{Pipeline, Settings};
use ovr_graph::VECTOR_SIZE;
use ovr_tables::hugemem::Pages;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress, InterfaceKind};
use ovr_tables::nexthop::{Encap, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyRule, PortRange};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::{ForwardingState, TableOp, new_tables};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::ip_proto;
use ovr_wire::vxlan::VxlanRepr;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The scenarios, by name.
pub const SCENARIOS: &[&str] = &[
    "vxlan-l2-encap",
    "mplsudp-l3-encap",
    "vxlan-decap",
    "l2-local",
];
/// Flow counts measured when none is given.
pub const FLOWS: &[usize] = &[1_000, 8_000, 64_000, 256_000, 1_000_000];

#[derive(clap::Args)]
pub struct Args {
    /// One scenario (vxlan-l2-encap, mplsudp-l3-encap, vxlan-decap, l2-local: bridged
    /// between two workloads of the host, as between two memif interfaces); all by default.
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

/// The size of the vxlan-l2-encap scenario's overlay (1 and 1: the plain scenario).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub vteps: usize,
    pub networks: usize,
}

impl Scale {
    const PLAIN: Scale = Scale {
        vteps: 1,
        networks: 1,
    };

    /// Checks the scale against the scenario.
    fn check(self, scenario: &str) -> std::result::Result<Self, String> {
        if self == Self::PLAIN {
            return Ok(self);
        }
        if scenario != "vxlan-l2-encap" {
            return Err("--vteps and --networks apply to --scenario vxlan-l2-encap".into());
        }
        if self.networks == 0 || self.vteps < self.networks || self.vteps > 1 << 20 {
            return Err("need 1 <= networks <= vteps <= 1048576".into());
        }
        Ok(self)
    }

    /// The workload interface of network `k`.
    fn workload(k: usize) -> InterfaceId {
        if k == 0 {
            WORKLOAD
        } else {
            InterfaceId(16 + k as u32)
        }
    }

    /// Remote VTEP `j`'s tunnel next hop and its workload's MAC.
    fn tunnel(j: usize) -> (NextHopId, MacAddr) {
        let b = (j as u32).to_be_bytes();
        (
            NextHopId(16 + j as u32),
            MacAddr([2, 1, b[0], b[1], b[2], b[3]]),
        )
    }

    /// The networks, workloads, tunnels, bridge entries and routes beyond the plain
    /// scenario's network 0.
    fn tables(self) -> Vec<TableOp> {
        let mut ops = Vec::new();
        if self == Self::PLAIN {
            return ops;
        }
        let vrf = |k: usize| VrfId(1 + k as u32);
        for k in 1..self.networks {
            ops.push(TableOp::UpsertVrf {
                id: vrf(k),
                name: format!("n{k}"),
                vni: Some(VNI + k as u32),
            });
            ops.push(workload(Self::workload(k), &format!("vm-n{k}"), vrf(k)));
        }
        for j in 0..self.vteps {
            let k = j % self.networks;
            let (nh, mac) = Self::tunnel(j);
            let remote = Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + j as u32);
            let encap = Encap::Vxlan {
                vni: VNI + k as u32,
            };
            ops.push(TableOp::UpsertNextHop(nh, tunnel(encap, remote)));
            ops.push(TableOp::AddBridge {
                vrf: vrf(k),
                mac,
                nh,
            });
            let host = Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + j as u32);
            ops.push(TableOp::AddRoute {
                vrf: vrf(k),
                prefix: IpPrefix::new(host.into(), 32).unwrap_or_else(|_| unreachable!()),
                nh,
            });
        }
        ops
    }

    /// Flow `i`'s workload interface and destination MAC: a vector's worth of flows
    /// per network in turn, each network's flows spread over its VTEPs.
    fn flow(self, i: usize) -> (InterfaceId, MacAddr) {
        let k = (i / VECTOR_SIZE) % self.networks;
        let tunnels = (self.vteps - k).div_ceil(self.networks);
        let j = k + self.networks * (i % tunnels);
        (Self::workload(k), Self::tunnel(j).1)
    }
}

/// A tunnel from this host's VTEP to `remote` over the uplink.
fn tunnel(encap: Encap, remote: Ipv4Addr) -> NextHop {
    NextHop::Tunnel(Tunnel {
        encap,
        underlay: UPLINK,
        src: LOCAL_VTEP.into(),
        dst: remote.into(),
        dst_mac: REMOTE_MAC,
        inner_dst: None,
    })
}

/// A workload interface of network `vrf`.
fn workload(id: InterfaceId, name: &str, vrf: VrfId) -> TableOp {
    TableOp::UpsertInterface(Interface {
        id,
        name: name.into(),
        kind: InterfaceKind::Workload,
        vrf: Some(vrf),
        mac: DEFAULT_ROUTER_MAC,
        addresses: vec![],
        mtu: 1500,
        policy: true,
        admin_up: true,
        memif: None,
    })
}

const WORKLOAD: InterfaceId = InterfaceId(1);
/// A second workload of the network, sending to the first (l2-local).
const WORKLOAD2: InterfaceId = InterfaceId(2);
const UPLINK: InterfaceId = InterfaceId(0);
const UPLINK_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x0a]);
const REMOTE_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x0b]);
const VM_MAC: MacAddr = MacAddr([2, 0, 0, 0, 1, 5]);
const REMOTE_VM_MAC: MacAddr = MacAddr([2, 0, 0, 0, 2, 6]);
const LOCAL_VTEP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const REMOTE_VTEP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const VNI: u32 = 100;

/// One network with a workload, an uplink, a VXLAN and an MPLS-over-UDP tunnel, routes
/// and bridge entries, and a policy of a few rules (which the slow path evaluates).
fn tables() -> Vec<TableOp> {
    let vrf = VrfId(1);
    let tunnel = |encap| tunnel(encap, REMOTE_VTEP);
    let rule = |protocol, port: u16, action| PolicyRule {
        protocol: Some(protocol),
        dst_ports: PortRange {
            first: port,
            last: port,
        },
        ..PolicyRule::matching_all(action)
    };
    let policy = Policy::new(vec![
        rule(ip_proto::TCP, 23, PolicyAction::Deny),
        rule(ip_proto::UDP, 53, PolicyAction::Deny),
        rule(ip_proto::TCP, 22, PolicyAction::Deny),
        PolicyRule {
            src: "10.0.0.0/8".parse().ok(),
            ..PolicyRule::matching_all(PolicyAction::Allow)
        },
    ])
    .unwrap_or_default();
    vec![
        TableOp::UpsertVrf {
            id: vrf,
            name: "red".into(),
            vni: Some(VNI),
        },
        TableOp::UpsertInterface(Interface {
            id: UPLINK,
            name: "uplink".into(),
            kind: InterfaceKind::Underlay,
            vrf: None,
            mac: UPLINK_MAC,
            addresses: vec![InterfaceAddress {
                addr: LOCAL_VTEP.into(),
                prefix_len: 24,
            }],
            mtu: 9000,
            policy: false,
            admin_up: true,
            memif: None,
        }),
        workload(WORKLOAD, "vm1", vrf),
        workload(WORKLOAD2, "vm2", vrf),
        TableOp::UpsertNextHop(
            NextHopId(1),
            NextHop::Interface {
                interface: WORKLOAD,
                dst_mac: VM_MAC,
            },
        ),
        TableOp::UpsertNextHop(NextHopId(2), tunnel(Encap::Vxlan { vni: VNI })),
        TableOp::UpsertNextHop(NextHopId(3), tunnel(Encap::MplsOverUdp { label: 1000 })),
        TableOp::AddBridge {
            vrf,
            mac: VM_MAC,
            nh: NextHopId(1),
        },
        TableOp::AddBridge {
            vrf,
            mac: REMOTE_VM_MAC,
            nh: NextHopId(2),
        },
        TableOp::AddRoute {
            vrf,
            prefix: "10.1.0.0/16".parse().unwrap_or_else(|_| unreachable!()),
            nh: NextHopId(1),
        },
        TableOp::AddRoute {
            vrf,
            prefix: "10.2.0.0/16".parse().unwrap_or_else(|_| unreachable!()),
            nh: NextHopId(3),
        },
        TableOp::SetPolicy {
            vrf,
            policy: Arc::new(policy),
        },
    ]
}

/// A 64-byte Ethernet/IPv4/UDP frame from the workload.
fn inner_frame(dst_mac: MacAddr, src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    crate::traffic::udp_frame((VM_MAC, dst_mac), (src, dst), (sport, dport), 64)
}

/// Flow `i`'s addresses and ports: 4096 source ports per address.
fn flow(i: usize) -> (Ipv4Addr, u16) {
    let host = (i / 4096) as u32;
    (
        Ipv4Addr::from(0x0a01_0000 + 10 + host),
        1024 + (i % 4096) as u16,
    )
}

/// The frames of a scenario, one per flow, each with the interface it arrives on.
fn frames(scenario: &str, flows: usize, scale: Scale) -> Option<Vec<(InterfaceId, Vec<u8>)>> {
    let build = |rx: InterfaceId, f: &dyn Fn(usize) -> Vec<u8>| {
        (0..flows).map(|i| (rx, f(i))).collect::<Vec<_>>()
    };
    Some(match scenario {
        "vxlan-l2-encap" if scale != Scale::PLAIN => (0..flows)
            .map(|i| {
                let (src, sport) = flow(i);
                let (rx, mac) = scale.flow(i);
                let dst = Ipv4Addr::new(10, 1, 200, 6);
                (rx, inner_frame(mac, src, dst, sport, 5000))
            })
            .collect(),
        "vxlan-l2-encap" => build(WORKLOAD, &|i| {
            let (src, sport) = flow(i);
            inner_frame(
                REMOTE_VM_MAC,
                src,
                Ipv4Addr::new(10, 1, 200, 6),
                sport,
                5000,
            )
        }),
        "mplsudp-l3-encap" => build(WORKLOAD, &|i| {
            let (src, sport) = flow(i);
            let dst = Ipv4Addr::new(10, 2, (i % 251) as u8, 9);
            inner_frame(DEFAULT_ROUTER_MAC, src, dst, sport, 5000)
        }),
        "vxlan-decap" => build(UPLINK, &|i| {
            let (src, sport) = flow(i);
            let inner = inner_frame(VM_MAC, src, Ipv4Addr::new(10, 1, 0, 5), sport, 5000);
            vxlan_frame(&inner, sport)
        }),
        "l2-local" => build(WORKLOAD2, &|i| {
            let (src, sport) = flow(i);
            let mut f = inner_frame(VM_MAC, src, Ipv4Addr::new(10, 1, 0, 5), sport, 5000);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 6]);
            f
        }),
        _ => return None,
    })
}

/// `inner` in VXLAN from the remote VTEP to us.
fn vxlan_frame(inner: &[u8], sport: u16) -> Vec<u8> {
    let mut f = crate::traffic::udp_frame(
        (REMOTE_MAC, UPLINK_MAC),
        (REMOTE_VTEP, LOCAL_VTEP),
        (0xc000 | sport, ovr_wire::udp_port::VXLAN),
        50 + inner.len(),
    );
    VxlanRepr { vni: VNI }.emit(&mut f[42..]);
    f[50..].copy_from_slice(inner);
    f
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

/// Sends `frames` in vectors (each from one interface), `count` packets from `start`,
/// cycling; returns packets transmitted (the sink's count).
fn pump(
    pipe: &mut Pipeline,
    st: &ForwardingState,
    frames: &[(InterfaceId, Vec<u8>)],
    start: usize,
    count: usize,
) -> u64 {
    let mut sent = 0u64;
    let mut at = start;
    let mut left = count;
    while left > 0 {
        let rx = frames[at].0;
        let n = (0..left.min(VECTOR_SIZE))
            .take_while(|k| frames[(at + k) % frames.len()].0 == rx)
            .count();
        let batch = (0..n).map(|k| frames[(at + k) % frames.len()].1.as_slice());
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
    let mut ops = tables();
    ops.extend(scale.tables());
    w.commit(ops).map_err(|e| e.to_string())?;
    let tables_bytes = resident_bytes()
        .zip(before)
        .map(|(a, b)| a.saturating_sub(b));
    let frames = frames(scenario, flows, scale).ok_or_else(|| {
        format!(
            "unknown scenario '{scenario}' (known: {})",
            SCENARIOS.join(", ")
        )
    })?;
    let settings = Settings {
        // Each flow is a pair: room for both directions, and a quarter more.
        flow_capacity: (flows * 2).max(1024) * 5 / 4,
        frames: 2 * VECTOR_SIZE,
        // The slow path's own rate is measured here, so it is not limited.
        setup_rate: None,
        established_path: !a.graph_only,
        huge_pages: !a.small_pages,
        ..Settings::default()
    };
    let mut pipe = Pipeline::new(settings);
    let guard = r.enter().ok_or("tables closed")?;
    let st = &*guard;
    // Slow path: every flow once.
    let t = Instant::now();
    pump(&mut pipe, st, &frames, 0, flows);
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
        forwarded += pump(&mut pipe, st, &frames, packets as usize % flows, round);
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
        println!(
            "{:<18} {:>9} {:>8} {:>8} {:>9} {:>14} {:>10}",
            "scenario", "flows", "Mpps", "ns/pkt", "CPU Mpps", "setup flows/s", "forwarded"
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
                println!("{v}");
            } else {
                println!(
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
                        println!("    {n:<18} {ns:>6.1} ns/pkt  {vec:>5.1} pkts/vector");
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
