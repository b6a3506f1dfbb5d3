//! A snapshot of a pipeline's counters: per interface, per node, per drop reason and for
//! flows, printable as tables or serialisable (JSON for scripts, later Prometheus).

use crate::context::{FastPathCounters, OffloadCounters};
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
    /// The fast path below the pipeline, if there is one (all zero if not).
    pub fast_path: FastPathCounters,
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
            fast_path: cx.fast_path,
        }
    }
}

impl Snapshot {
    /// Adds another worker's counters to these (interfaces by id, nodes by name).
    pub fn merge(&mut self, other: Snapshot) {
        // Destructured whole: a field added to Snapshot must be merged here too.
        let Snapshot {
            interfaces,
            nodes,
            drops,
            flows,
            offload,
            fast_path,
        } = other;
        for i in interfaces {
            match self.interfaces.iter_mut().find(|m| m.id == i.id) {
                Some(m) => {
                    m.rx_packets += i.rx_packets;
                    m.rx_bytes += i.rx_bytes;
                    m.tx_packets += i.tx_packets;
                    m.tx_bytes += i.tx_bytes;
                }
                None => self.interfaces.push(i),
            }
        }
        self.interfaces.sort_by_key(|i| i.id);
        for n in nodes {
            match self.nodes.iter_mut().find(|m| m.name == n.name) {
                Some(m) => {
                    m.vectors += n.vectors;
                    m.packets += n.packets;
                    m.nanos += n.nanos;
                    m.average_vector = m.packets as f64 / m.vectors.max(1) as f64;
                    m.ns_per_packet = m.nanos as f64 / m.packets.max(1) as f64;
                }
                None => self.nodes.push(n),
            }
        }
        for (r, n) in drops {
            *self.drops.entry(r).or_default() += n;
        }
        let (a, b) = (&mut self.flows, flows);
        a.active += b.active;
        a.created += b.created;
        a.revalidated += b.revalidated;
        a.aged += b.aged;
        a.refused_full += b.refused_full;
        a.refused_bucket += b.refused_bucket;
        a.refused_quota += b.refused_quota;
        let o = &mut self.offload;
        o.large_frames += offload.large_frames;
        o.segments += offload.segments;
        o.checksums += offload.checksums;
        self.fast_path.merge(&fast_path);
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
        )?;
        if self.fast_path != FastPathCounters::default() {
            writeln!(f, "fast path: {}", self.fast_path)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(rx: u64, node_packets: u64, ns: u64, drops: u64) -> Snapshot {
        Snapshot {
            interfaces: vec![InterfaceSnapshot {
                id: 1,
                name: "vm1".into(),
                rx_packets: rx,
                rx_bytes: rx * 100,
                tx_packets: 0,
                tx_bytes: 0,
            }],
            nodes: vec![NodeSnapshot {
                name: "ip-input",
                vectors: 1,
                packets: node_packets,
                average_vector: node_packets as f64,
                nanos: ns * node_packets,
                ns_per_packet: ns as f64,
            }],
            drops: [("no_route", drops)].into_iter().collect(),
            flows: FlowSnapshot {
                active: 2,
                created: 1,
                revalidated: 0,
                aged: 0,
                refused_full: 0,
                refused_bucket: 0,
                refused_quota: 0,
            },
            offload: OffloadCounters::default(),
            fast_path: FastPathCounters {
                flows: 1,
                packets: rx,
                ..FastPathCounters::default()
            },
        }
    }

    #[test]
    fn workers_counters_add_up_and_node_times_are_weighted_by_packets() {
        let mut a = snap(10, 30, 10, 1);
        let mut b = snap(5, 10, 50, 2);
        b.interfaces[0].id = 2;
        b.interfaces.push(InterfaceSnapshot {
            id: 1,
            ..b.interfaces[0].clone()
        });
        a.merge(b);
        assert_eq!(a.interfaces.len(), 2);
        assert_eq!((a.interfaces[0].id, a.interfaces[0].rx_packets), (1, 15));
        assert_eq!((a.interfaces[1].id, a.interfaces[1].rx_packets), (2, 5));
        let n = &a.nodes[0];
        assert_eq!((n.vectors, n.packets, n.nanos), (2, 40, 800));
        assert_eq!(n.average_vector, 20.0);
        assert_eq!(n.ns_per_packet, (30.0 * 10.0 + 10.0 * 50.0) / 40.0);
        assert_eq!(a.drops["no_route"], 3);
        assert_eq!((a.flows.active, a.flows.created), (4, 2));
        assert_eq!((a.fast_path.flows, a.fast_path.packets), (2, 15));
        assert!(a.to_string().contains("fast path: flows 2 "), "{a}");
    }
}
