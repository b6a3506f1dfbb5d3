//! ovrd: loads a configuration, opens its interfaces and forwards between them until
//! SIGTERM or SIGINT, then closes everything it opened and prints its counters.
#![forbid(unsafe_code)]

mod ports;

use clap::Parser;
use ovr_dataplane::Pipeline;
use ovr_io::{DriverKind, Preference};
use ovr_tables::state::ForwardingState;
use ports::Ports;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{error, info};

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
    /// Also serve the API on TCP (ADDR:PORT); requires --api-token-file.
    #[arg(long)]
    api_listen: Option<String>,
    /// The bearer token TCP clients must send.
    #[arg(long)]
    api_token_file: Option<PathBuf>,
    /// Packet I/O: AF_XDP (an XDP program on each interface hands frames to ovr through
    /// shared memory), AF_PACKET (raw sockets that also learn of checksum and
    /// segmentation offload), or auto: AF_PACKET for workloads and TAPs, whose senders
    /// may use offloads, AF_XDP for the underlay (AF_PACKET where AF_XDP cannot be set
    /// up). Forcing af-xdp is for workloads that send complete frames (tx offloads off).
    #[arg(long, value_enum, default_value_t = DriverArg::Auto)]
    driver: DriverArg,
    /// Frames read from an interface at a time.
    #[arg(long, default_value_t = 256)]
    batch: usize,
    /// Spin instead of sleeping in poll(2) when idle (lower latency, one busy core).
    #[arg(long)]
    busy_poll: bool,
    /// After traffic, keep polling without sleeping for this long (µs) before going back
    /// to poll(2): a reply that follows soon is picked up without a wakeup, while an idle
    /// ovrd still sleeps.
    #[arg(long, default_value_t = 50)]
    spin_us: u64,
    /// Pin the forwarding worker to this CPU (keeps its caches warm and its latency
    /// steady when other work shares the host).
    #[arg(long)]
    cpu: Option<usize>,
    /// Print the counters this often (seconds; 0: only at exit).
    #[arg(long, default_value_t = 0)]
    stats_every: u64,
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

/// How long an idle ovrd sleeps in poll(2) before looking at its stop flag again.
const IDLE_POLL_MS: i32 = 100;

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
    let agent = ovr_agent::server::start(&ovr_agent::server::Options {
        config: a.config.clone(),
        state: Some(a.state.clone()),
        socket: Some(a.api_socket.clone()),
        listen: a.api_listen.clone(),
        token_file: a.api_token_file.clone(),
    })
    .map_err(|e| e.to_string())?;
    let reader = agent.reader;
    let mut ports = {
        let st = reader.enter().ok_or("the tables are gone")?;
        Ports::open(&st, a.driver.into(), a.batch)?
    };
    if let Some(cpu) = a.cpu {
        let known = core_affinity::get_core_ids().unwrap_or_default();
        let core = known
            .into_iter()
            .find(|c| c.id == cpu)
            .ok_or_else(|| format!("--cpu {cpu}: no such CPU available to ovrd"))?;
        if !core_affinity::set_for_current(core) {
            return Err(format!("--cpu {cpu}: could not pin the worker"));
        }
        info!(cpu, "worker pinned");
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| e.to_string())?;
    }
    let mut pipe = Pipeline::new(agent.flows.dataplane());
    let start = Instant::now();
    let mut last_stats = Instant::now();
    info!(config = ?a.config, interfaces = ports.attached(), "forwarding");
    let spin = Duration::from_micros(a.spin_us);
    let mut last_traffic = Instant::now() - spin;
    while !stop.load(Ordering::Relaxed) {
        if !a.busy_poll && last_traffic.elapsed() >= spin {
            ports.wait(IDLE_POLL_MS)?;
        }
        let Some(guard) = reader.enter() else { break };
        let state = &*guard;
        pipe.cx.now = start.elapsed().as_nanos() as u64;
        let received = ports.recv(|id, vnet, frames| {
            if vnet {
                pipe.receive_offloaded(state, id, frames)
            } else {
                pipe.receive(state, id, frames)
            }
        });
        if received > 0 {
            last_traffic = Instant::now();
        } else {
            // Spinning with nothing to do: let the other threads on this core (on a small
            // host, the workloads and the kernel's own packet work) run first.
            std::thread::yield_now();
        }
        pipe.run(state);
        ovr_agent::worker::drain(&agent.requests, &mut pipe);
        pipe.drain_tx_batches(|iface, frames| ports.send(iface, frames));
        ports.maintain(state);
        if a.stats_every > 0 && last_stats.elapsed() >= Duration::from_secs(a.stats_every) {
            last_stats = Instant::now();
            info!("counters\n{}", snapshot(&pipe, state));
        }
    }
    info!("stopping: closing the interfaces");
    ports.close();
    let st = reader.enter().ok_or("the tables are gone")?;
    eprintln!("{COUNTERS_AT_EXIT}\n{}", snapshot(&pipe, &st));
    Ok(())
}

fn snapshot(pipe: &Pipeline, st: &ForwardingState) -> ovr_dataplane::counters::Snapshot {
    pipe.snapshot(|i| st.interface(i).map(|x| x.name.clone()))
}
