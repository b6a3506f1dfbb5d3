//! ovrctl: the operator's command line for ovr.
#![forbid(unsafe_code)]

#[macro_use]
mod stdout;
mod api;
mod bench_engine;
mod capfile;
mod cluster;
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
    about = "Operate and inspect ovr, the overlay virtual router",
    after_help = "Exit status: 0 done; 1 refused or failed (the message names the field); 2 usage; \
3 ovrd is not running; 4 permission denied; 5 not found; 6 ovrd's worker did not answer. \
With --json, a failure is one JSON object on stderr: {\"error\": MESSAGE, \"code\": STATUS}."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    conn: api::Conn,
    #[command(flatten)]
    etcd: cluster::EtcdArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Show each packet of a pcap file as ovr's parsers see it: its layers, or the named
    /// reason the dataplane would drop it for.
    Decode {
        /// A pcap or pcapng file: Ethernet, raw IP or Linux cooked (SLL, SLL2) frames.
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
        #[command(flatten)]
        place: lab::Place,
        #[command(subcommand)]
        what: Lab,
    },
    /// The cluster's intent and state in etcd: networks, ports, policies, hosts, status.
    Cluster {
        #[command(subcommand)]
        what: cluster::Cluster,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        what: Bench,
    },
    /// Run a configuration's pipeline over captured packets and write what each
    /// interface would transmit (test a configuration offline).
    Replay(replay::Args),
    /// Interfaces (the vRouter's vif) of the running ovrd: list, show, add, set, del.
    Interfaces {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// Virtual networks (VRF + VNI); also `vrfs`.
    #[command(visible_alias = "vrfs")]
    Networks {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// Tunnels to remote VTEPs.
    Tunnels {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// Next hops, ECMP composites included.
    Nexthops {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// Routes (keyed by NETWORK PREFIX).
    Routes {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// Bridge (MAC) entries (keyed by NETWORK MAC).
    Bridge {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// MPLS labels.
    Labels {
        #[command(subcommand)]
        action: Option<api::Objects>,
    },
    /// Policies, one per network.
    Policies {
        #[command(subcommand)]
        action: Option<api::Policies>,
    },
    /// The flow table, with per-flow counters (or --delete).
    Flows {
        #[command(flatten)]
        filter: api::FlowArgs,
    },
    /// Counters per interface, per node, per drop reason, and flows.
    Counters,
    /// Drops by reason.
    Dropstats,
    /// Service chains: functions, instances, health, sessions and packets per instance.
    Chains,
    /// BGP EVPN through ovrd's speaker (ovrd --bgp): neighbors, or routes in and out.
    Bgp {
        #[command(subcommand)]
        what: api::Bgp,
    },
    /// Apply a JSON file of changes ({"changes": [...]}) all-or-nothing.
    Batch { file: PathBuf },
    /// The whole desired configuration (JSON).
    Config,
    /// The table ids of interfaces, networks and next hops (JSON; flows refer to them).
    Ids,
    /// The packet trace: the path and decisions of the next N packets.
    Trace {
        #[command(subcommand)]
        action: Option<api::Trace>,
    },
    /// Packet captures of an interface into pcap files.
    Capture {
        #[command(subcommand)]
        action: Option<api::Capture>,
    },
}

#[derive(Subcommand)]
enum Lab {
    /// Build the lab and start an ovrd per host.
    Up(lab::Up),
    /// Hosts, their ovrd, and workloads with their addresses.
    Status,
    /// Run a command in a workload's (or host's) namespace: lab exec h1-t1-w1 -- ping 10.1.0.21
    Exec {
        workload: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// Restart one host's ovrd with the same arguments (SIGTERM, or nothing if it is not
    /// running, then start): its fast path keeps forwarding in between, and the new
    /// ovrd adopts it.
    Restart { host: String },
    /// Stop every ovrd (printing its counters) and etcd, and remove everything the lab made.
    Down,
    /// Workloads that come and go while a cluster lab runs (the port's intent in etcd).
    Workload {
        #[command(subcommand)]
        what: lab::WorkloadCmd,
    },
}

#[derive(Subcommand)]
enum Bench {
    /// Send UDP frames (64 bytes to 1518 or IMIX, many flows) stamped with a sequence
    /// number and the send time, as fast as the interface takes them or at --rate.
    Gen(traffic::Gen),
    /// Receive the generator's frames on an interface: count, rate, one-way latency.
    Sink(traffic::Sink),
    /// The pipeline on one core, without kernel I/O: Mpps and ns per packet by scenario
    /// and flow count, and the flow-setup rate.
    Engine(bench_engine::Args),
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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // A usage error under --json is JSON too (help and version are not errors).
        Err(e) if e.use_stderr() && json_in_args() => {
            // clap's message: its first paragraph, without "error: " and the usage.
            let text = e.to_string();
            let lines: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            let message = lines.join(" ").trim_start_matches("error: ").to_string();
            let f = api::Failure::usage(message);
            print_failure(true, &f);
            return ExitCode::from(f.status);
        }
        Err(e) => e.exit(),
    };
    let json = wants_json(&cli);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            print_failure(json, &f);
            ExitCode::from(f.status)
        }
    }
}

/// Whether --json is among the arguments (before a `--`), for errors found while
/// parsing them.
fn json_in_args() -> bool {
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// Whether the command asked for JSON: the global --json, or a verb's own.
fn wants_json(cli: &Cli) -> bool {
    cli.conn.json
        || matches!(&cli.command, Command::Replay(a) if a.json)
        || matches!(&cli.command, Command::Bench { what: Bench::Engine(a) } if a.json)
}

/// A failure on stderr: a line of text, or with --json one object
/// `{"error": MESSAGE, "code": STATUS}` (the status is also the exit status).
fn print_failure(json: bool, f: &api::Failure) {
    if f.message.is_empty() {
        return; // `lab exec`: the command's own status, passed on silently
    }
    if json {
        eprintln!(
            "{}",
            serde_json::json!({ "error": f.message, "code": f.status })
        );
    } else {
        eprintln!("ovrctl: {}", f.message);
    }
}

fn run(cli: Cli) -> Result<(), api::Failure> {
    let json = wants_json(&cli);
    let conn = &cli.conn;
    let local = match cli.command {
        Command::Decode { pcap } => decode::run(&pcap, json),
        Command::LpmDemo { prefixes, lookups } => lpm_demo::run(prefixes, lookups, json),
        Command::Lab { place, what } => match what {
            Lab::Up(up) => {
                up.check().map_err(api::Failure::usage)?;
                ovrd_path()
                    .and_then(|ovrd| lab::up(&place, &up, &ovrd, json))
                    .and_then(|()| {
                        if json {
                            lab::status(&place, true)
                        } else {
                            Ok(())
                        }
                    })
            }
            Lab::Status => lab::status(&place, json),
            Lab::Exec { workload, cmd } => match lab::exec(&place, &workload, &cmd) {
                Ok(0) => Ok(()),
                Ok(code) => {
                    // The command's own status, passed on silently.
                    return Err(api::Failure {
                        status: code.clamp(1, 255) as u8,
                        message: String::new(),
                    });
                }
                Err(e) => Err(e),
            },
            Lab::Restart { host } => lab::restart(&place, &host),
            Lab::Down => lab::down(&place, json),
            Lab::Workload { what } => lab::workload(&place, &what),
        },
        Command::Cluster { what } => return cluster::run(&cli.etcd, what, json),
        Command::Bench {
            what: Bench::Gen(g),
        } => traffic::generate(&g),
        Command::Bench {
            what: Bench::Sink(s),
        } => traffic::sink(&s),
        Command::Bench {
            what: Bench::Engine(mut a),
        } => {
            a.json = json;
            bench_engine::run(&a)
        }
        Command::Replay(mut a) => {
            a.json = json;
            replay::run(&a)
        }
        Command::Interfaces { action } => return api::objects(&api::INTERFACES, action, conn),
        Command::Networks { action } => return api::objects(&api::NETWORKS, action, conn),
        Command::Tunnels { action } => return api::objects(&api::TUNNELS, action, conn),
        Command::Nexthops { action } => return api::objects(&api::NEXTHOPS, action, conn),
        Command::Routes { action } => return api::objects(&api::ROUTES, action, conn),
        Command::Bridge { action } => return api::objects(&api::BRIDGE, action, conn),
        Command::Labels { action } => return api::objects(&api::LABELS, action, conn),
        Command::Policies { action } => return api::policies(action, conn),
        Command::Flows { filter } => return api::flows(&filter, conn),
        Command::Counters => return api::counters(conn),
        Command::Dropstats => return api::dropstats(conn),
        Command::Chains => return api::chains(conn),
        Command::Bgp { what } => return api::bgp(what, conn),
        Command::Batch { file } => return api::batch(&file, conn),
        Command::Config => return api::config(conn),
        Command::Ids => return api::ids(conn),
        Command::Trace { action } => return api::trace(action, conn),
        Command::Capture { action } => return api::capture(action, conn),
    };
    // Commands that do not talk to ovrd fail with a message and status 1.
    local.map_err(api::Failure::from)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
