//! `ovrctl replay`: runs a configuration's pipeline over captured packets, offline.
//!
//! Input packets from all captures are merged in timestamp order (ties keep the order
//! of the command line, then of the file); runs of consecutive packets on one interface
//! form the vectors. The capture's timestamps are the pipeline's clock, so flow aging
//! replays as it happened. What each interface transmitted is written to
//! `OUT/IFNAME.pcap`, stamped with the time of the packet that caused it. Captures are
//! read by [`crate::capfile`]: records it leaves out (cut by the snapshot length, ...)
//! are counted per input under their reason, not replayed.

use crate::capfile;
use ovr_dataplane::Pipeline;
use ovr_graph::VECTOR_SIZE;
use ovr_tables::ids::InterfaceId;
use pcap_file::DataLink;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The configuration (YAML).
    #[arg(long)]
    pub config: PathBuf,
    /// Packets received on an interface: IFNAME=FILE.pcap (repeatable).
    #[arg(long = "pcap", value_name = "IFNAME=FILE", required = true, value_parser = parse_pcap_arg)]
    pub pcaps: Vec<(String, PathBuf)>,
    /// Directory for the output captures, one per transmitting interface.
    #[arg(long)]
    pub out: PathBuf,
    /// Print the counters as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Trace the first N packets through the nodes.
    #[arg(long, default_value_t = 0)]
    pub trace: u32,
    /// Most packets per vector (consecutive packets of one interface; 1: one at a time).
    #[arg(long, default_value_t = 256)]
    pub vector: usize,
}

/// Parses `IFNAME=FILE`.
pub fn parse_pcap_arg(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, file)) if !name.is_empty() && !file.is_empty() => {
            Ok((name.to_string(), PathBuf::from(file)))
        }
        _ => Err(format!("'{s}': expected IFNAME=FILE.pcap")),
    }
}

struct Input {
    time: Duration,
    iface: InterfaceId,
    data: Vec<u8>,
}

/// What was read of one `--pcap`: how many records, and those left out by reason.
struct Source {
    name: String,
    path: PathBuf,
    format: &'static str,
    records: usize,
    left_out: BTreeMap<&'static str, usize>,
}

/// The packets of every capture in time order, what each file held, and warnings.
type Inputs = (Vec<Input>, Vec<Source>, Vec<String>);

/// Reads every capture (capfile: frames without an Ethernet header are addressed to
/// the receiving interface's MAC); `id_of` gives an interface's id and MAC.
fn read_inputs(
    pcaps: &[(String, PathBuf)],
    id_of: impl Fn(&str) -> Option<(InterfaceId, [u8; 6])>,
) -> Result<Inputs, String> {
    let mut all = Vec::new();
    let mut sources = Vec::new();
    let mut warnings = Vec::new();
    for (name, path) in pcaps {
        let (iface, mac) = id_of(name).ok_or_else(|| {
            format!(
                "--pcap {name}={}: no interface named '{name}' in the configuration",
                path.display()
            )
        })?;
        let mut r = capfile::open(path, mac)?;
        let mut src = Source {
            name: name.clone(),
            path: path.clone(),
            format: r.format,
            records: 0,
            left_out: BTreeMap::new(),
        };
        for rec in r.by_ref() {
            src.records += 1;
            match rec.frame {
                Ok(f) => all.push(Input {
                    time: rec.time,
                    iface,
                    data: f.data,
                }),
                Err(s) => *src.left_out.entry(s.reason).or_default() += 1,
            }
        }
        warnings.append(&mut r.warnings);
        sources.push(src);
    }
    // Stable: equal timestamps keep command-line and file order.
    all.sort_by_key(|i| i.time);
    Ok((all, sources, warnings))
}

pub fn run(a: &Args) -> Result<(), String> {
    let ovr_config::Loaded {
        translation: t,
        writer: _writer, // held: readers see nothing once the writer is gone
        reader,
    } = ovr_config::load_tables(&a.config).map_err(|e| e.to_string())?;
    let names = &t.names;
    let guard = reader.enter().ok_or("tables closed")?;
    let state = &*guard;
    let (inputs, sources, warnings) = read_inputs(&a.pcaps, |n| {
        let id = names.interfaces.get(n).copied()?;
        Some((id, state.interface(id).map_or([0; 6], |i| i.mac.0)))
    })?;
    let mut pipe = Pipeline::new(t.flows.dataplane());
    pipe.graph_mut().trace_mut().add(a.trace);
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let mut outputs: BTreeMap<u32, PcapWriter<File>> = BTreeMap::new();
    let vector = a.vector.clamp(1, VECTOR_SIZE);
    let mut rest = &inputs[..];
    while let Some(first) = rest.first() {
        let n = rest
            .iter()
            .take(vector)
            .take_while(|i| i.iface == first.iface)
            .count();
        let (batch, tail) = rest.split_at(n);
        rest = tail;
        pipe.cx.now = batch[n - 1].time.as_nanos() as u64;
        pipe.receive(state, first.iface, batch.iter().map(|i| i.data.as_slice()));
        pipe.run(state);
        let time = batch[n - 1].time;
        let mut err = None;
        pipe.drain_tx(|iface, bytes| {
            if err.is_some() {
                return;
            }
            let w = match outputs.entry(iface.0) {
                std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::btree_map::Entry::Vacant(v) => {
                    match create_output(&a.out, names.interface_name(iface)) {
                        Ok(w) => v.insert(w),
                        Err(e) => {
                            err = Some(e);
                            return;
                        }
                    }
                }
            };
            let pkt = PcapPacket::new(time, bytes.len() as u32, bytes);
            if let Err(e) = w.write_packet(&pkt) {
                err = Some(e.to_string());
            }
        });
        if let Some(e) = err {
            return Err(e);
        }
    }
    let snap = pipe.snapshot(|i| names.interface_name(i).map(str::to_string));
    if a.json {
        let mut v = serde_json::to_value(&snap).map_err(|e| e.to_string())?;
        v["packets_in"] = inputs.len().into();
        v["inputs"] = sources
            .iter()
            .map(|s| {
                serde_json::json!({
                    "interface": s.name,
                    "file": s.path.display().to_string(),
                    "format": s.format,
                    "records": s.records,
                    "left_out": s.left_out,
                })
            })
            .collect();
        v["warnings"] = warnings.into();
        if a.trace > 0 {
            v["trace"] = pipe.graph().trace().to_string().into();
        }
        outln!("{v}");
    } else {
        for w in &warnings {
            eprintln!("ovrctl: warning: {w}");
        }
        for s in sources.iter().filter(|s| !s.left_out.is_empty()) {
            let why: Vec<String> = s.left_out.iter().map(|(r, n)| format!("{r} {n}")).collect();
            outln!(
                "{}={}: {} of {} records left out ({})",
                s.name,
                s.path.display(),
                s.left_out.values().sum::<usize>(),
                s.records,
                why.join(", ")
            );
        }
        outln!("{} packets replayed", inputs.len());
        out!("{snap}");
        if a.trace > 0 {
            outln!("trace");
            out!("{}", pipe.graph().trace());
        }
    }
    Ok(())
}

fn create_output(dir: &Path, name: Option<&str>) -> Result<PcapWriter<File>, String> {
    let name = name.unwrap_or("unknown");
    let path = dir.join(format!("{name}.pcap"));
    let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    PcapWriter::with_header(file, header).map_err(|e| format!("{}: {e}", path.display()))
}
