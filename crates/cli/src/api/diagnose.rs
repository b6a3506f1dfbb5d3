//! `ovrctl trace` (the path and decisions of the next N packets) and `ovrctl capture`
//! (an interface's frames into a pcap file).

use super::{Conn, Failure, call, print, show};
use clap::Subcommand;
use serde_json::{Value, json};
use std::path::PathBuf;

#[derive(Subcommand, Clone)]
pub enum Trace {
    /// Trace the next N packets that arrive (on any interface).
    Add { packets: u32 },
    /// The traced packets: where each came in, every node with its decision, where
    /// it ended (the default).
    Show,
    /// Forget the traced packets and those still pending.
    Clear,
}

#[derive(Subcommand, Clone)]
pub enum Capture {
    /// Capture an interface's frames into a new pcap file (Wireshark, tshark, tcpdump
    /// read it). Both directions unless --rx or --tx.
    Start {
        interface: String,
        /// The file to create (it must not exist; a relative path is taken from here).
        file: PathBuf,
        /// Only frames received on the interface.
        #[arg(long, conflicts_with = "tx")]
        rx: bool,
        /// Only frames handed to the interface for sending.
        #[arg(long)]
        tx: bool,
        /// Stop after this many frames.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds.
        #[arg(long)]
        seconds: Option<u64>,
        /// Bytes kept of each frame (default all).
        #[arg(long)]
        snaplen: Option<u32>,
    },
    /// Captures, running and finished, with their counters (the default).
    List,
    /// Stop a capture (its file is flushed) and forget it: its final counters.
    Stop { id: u32 },
}

pub fn trace(action: Option<Trace>, c: &Conn) -> Result<(), Failure> {
    match action.unwrap_or(Trace::Show) {
        Trace::Add { packets } => {
            let v = call(
                c,
                "POST",
                "/api/v1/trace",
                Some(&json!({ "packets": packets })),
            )?;
            print(c, &v, |v| {
                outln!("tracing the next {} packets", v["pending"]);
            });
        }
        Trace::Show => {
            let v = call(c, "GET", "/api/v1/trace", None)?;
            print(c, &v, show_trace);
        }
        Trace::Clear => {
            let v = call(c, "DELETE", "/api/v1/trace", None)?;
            print(c, &v, |_| outln!("trace cleared"));
        }
    }
    Ok(())
}

fn show_trace(v: &Value) {
    let packets = v["packets"].as_array().cloned().unwrap_or_default();
    if packets.is_empty() {
        outln!("no packet traced yet");
    }
    for p in &packets {
        let from = p["rx_interface"]
            .as_str()
            .map_or_else(|| format!("if {}", p["rx_interface_id"]), str::to_string);
        outln!(
            "packet {} from {from}: {}",
            p["id"],
            p["fate"].as_str().unwrap_or("-")
        );
        for s in p["steps"].as_array().into_iter().flatten() {
            let next = s["next"]
                .as_str()
                .map_or_else(String::new, |n| format!(" -> {n}"));
            outln!(
                "  {:<17} {}{next}",
                s["node"].as_str().unwrap_or("?"),
                s["detail"].as_str().unwrap_or("")
            );
        }
    }
    let pending = v["pending"].as_u64().unwrap_or(0);
    if pending > 0 {
        outln!("({pending} more packets to trace)");
    }
    if v["full"] == json!(true) {
        outln!("(the trace is full: clear it to record more)");
    }
}

const CAPTURE_COLUMNS: &[&str] = &[
    "id",
    "interface",
    "direction",
    "state",
    "written",
    "dropped",
    "path",
];

pub fn capture(action: Option<Capture>, c: &Conn) -> Result<(), Failure> {
    match action.unwrap_or(Capture::List) {
        Capture::Start {
            interface,
            file,
            rx,
            tx,
            count,
            seconds,
            snaplen,
        } => {
            let file =
                std::path::absolute(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let direction = match (rx, tx) {
                (true, _) => "rx",
                (_, true) => "tx",
                _ => "both",
            };
            let mut body = json!({
                "interface": interface,
                "path": file.display().to_string(),
                "direction": direction,
            });
            for (k, v) in [("packets", count), ("seconds", seconds)] {
                if let Some(v) = v {
                    body[k] = json!(v);
                }
            }
            if let Some(l) = snaplen {
                body["snaplen"] = json!(l);
            }
            let v = call(c, "POST", "/api/v1/captures", Some(&body))?;
            print(c, &v, |v| {
                outln!(
                    "capture {} of {} ({}) into {}",
                    v["id"],
                    v["interface"],
                    v["direction"].as_str().unwrap_or("?"),
                    v["path"].as_str().unwrap_or("?")
                );
            });
        }
        Capture::List => {
            let v = call(c, "GET", "/api/v1/captures", None)?;
            print(c, &v, |v| show::table(CAPTURE_COLUMNS, v));
        }
        Capture::Stop { id } => {
            let v = call(c, "DELETE", &format!("/api/v1/captures/{id}"), None)?;
            print(c, &v, |v| {
                outln!(
                    "capture {} stopped: {} frames written to {}, {} dropped",
                    v["id"],
                    v["written"],
                    v["path"].as_str().unwrap_or("?"),
                    v["dropped"]
                );
            });
        }
    }
    Ok(())
}
