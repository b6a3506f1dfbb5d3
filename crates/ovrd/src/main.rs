//! ovrd: loads a configuration, opens its interfaces and forwards between them until
//! SIGTERM or SIGINT, then closes everything it opened and prints its counters. The
//! fast path (`--offload`) is pinned and left forwarding at exit unless
//! `--detach-fast-path-on-exit`; a restarted ovrd adopts it (docs/io.md, "Restarts").
#![forbid(unsafe_code)]

mod cluster;
mod evpn;
mod handoff;
mod pacer;
mod ports;
mod worker;

use clap::Parser;
use ovr_dataplane::Pipeline;
use ovr_io::{DriverKind, Preference};
use ports::{Attached, Ports, Share};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};
use worker::Worker;

#[derive(Parser)]
#[command(
    name = "ovrd",
    version,
    about = "ovr, the overlay virtual router: the daemon"
)]
struct Args {
    /// The configuration (YAML); its interface names are the host's interfaces. How it
    /// combines with the saved state: docs/agent.md.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The desired configuration as last changed through the API (saved on every change).
    #[arg(long, default_value = "/var/lib/ovr/state.json")]
    state: PathBuf,
    /// The API's Unix socket (mode 0600).
    #[arg(long, default_value = "/run/ovr/ovrd.sock")]
    api_socket: PathBuf,
    /// Also serve the API on TCP (ADDR:PORT); requires --api-token-file. Plain HTTP:
    /// bind it to a local or management address, or put TLS in front.
    #[arg(long)]
    api_listen: Option<String>,
    /// The bearer token TCP clients must send: at least 32 bytes, in a file with no
    /// group or other permission (ovrd refuses to start otherwise).
    #[arg(long)]
    api_token_file: Option<PathBuf>,
    /// Packet I/O: AF_XDP (an XDP program on each interface hands frames to ovr through
    /// shared memory), AF_PACKET (raw sockets that also learn of checksum and
    /// segmentation offload), or auto: AF_PACKET, and with `--offload xdp` AF_XDP for the
    /// underlay (AF_PACKET where AF_XDP cannot be set up). af-xdp everywhere reads small
    /// frames fastest but keeps TCP to a packet per segment; forcing it is for workloads
    /// that send complete frames (tx offloads off).
    #[arg(long, value_enum, default_value_t = DriverArg::Auto)]
    driver: DriverArg,
    /// Frames read from an interface at a time.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Spin instead of sleeping in poll(2) when idle (lower latency, one busy core).
    #[arg(long)]
    busy_poll: bool,
    /// After traffic, keep polling without sleeping for this long (µs) before going back
    /// to poll(2): frames that follow within it are picked up without a wakeup (on a
    /// busy host a wakeup can take milliseconds), while an idle ovrd still sleeps. Traffic
    /// steadier than this keeps the worker's CPU busy (it yields to other threads between
    /// looks); 0 sleeps at once (docs/io.md, "Waiting for frames").
    #[arg(long, default_value_t = 500)]
    spin_us: u64,
    /// Keep looking after traffic (--spin-us) only while frames arrive at least this fast
    /// (frames per second, per worker); slower traffic, the worker sleeps as soon as it
    /// has nothing to do and each frame wakes it, so that moderate traffic does not keep
    /// a core busy (adaptive, as VPP's rx-mode adaptive; docs/io.md). 0: always look for
    /// --spin-us after traffic.
    #[arg(long, default_value_t = 50_000)]
    spin_from_pps: u64,
    /// Forwarding workers (threads). Each receives from its share of the interfaces and
    /// owns the flows that hash to it; frames of another worker's flows are handed over.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    workers: u16,
    /// Pin the workers to these CPUs, one each in order (keeps their caches warm and
    /// their latency steady when other work shares the host; an unpinned worker that
    /// moves between CPUs can reorder a flow's frames on a veth, docs/io.md "Workers").
    #[arg(long, value_delimiter = ',')]
    cpu: Vec<usize>,
    /// The fast path for established flows: a program on every interface forwards the
    /// flows the pipeline has described, without waking ovrd (docs/io.md). xdp: the
    /// highest rate of small packets; needs XDP on every interface and NAPI on the peers
    /// it redirects to. tc: large (GSO) packets cross whole and checksums left to the
    /// NIC stay so, as in the kernel's own overlay (TCP at the kernel's rate); needs
    /// Linux 6.6 (TCX), reads the interfaces with AF_PACKET. off: user space only.
    #[arg(long, value_enum, default_value_t = OffloadArg::Off)]
    offload: OffloadArg,
    /// Where the fast path's program, maps and links are pinned (on a BPF filesystem; one
    /// directory per ovrd), so that established flows keep forwarding while ovrd is down
    /// (a restart, an upgrade, a crash) and the next ovrd adopts them. If the directory's
    /// parent is not on a bpffs, one is mounted there.
    #[arg(long, default_value = "/sys/fs/bpf/ovr")]
    fast_path_pin_dir: PathBuf,
    /// At SIGTERM or SIGINT, take the fast path down with ovrd (programs detached, maps
    /// and pins removed) instead of leaving it forwarding for the next ovrd.
    #[arg(long)]
    detach_fast_path_on_exit: bool,
    /// Join a cluster: etcd's client URLs (comma-separated). The configuration then comes
    /// from the cluster's intent (docs/cluster.md); --config holds only what is this
    /// host's own: its underlay interface and flow settings. The API's configuration
    /// changes are refused (409): write intent with `ovrctl cluster`.
    #[arg(long, value_delimiter = ',')]
    etcd: Vec<String>,
    /// This host's name in the cluster [default: the machine's host name].
    #[arg(long)]
    host_name: Option<String>,
    /// How long (seconds) after this ovrd stops its peers withdraw it (its etcd lease).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i64).range(2..=3600))]
    etcd_lease_ttl: i64,
    /// etcd over TLS: the CA that signed the members' certificates (PEM).
    #[arg(long)]
    etcd_ca: Option<PathBuf>,
    /// etcd over TLS: this host's client certificate and key (PEM), where etcd requires
    /// client certificates.
    #[arg(long, requires = "etcd_key")]
    etcd_cert: Option<PathBuf>,
    #[arg(long, requires = "etcd_cert")]
    etcd_key: Option<PathBuf>,
    /// Speak BGP EVPN through the gobgpd whose API is at this URL
    /// (http://127.0.0.1:50051): ovrd configures it and advertises this host's networks
    /// and workloads (docs/bgp.md).
    #[arg(long)]
    bgp: Option<String>,
    /// This host's AS (route targets are AS:VNI, so at most 65535).
    #[arg(long, default_value_t = 65000)]
    bgp_asn: u32,
    /// A BGP peer (a route reflector, a switch): ADDRESS or ADDRESS:PORT; repeat for more.
    #[arg(long)]
    bgp_peer: Vec<String>,
    /// The TCP port BGP listens on (-1: only connect out).
    #[arg(long, default_value_t = 179, allow_negative_numbers = true)]
    bgp_listen_port: i32,
    /// The address BGP speaks from and listens on: one the host's kernel owns (not the
    /// VTEP address, which is ovrd's) [default: any].
    #[arg(long)]
    bgp_address: Option<std::net::IpAddr>,
    /// Where the other hosts' reachability comes from: etcd (the cluster's endpoints),
    /// evpn (routes learnt through --bgp; etcd, if any, gives intent only) or both (an
    /// endpoint both know is installed once) [default: both with --etcd and --bgp, else
    /// the one given] (docs/bgp.md).
    #[arg(long, value_enum)]
    reach: Option<ReachArg>,
    /// Print the counters this often (seconds; 0: only at exit).
    #[arg(long, default_value_t = 0)]
    stats_every: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, clap::ValueEnum)]
enum ReachArg {
    Etcd,
    Evpn,
    Both,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum OffloadArg {
    Off,
    Xdp,
    Tc,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum DriverArg {
    Auto,
    AfXdp,
    AfPacket,
}

impl From<DriverArg> for Preference {
    fn from(d: DriverArg) -> Self {
        match d {
            DriverArg::Auto => Preference::Auto,
            DriverArg::AfXdp => Preference::Only(DriverKind::AfXdp),
            DriverArg::AfPacket => Preference::Only(DriverKind::AfPacket),
        }
    }
}

/// The line before the counters ovrd prints when it stops (the lab looks for it).
const COUNTERS_AT_EXIT: &str = "== counters at exit";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            error!("{e}");
            ExitCode::from(2)
        }
    }
}

fn run(a: &Args) -> Result<(), String> {
    let n = usize::from(a.workers);
    if !a.cpu.is_empty() && a.cpu.len() != n {
        return Err(format!(
            "--cpu names {} CPUs for {n} workers: give one per worker",
            a.cpu.len()
        ));
    }
    let cores = a
        .cpu
        .iter()
        .map(|cpu| {
            let known = core_affinity::get_core_ids().unwrap_or_default();
            known
                .into_iter()
                .find(|c| c.id == *cpu)
                .ok_or_else(|| format!("--cpu {cpu}: no such CPU available to ovrd"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let reach = reach(a)?;
    let join = cluster_settings(a, reach)?;
    let speaker = bgp_settings(a)?;
    let agent = ovr_agent::server::start(&ovr_agent::server::Options {
        config: a.config.clone(),
        state: Some(a.state.clone()),
        socket: Some(a.api_socket.clone()),
        listen: a.api_listen.clone(),
        token_file: a.api_token_file.clone(),
        workers: n,
    })
    .map_err(|e| e.to_string())?;
    let reader = agent.reader;
    let api = agent.api;
    let app = agent.state;
    app.report_links(std::sync::Arc::new(memif_links));
    app.follow_peer_links(std::sync::Arc::new(ovr_io::memif::connected));
    let learning = match reach {
        ReachArg::Etcd => None,
        ReachArg::Evpn => Some(evpn::learn::Learning::new(&app, evpn::learn::Source::Evpn)),
        ReachArg::Both => Some(evpn::learn::Learning::new(&app, evpn::learn::Source::Both)),
    };
    let in_cluster = join.is_some();
    let mut handoffs: Vec<Option<_>> = if n > 1 {
        handoff::mailboxes(n)
            .map_err(|e| format!("worker mailboxes: {e}"))?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| e.to_string())?;
    }
    let options = worker::Options {
        keep_fast_path: !a.detach_fast_path_on_exit,
        pacing: pacer::Pacing {
            busy_poll: a.busy_poll,
            spin: Duration::from_micros(a.spin_us),
            spin_from_pps: a.spin_from_pps,
        },
        stats_every: (a.stats_every > 0).then(|| Duration::from_secs(a.stats_every)),
    };
    // One program and one set of maps for the whole ovrd: each worker attaches it to the
    // interfaces it receives from and owns a fast path over it for its own flows.
    let hook = match a.offload {
        OffloadArg::Xdp => Some(ovr_offload::bpf::Hook::Xdp),
        OffloadArg::Tc => Some(ovr_offload::bpf::Hook::Tc),
        OffloadArg::Off => None,
    };
    // The kernel fast path learns flows from the metadata of transmitted packets;
    // without it nothing reads them (`Settings::tx_observed`).
    let settings = ovr_dataplane::Settings {
        tx_observed: hook.is_some(),
        ..per_worker(agent.flows.dataplane(), n)
    };
    if hook == Some(ovr_offload::bpf::Hook::Tc) && matches!(a.driver, DriverArg::AfXdp) {
        return Err(
            "--offload tc reads the interfaces with AF_PACKET (served after TC); \
                    it cannot be combined with --driver af-xdp"
                .into(),
        );
    }
    if hook.is_none() {
        let dir = &a.fast_path_pin_dir;
        match ovr_offload::pin::remove_left(dir) {
            Ok(true) => info!(
                ?dir,
                "the fast path an earlier ovrd left pinned is removed (this one runs without)"
            ),
            Ok(false) => {}
            // Another ovrd (with a fast path) uses the directory: not this one's to remove.
            Err(e) => warn!("{e}"),
        }
    }
    let program = hook
        .map(|h| ovr_offload::bpf::Bpf::load_pinned(h, &a.fast_path_pin_dir, agent.flows.capacity))
        .transpose()
        .map_err(|e| e.to_string())?;
    let generations = match &program {
        Some(x) => fast_path_record(x, agent.resumed)?,
        None => ovr_offload::Shared::default(),
    };
    let start = Instant::now();
    let readers = reader.factory();
    let attached = Attached::new(n);
    // Each worker opens its interfaces on its own thread (drivers stay on the thread
    // that made them) and says how it went before forwarding.
    let (opened, results) = std::sync::mpsc::channel::<Result<usize, String>>();
    let snapshots = std::thread::scope(|scope| {
        let mut threads = Vec::with_capacity(n);
        for (index, requests) in agent.requests.into_iter().enumerate() {
            let handoff = handoffs[index].take();
            let core = cores.get(index).copied();
            let (readers, stop, options, settings) = (&readers, &*stop, &options, &settings);
            let program = program.clone();
            let generations = generations.clone();
            let opened = opened.clone();
            let (pref, batch) = (a.driver.into(), a.batch);
            let attached = attached.clone();
            let probes = app.probes().clone();
            let t = std::thread::Builder::new()
                .name(format!("ovr-worker-{index}"))
                .spawn_scoped(scope, move || {
                    let reader = readers.reader();
                    let share = Share { index, count: n };
                    let worker = pin(core, index).and_then(|()| {
                        let st = reader.enter().ok_or("the tables are gone")?;
                        // Woken by another worker's frames, and by the API's requests.
                        let extra = handoff
                            .iter()
                            .map(|(m, _)| m.fd())
                            .chain([requests.fd()])
                            .collect();
                        let fast = program
                            .clone()
                            .map(|x| ovr_offload::FastPath::sharing(x, generations));
                        let mut pipe = Pipeline::new(*settings);
                        // Every worker takes the answers to health probes; the first
                        // sends them.
                        pipe.share_probes(probes, index == 0);
                        Ok(Worker {
                            share,
                            ports: Ports::open(&st, pref, batch, share, extra, program, attached)?,
                            pipe,
                            requests,
                            handoff,
                            fast,
                        })
                    });
                    let worker = match worker {
                        Ok(w) => {
                            let flows = &w.pipe.cx.flows;
                            let (capacity, pages) = (flows.capacity(), flows.pages());
                            info!(worker = index, capacity, ?pages, "flow table");
                            let _ = opened.send(Ok(w.ports.attached()));
                            w
                        }
                        Err(e) => {
                            let _ = opened.send(Err(e.clone()));
                            return Err(e);
                        }
                    };
                    let r = worker.run(&reader, options, start, stop);
                    // One worker failing stops them all.
                    stop.store(true, Ordering::Relaxed);
                    r
                })
                .map_err(|e| format!("worker thread: {e}"))?;
            threads.push(t);
        }
        drop(opened);
        let mut interfaces = 0;
        let mut failed = None;
        for r in results.iter().take(n) {
            match r {
                Ok(k) => interfaces += k,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failed.get_or_insert(e);
                }
            }
        }
        if failed.is_none() {
            if let Some(x) = &program {
                let gone = x.release_unclaimed();
                if !gone.is_empty() {
                    info!(ifindexes = ?gone, "fast path: let go of interfaces no longer here");
                }
            }
            // Forwarding with it: now the state is saved, the API served, and the
            // cluster joined (what it installs finds the workers running).
            let served = api
                .serve()
                .map_err(|e| e.to_string())
                .and_then(|()| match join {
                    Some((endpoints, settings)) => cluster::join(
                        endpoints,
                        settings,
                        &app,
                        attached.clone(),
                        learning.clone(),
                    ),
                    None => Ok(()),
                })
                .and_then(|()| match speaker {
                    Some(s) => evpn::start(s, &app, attached.clone(), learning.clone(), in_cluster),
                    None => Ok(()),
                });
            match served {
                Ok(()) => info!(config = ?a.config, interfaces, workers = n, "forwarding"),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failed = Some(e.to_string());
                }
            }
        }
        let done = threads
            .into_iter()
            .map(|t| t.join().map_err(|_| "a worker panicked".to_string())?)
            .collect::<Result<Vec<_>, String>>();
        match failed {
            Some(e) => Err(e),
            None => done,
        }
    })?;
    match &program {
        Some(x) if a.detach_fast_path_on_exit => {
            x.remove_pins();
            info!("stopped: every interface let go, the fast path detached");
        }
        Some(x) => info!(
            pins = ?x.pinned().map(|(d, _)| d),
            "stopped: every interface let go; the fast path stays, forwarding the flows it has"
        ),
        None => info!("stopped: every interface let go"),
    }
    let mut total = snapshots.into_iter();
    let mut sum = total.next().ok_or("no worker")?;
    for s in total {
        sum.merge(s);
    }
    // The fast path's counters are in the sum; its program's are the whole ovrd's.
    let program = program
        .as_ref()
        .map(|x| format!("fast path {}\n", worker::program_line(x)))
        .unwrap_or_default();
    eprintln!("{COUNTERS_AT_EXIT}\n{sum}{program}");
    Ok(())
}

/// With --bgp: the speaker's settings.
fn bgp_settings(a: &Args) -> Result<Option<evpn::Settings>, String> {
    let Some(url) = &a.bgp else {
        return Ok(None);
    };
    let peers = a
        .bgp_peer
        .iter()
        .map(|p| evpn::peer(p, a.bgp_asn))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(evpn::Settings {
        url: url.clone(),
        asn: a.bgp_asn,
        listen_port: a.bgp_listen_port,
        local: a.bgp_address,
        peers,
    }))
}

/// Where remote reachability comes from: --reach, checked against --etcd and --bgp.
fn reach(a: &Args) -> Result<ReachArg, String> {
    let (etcd, bgp) = (!a.etcd.is_empty(), a.bgp.is_some());
    let r = match a.reach {
        Some(r) => r,
        None if etcd && bgp => ReachArg::Both,
        None if bgp => ReachArg::Evpn,
        None => ReachArg::Etcd,
    };
    match r {
        ReachArg::Evpn | ReachArg::Both if !bgp => {
            Err(format!("--reach {r:?}: learning from BGP needs --bgp").to_lowercase())
        }
        ReachArg::Both if !etcd => Err("--reach both: the cluster's endpoints need --etcd".into()),
        _ => Ok(r),
    }
}

/// With --etcd: how to reach etcd and who this host is (its base configuration read
/// from --config).
fn cluster_settings(
    a: &Args,
    reach: ReachArg,
) -> Result<Option<(ovr_cluster::etcd::Endpoints, ovr_cluster::member::Settings)>, String> {
    if a.etcd.is_empty() {
        return Ok(None);
    }
    let path = a
        .config
        .as_ref()
        .ok_or("--etcd needs --config: the host's own configuration (its underlay interface)")?;
    let base = ovr_config::Config::load(path).map_err(|e| e.to_string())?;
    let host = match &a.host_name {
        Some(h) => h.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_err(|e| format!("the host name (give --host-name): {e}"))?
            .trim()
            .to_string(),
    };
    ovr_cluster::keys::check_name(&host).map_err(|e| format!("--host-name: {e}"))?;
    let endpoints = ovr_cluster::etcd::Endpoints {
        urls: a.etcd.clone(),
        ca: a.etcd_ca.clone(),
        cert: a.etcd_cert.clone(),
        key: a.etcd_key.clone(),
    };
    let settings = ovr_cluster::member::Settings {
        host,
        base,
        ttl_s: a.etcd_lease_ttl,
        version: env!("CARGO_PKG_VERSION").to_string(),
        endpoints: reach != ReachArg::Evpn,
    };
    Ok(Some((endpoints, settings)))
}

/// What the workers' fast paths share, continuing a fast path an earlier ovrd left
/// pinned (`resumed`: the tables are the ones it left, see `ovr_offload::adopt`).
fn fast_path_record(
    x: &ovr_offload::bpf::Bpf,
    resumed: bool,
) -> Result<ovr_offload::Shared, String> {
    if let Some((dir, true)) = x.pinned() {
        tracing::warn!(
            dir = %dir.display(),
            "the bpffs for the fast path's pins was mounted in ovrd's own mount namespace \
             (ip netns exec?): they go with ovrd; mount one there beforehand to keep them"
        );
    }
    let Some(generation) = x.adopted() else {
        return Ok(ovr_offload::Shared::default());
    };
    let entries = x.entries().map_err(|e| e.to_string())?;
    info!(
        generation,
        entries = entries.len(),
        resumed,
        "fast path adopted from the previous ovrd{}",
        if resumed {
            ""
        } else {
            " (new tables: its entries go stale)"
        }
    );
    Ok(ovr_offload::Shared::adopting(generation, entries, resumed))
}

/// Pins the calling worker thread to `core`, if given.
fn pin(core: Option<core_affinity::CoreId>, worker: usize) -> Result<(), String> {
    let Some(core) = core else { return Ok(()) };
    if !core_affinity::set_for_current(core) {
        return Err(format!("--cpu {}: could not pin worker {worker}", core.id));
    }
    info!(worker, cpu = core.id, "worker pinned");
    Ok(())
}

/// A worker's share of the flow settings: the table, each network's quota and each
/// interface's setup rate are the daemon's, split evenly (a flow lives in one worker).
fn per_worker(s: ovr_dataplane::Settings, n: usize) -> ovr_dataplane::Settings {
    ovr_dataplane::Settings {
        flow_capacity: s.flow_capacity.div_ceil(n),
        network_quota: s.network_quota.map(|q| q.div_ceil(n as u32)),
        setup_rate: s.setup_rate.map(|r| r.div_ceil(n as u32)),
        shards: n as u32,
        ..s
    }
}

/// The memif links the workers hold, for `GET /api/v1/links`.
fn memif_links() -> serde_json::Value {
    use ovr_io::memif::Role;
    let links: Vec<serde_json::Value> = ovr_io::memif::links()
        .into_iter()
        .map(|l| {
            let s = &l.status;
            serde_json::json!({
                "name": l.name,
                "kind": "memif",
                "role": match l.role { Role::Server => "server", Role::Client => "client" },
                "socket": l.socket,
                "id": l.id,
                "state": s.state.name(),
                "peer_name": s.peer_name,
                "peer_interface": s.peer_interface,
                "version": s.version,
                "last_reason": s.last_reason,
                "connects": s.connects,
                "disconnects": s.disconnects,
                "queues": { "rx": s.queues.0, "tx": s.queues.1 },
                "bad_descriptors": l.bad_descriptors.iter().copied().collect::<std::collections::BTreeMap<_, _>>(),
                "rx_queues": l.rx_queues.iter().map(|q| serde_json::json!({ "frames": q.frames, "worker": q.reader })).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::Value::Array(links)
}
