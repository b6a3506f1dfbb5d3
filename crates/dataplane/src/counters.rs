//! A snapshot of a pipeline's counters: per interface, per node, per drop reason and for
//! flows, printable as tables or serialisable (JSON for scripts, later Prometheus).

use crate::context::OffloadCounters;
use crate::drop::DropReason;
use crate::pipeline::Pipeline;
use ovr_tables::ids::InterfaceId;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, Serialize)]
pub struct InterfaceSnapshot {
    pub id: u32,
    pub name: String,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeSnapshot {
    pub name: &'static str,
    pub vectors: u64,
    pub packets: u64,
    /// Time spent in the node (the clock is read once per vector).
    pub nanos: u64,
    pub average_vector: f64,
    pub ns_per_packet: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowSnapshot {
    pub active: usize,
    pub created: u64,
    pub revalidated: u64,
    pub aged: u64,
    pub refused_full: u64,
    pub refused_bucket: u64,
    pub refused_quota: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub interfaces: Vec<InterfaceSnapshot>,
    pub nodes: Vec<NodeSnapshot>,
    /// Drops by reason name (reasons with none left out).
    pub drops: BTreeMap<&'static str, u64>,
    pub flows: FlowSnapshot,
    pub offload: OffloadCounters,
}

impl Pipeline {
    /// The counters now; `name` gives interfaces their names.
    pub fn snapshot(&self, name: impl Fn(InterfaceId) -> Option<String>) -> Snapshot {
        let cx = &self.cx;
        let interfaces = cx
            .interfaces
            .iter()
            .enumerate()
            .filter(|(_, c)| c.rx_packets + c.tx_packets > 0)
            .map(|(i, c)| InterfaceSnapshot {
                id: i as u32,
                name: name(InterfaceId(i as u32)).unwrap_or_else(|| format!("if{i}")),
                rx_packets: c.rx_packets,
                rx_bytes: c.rx_bytes,
                tx_packets: c.tx_packets,
                tx_bytes: c.tx_bytes,
            })
            .collect();
        let nodes = self
            .graph()
            .stats()
            .filter(|(_, s)| s.vectors > 0)
            .map(|(name, s)| NodeSnapshot {
                name,
                vectors: s.vectors,
                packets: s.packets,
                nanos: s.nanos,
                average_vector: s.average_vector(),
                ns_per_packet: s.nanos_per_packet(),
            })
            .collect();
        let drops = DropReason::all()
            .zip(cx.drops.iter())
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| (r.name(), *n))
            .collect();
        let fs = cx.flows.stats();
        Snapshot {
            interfaces,
            nodes,
            drops,
            flows: FlowSnapshot {
                active: cx.flows.len(),
                created: cx.flow_counters.created,
                revalidated: cx.flow_counters.revalidated,
                aged: cx.flow_counters.aged,
                refused_full: fs.refused_full,
                refused_bucket: fs.refused_bucket,
                refused_quota: fs.refused_quota,
            },
            offload: cx.offload_counters,
        }
    }
}

impl fmt::Display for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "interfaces")?;
        writeln!(
            f,
            "  {:<16} {:>10} {:>12} {:>10} {:>12}",
            "name", "rx pkts", "rx bytes", "tx pkts", "tx bytes"
        )?;
        for i in &self.interfaces {
            writeln!(
                f,
                "  {:<16} {:>10} {:>12} {:>10} {:>12}",
                i.name, i.rx_packets, i.rx_bytes, i.tx_packets, i.tx_bytes
            )?;
        }
        writeln!(f, "nodes")?;
        writeln!(
            f,
            "  {:<16} {:>10} {:>10} {:>8} {:>10}",
            "name", "vectors", "packets", "pkts/vec", "ns/pkt"
        )?;
        for n in &self.nodes {
            writeln!(
                f,
                "  {:<16} {:>10} {:>10} {:>8.1} {:>10.1}",
                n.name, n.vectors, n.packets, n.average_vector, n.ns_per_packet
            )?;
        }
        writeln!(f, "drops")?;
        if self.drops.is_empty() {
            writeln!(f, "  none")?;
        }
        for (r, n) in &self.drops {
            writeln!(f, "  {r:<28} {n:>10}")?;
        }
        let fl = &self.flows;
        writeln!(
            f,
            "flows: {} active, {} created, {} revalidated, {} aged, refused {} full / {} bucket / {} quota",
            fl.active,
            fl.created,
            fl.revalidated,
            fl.aged,
            fl.refused_full,
            fl.refused_bucket,
            fl.refused_quota
        )?;
        let o = &self.offload;
        writeln!(
            f,
            "offload: {} large frames cut into {} segments, {} checksums finished",
            o.large_frames, o.segments, o.checksums
        )
    }
}
