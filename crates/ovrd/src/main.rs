//! ovrd: loads a configuration, opens its interfaces and forwards between them until
//! SIGTERM or SIGINT, then closes everything it opened and prints its counters.
#![forbid(unsafe_code)]

use clap::Parser;
use ovr_dataplane::Pipeline;
use ovr_io::AfPacket;
use ovr_tables::ids::InterfaceId;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

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
    /// Frames read from an interface per system call.
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
    /// Print the counters this often (seconds; 0: only at exit).
    #[arg(long, default_value_t = 0)]
    stats_every: u64,
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
    let (reader, names) = (agent.reader, &agent.names);
    let mut drivers: Vec<(InterfaceId, AfPacket)> = Vec::new();
    for (name, id) in &names.interfaces {
        let d = AfPacket::open(name, a.batch).map_err(|e| e.to_string())?;
        info!(interface = %name, id = id.0, "attached (AF_PACKET)");
        drivers.push((*id, d));
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop)).map_err(|e| e.to_string())?;
    }
    let mut pipe = Pipeline::new(agent.flows.dataplane());
    let start = Instant::now();
    let mut last_stats = Instant::now();
    info!(config = ?a.config, interfaces = drivers.len(), "forwarding");
    let mut poller = ovr_io::Poller::new(drivers.iter().map(|(_, d)| d));
    let spin = Duration::from_micros(a.spin_us);
    let mut last_traffic = Instant::now() - spin;
    while !stop.load(Ordering::Relaxed) {
        if !a.busy_poll && last_traffic.elapsed() >= spin {
            poller
                .wait(IDLE_POLL_MS)
                .map_err(|e| format!("poll: {e}"))?;
        }
        let Some(guard) = reader.enter() else { break };
        let state = &*guard;
        pipe.cx.now = start.elapsed().as_nanos() as u64;
        let before: u64 = drivers.iter().map(|(_, d)| d.stats.rx_frames).sum();
        for (id, d) in &mut drivers {
            match d.recv() {
                Ok(frames) => pipe.receive(state, *id, frames),
                Err(e) => warn!("{e}"),
            }
        }
        if drivers.iter().map(|(_, d)| d.stats.rx_frames).sum::<u64>() > before {
            last_traffic = Instant::now();
        }
        pipe.run(state);
        ovr_agent::worker::drain(&agent.requests, &mut pipe);
        pipe.drain_tx_batches(|iface, frames| {
            if let Some((_, d)) = drivers.iter_mut().find(|(id, _)| *id == iface)
                && let Err(e) = d.send(frames)
            {
                warn!("{e}");
            }
        });
        if a.stats_every > 0 && last_stats.elapsed() >= Duration::from_secs(a.stats_every) {
            last_stats = Instant::now();
            info!("counters\n{}", snapshot(&pipe, names));
        }
    }
    info!("stopping: closing {} interfaces", drivers.len());
    for (_, d) in &drivers {
        info!(
            interface = d.name(),
            rx = d.stats.rx_frames,
            tx = d.stats.tx_frames,
            tx_dropped = d.stats.tx_dropped,
            rx_truncated = d.stats.rx_truncated,
            "closed"
        );
    }
    drop(drivers);
    eprintln!("{COUNTERS_AT_EXIT}\n{}", snapshot(&pipe, names));
    Ok(())
}

fn snapshot(pipe: &Pipeline, names: &ovr_config::Names) -> ovr_dataplane::counters::Snapshot {
    pipe.snapshot(|i| names.interface_name(i).map(str::to_string))
}
