//! ovrctl: the operator's command line for ovr.
#![forbid(unsafe_code)]

mod bench_engine;
mod decode;
mod lab;
mod lpm_demo;
mod replay;
mod traffic;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ovrctl",
    version,
    about = "Operate and inspect ovr, the overlay virtual router"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show each packet of a pcap file as ovr's parsers see it: its layers, or the named
    /// reason the dataplane would drop it for.
    Decode {
        /// A pcap file of Ethernet frames.
        pcap: PathBuf,
    },
    /// Build an IPv4 FIB of random BGP-like prefixes and time lookups in it.
    LpmDemo {
        /// Number of prefixes.
        #[arg(long, default_value_t = 1_000_000)]
        prefixes: usize,
        /// Number of lookups to time.
        #[arg(long, default_value_t = 16_000_000)]
        lookups: usize,
    },
    /// A multi-host overlay on this machine: hosts and workloads in network namespaces,
    /// one ovrd per host.
    Lab {
        #[command(subcommand)]
        what: Lab,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: Bench,
    },
    /// Run a configuration's pipeline over captured packets and write what each
    /// interface would transmit (test a configuration offline).
    Replay {
        /// The configuration (YAML).
        #[arg(long)]
        config: PathBuf,
        /// Packets received on an interface: IFNAME=FILE.pcap (repeatable).
        #[arg(long = "pcap", value_name = "IFNAME=FILE", required = true, value_parser = replay::parse_pcap_arg)]
        pcaps: Vec<(String, PathBuf)>,
        /// Directory for the output captures, one per transmitting interface.
        #[arg(long)]
        out: PathBuf,
        /// Print the counters as one JSON object.
        #[arg(long)]
        json: bool,
        /// Trace the first N packets through the nodes.
        #[arg(long, default_value_t = 0)]
        trace: u32,
        /// Most packets per vector (consecutive packets of one interface).
        #[arg(long, default_value_t = 256)]
        vector: usize,
    },
}

#[derive(Subcommand)]
enum Lab {
    /// Build the lab and start an ovrd per host.
    Up {
        #[arg(long, default_value_t = 2)]
        hosts: usize,
        #[arg(long, default_value_t = 2)]
        tenants: usize,
        /// Workloads per host and tenant.
        #[arg(long, default_value_t = 1)]
        workloads: usize,
        /// How hosts carry tenant traffic to each other.
        #[arg(long, value_enum, default_value_t = lab::LabEncap::Vxlan)]
        encap: lab::LabEncap,
        /// Add a host without ovr (the kernel's bridge + vxlan, tenant 1) that ovr's
        /// hosts exchange traffic with.
        #[arg(long)]
        kernel_host: bool,
    },
    /// Hosts, their ovrd, and workloads with their addresses.
    Status,
    /// Run a command in a workload's (or host's) namespace: lab exec h1-t1-w1 -- ping 10.1.0.21
    Exec {
        workload: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        cmd: Vec<String>,
    },
    /// Stop every ovrd (printing its counters) and remove everything the lab made.
    Down,
}

#[derive(Subcommand)]
enum Bench {
    /// Send 64-byte (or --size) UDP frames on an interface as fast as it takes them.
    Gen(traffic::Gen),
    /// Count UDP datagrams delivered to a port.
    Sink {
        #[arg(long, default_value_t = 9000)]
        port: u16,
        #[arg(long, default_value_t = 4.0)]
        seconds: f64,
    },
    /// The pipeline on one core, without kernel I/O: Mpps and ns per packet by scenario
    /// and flow count, and the flow-setup rate.
    Engine {
        /// One scenario (vxlan-l2-encap, mplsudp-l3-encap, vxlan-decap); all by default.
        #[arg(long)]
        scenario: Option<String>,
        /// One flow count; 1K, 8K, 64K, 256K and 1M by default.
        #[arg(long)]
        flows: Option<usize>,
        /// Measured time per point.
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Also show each node's time per packet on the fast path.
        #[arg(long)]
        nodes: bool,
    },
}

/// ovrd lives next to ovrctl (both are built into the same target directory).
fn ovrd_path() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let ovrd = me.with_file_name("ovrd");
    if ovrd.exists() {
        Ok(ovrd)
    } else {
        Err(format!(
            "{} not found: build it (cargo build -p ovrd)",
            ovrd.display()
        ))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode { pcap } => decode::run(&pcap),
        Command::LpmDemo { prefixes, lookups } => lpm_demo::run(prefixes, lookups),
        Command::Lab { what } => match what {
            Lab::Up {
                hosts,
                tenants,
                workloads,
                encap,
                kernel_host,
            } => ovrd_path().and_then(|ovrd| {
                lab::up(
                    &lab::Up {
                        hosts,
                        tenants,
                        workloads,
                        encap,
                        kernel_host,
                    },
                    &ovrd,
                )
            }),
            Lab::Status => lab::status(),
            Lab::Exec { workload, cmd } => match lab::exec(&workload, &cmd) {
                Ok(0) => Ok(()),
                Ok(code) => return ExitCode::from(code.clamp(1, 255) as u8),
                Err(e) => Err(e),
            },
            Lab::Down => lab::down(),
        },
        Command::Bench {
            what: Bench::Gen(g),
        } => traffic::generate(&g),
        Command::Bench {
            what: Bench::Sink { port, seconds },
        } => traffic::sink(port, seconds),
        Command::Bench {
            what:
                Bench::Engine {
                    scenario,
                    flows,
                    seconds,
                    json,
                    nodes,
                },
        } => bench_engine::run(&bench_engine::Args {
            scenario,
            flows,
            seconds,
            json,
            nodes,
        }),
        Command::Replay {
            config,
            pcaps,
            out,
            json,
            trace,
            vector,
        } => replay::run(&replay::Args {
            config,
            pcaps,
            out,
            json,
            trace,
            vector,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ovrctl: {e}");
            ExitCode::FAILURE
        }
    }
}
