//! ovrctl: the operator's command line for ovr.
#![forbid(unsafe_code)]

mod decode;
mod lpm_demo;

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Decode { pcap } => decode::run(&pcap),
        Command::LpmDemo { prefixes, lookups } => lpm_demo::run(prefixes, lookups),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ovrctl: {e}");
            ExitCode::FAILURE
        }
    }
}
