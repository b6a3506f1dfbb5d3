//! The counters in Prometheus' text exposition format (version 0.0.4).

use ovr_dataplane::counters::{InterfaceSnapshot, NodeSnapshot, Snapshot};
use std::fmt::Write;

/// A label value with `\`, `"` and newlines escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The text being written.
struct Out(String);

/// One sample: its label pairs and its value.
type Sample<'a> = (Vec<(&'a str, &'a str)>, String);

impl Out {
    /// A metric family: its HELP and TYPE lines, then one line per sample.
    fn family<'a>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = Sample<'a>>,
    ) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, v) in samples {
            if labels.is_empty() {
                let _ = writeln!(self.0, "{name} {v}");
            } else {
                let l: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
                    .collect();
                let _ = writeln!(self.0, "{name}{{{}}} {v}", l.join(","));
            }
        }
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, v: impl ToString) {
        self.family(name, kind, help, [(vec![], v.to_string())]);
    }
}

/// Unlabelled gauges (name, help, value), for what reports its state beside the
/// counters (the cluster member).
pub fn gauges<'a>(g: impl IntoIterator<Item = (&'a str, &'a str, i64)>) -> String {
    let mut o = Out(String::new());
    for (name, help, v) in g {
        o.single(name, "gauge", help, v);
    }
    o.0
}

/// Renders a snapshot (its interface names already filled in).
pub fn render(s: &Snapshot) -> String {
    let mut o = Out(String::new());
    type Field = fn(&InterfaceSnapshot) -> u64;
    let per_interface: [(&str, &str, Field); 4] = [
        ("ovr_interface_rx_packets_total", "Packets received", |i| {
            i.rx_packets
        }),
        ("ovr_interface_rx_bytes_total", "Bytes received", |i| {
            i.rx_bytes
        }),
        ("ovr_interface_tx_packets_total", "Packets sent", |i| {
            i.tx_packets
        }),
        ("ovr_interface_tx_bytes_total", "Bytes sent", |i| i.tx_bytes),
    ];
    for (name, help, f) in per_interface {
        let samples = s
            .interfaces
            .iter()
            .map(|i| (vec![("interface", i.name.as_str())], f(i).to_string()));
        o.family(name, "counter", help, samples);
    }
    let drops = s
        .drops
        .iter()
        .map(|(reason, n)| (vec![("reason", *reason)], n.to_string()));
    o.family(
        "ovr_drops_total",
        "counter",
        "Packets dropped, by reason",
        drops,
    );
    let f = &s.flows;
    let flows: [(&str, &str, &str, u64); 4] = [
        (
            "ovr_flows_active",
            "gauge",
            "Flows in the flow table (each direction counts one)",
            f.active as u64,
        ),
        (
            "ovr_flows_created_total",
            "counter",
            "Flow pairs (or single denied flows) installed",
            f.created,
        ),
        (
            "ovr_flows_aged_total",
            "counter",
            "Flows removed by aging",
            f.aged,
        ),
        (
            "ovr_flows_revalidated_total",
            "counter",
            "Cached flow decisions taken again after a table change",
            f.revalidated,
        ),
    ];
    for (name, kind, help, v) in flows {
        o.single(name, kind, help, v);
    }
    let refused = [
        ("full", f.refused_full),
        ("bucket", f.refused_bucket),
        ("quota", f.refused_quota),
    ]
    .map(|(why, n)| (vec![("cause", why)], n.to_string()));
    o.family(
        "ovr_flows_refused_total",
        "counter",
        "Flows not installed, by cause",
        refused,
    );
    type NodeField = fn(&NodeSnapshot) -> String;
    let per_node: [(&str, &str, &str, NodeField); 4] = [
        (
            "ovr_node_packets_total",
            "counter",
            "Packets processed by each graph node",
            |n| n.packets.to_string(),
        ),
        (
            "ovr_node_vectors_total",
            "counter",
            "Vectors processed by each graph node",
            |n| n.vectors.to_string(),
        ),
        (
            "ovr_node_seconds_total",
            "counter",
            "Time spent in each graph node (clock read once per vector)",
            |n| format!("{:.9}", n.nanos as f64 / 1e9),
        ),
        (
            "ovr_node_ns_per_packet",
            "gauge",
            "Average time per packet in each graph node since start (ns)",
            |n| format!("{:.1}", n.ns_per_packet),
        ),
    ];
    for (name, kind, help, f) in per_node {
        let samples = s.nodes.iter().map(|n| (vec![("node", n.name)], f(n)));
        o.family(name, kind, help, samples);
    }
    let off = &s.offload;
    for (name, help, v) in [
        (
            "ovr_offload_large_frames_total",
            "Frames larger than the MTU from offloading senders, cut into segments",
            off.large_frames,
        ),
        (
            "ovr_offload_segments_total",
            "Segments cut from large frames",
            off.segments,
        ),
        (
            "ovr_offload_checksums_total",
            "Transport checksums left to the NIC and finished by ovr",
            off.checksums,
        ),
    ] {
        o.single(name, "counter", help, v);
    }
    let fp = &s.fast_path;
    o.single(
        "ovr_fast_path_flows",
        "gauge",
        "Flows carried by the fast path below the pipeline now (ovrd --offload)",
        fp.flows,
    );
    for (name, help, v) in [
        (
            "ovr_fast_path_installed_total",
            "Fast-path entries installed (again after each table change)",
            fp.installed,
        ),
        (
            "ovr_fast_path_refused_total",
            "Flows the fast path cannot reproduce (they stay in user space)",
            fp.refused,
        ),
        (
            "ovr_fast_path_invalidations_total",
            "Fast-path generations started (table or interface changes)",
            fp.invalidations,
        ),
        (
            "ovr_fast_path_rechecks_total",
            "Table changes after which offloaded flows were re-checked (not invalidated)",
            fp.rechecks,
        ),
        (
            "ovr_fast_path_rechecked_kept_total",
            "Fast-path entries kept by a re-check (their flow's treatment was unchanged)",
            fp.rechecked_kept,
        ),
        (
            "ovr_fast_path_rechecked_removed_total",
            "Fast-path entries removed by a re-check (their flow's treatment changed)",
            fp.rechecked_removed,
        ),
        (
            "ovr_fast_path_recheck_skipped_total",
            "Fast-path entries a re-check left alone (the change touched nothing they read)",
            fp.recheck_skipped,
        ),
        (
            "ovr_fast_path_redirect_failed_total",
            "Frames the fast path redirected to an egress that dropped them",
            fp.redirect_failed,
        ),
        (
            "ovr_fast_path_errors_total",
            "Errors from the fast path's backend",
            fp.errors,
        ),
        (
            "ovr_fast_path_packets_total",
            "Packets the fast path carried (also in the flows' and interfaces' counts)",
            fp.packets,
        ),
        (
            "ovr_fast_path_bytes_total",
            "Bytes the fast path carried",
            fp.bytes,
        ),
    ] {
        o.single(name, "counter", help, v);
    }
    o.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovr_dataplane::context::{FastPathCounters, OffloadCounters};
    use ovr_dataplane::counters::FlowSnapshot;

    #[test]
    fn renders_families_and_escapes_labels() {
        let s = Snapshot {
            interfaces: vec![InterfaceSnapshot {
                id: 0,
                name: "a\"b".into(),
                rx_packets: 3,
                rx_bytes: 180,
                tx_packets: 1,
                tx_bytes: 60,
            }],
            nodes: vec![NodeSnapshot {
                name: "flow",
                vectors: 2,
                packets: 10,
                nanos: 1_500,
                average_vector: 5.0,
                ns_per_packet: 150.0,
            }],
            drops: [("ttl-expired", 2u64)].into_iter().collect(),
            flows: FlowSnapshot {
                active: 4,
                created: 2,
                revalidated: 0,
                aged: 1,
                refused_full: 0,
                refused_bucket: 0,
                refused_quota: 5,
            },
            offload: OffloadCounters {
                large_frames: 1,
                segments: 45,
                checksums: 0,
            },
            fast_path: FastPathCounters {
                flows: 3,
                packets: 900,
                ..FastPathCounters::default()
            },
        };
        let t = render(&s);
        assert!(
            t.contains("ovr_interface_rx_packets_total{interface=\"a\\\"b\"} 3\n"),
            "{t}"
        );
        assert!(t.contains("ovr_drops_total{reason=\"ttl-expired\"} 2\n"));
        assert!(t.contains("ovr_flows_active 4\n"));
        assert!(t.contains("ovr_offload_segments_total 45\n"));
        assert!(t.contains("ovr_fast_path_flows 3\n"));
        assert!(t.contains("ovr_fast_path_packets_total 900\n"));
        assert!(t.contains("ovr_flows_refused_total{cause=\"quota\"} 5\n"));
        assert!(t.contains("# TYPE ovr_flows_aged_total counter\n"));
        assert!(t.contains("ovr_node_packets_total{node=\"flow\"} 10\n"));
        assert!(t.contains("ovr_node_seconds_total{node=\"flow\"} 0.000001500\n"));
        assert!(t.contains("ovr_node_ns_per_packet{node=\"flow\"} 150.0\n"));
        // Every family is announced once, before its samples.
        let families: Vec<&str> = t.lines().filter(|l| l.starts_with("# TYPE")).collect();
        let mut unique = families.clone();
        unique.dedup();
        assert_eq!(families.len(), unique.len());
        assert_eq!(families.len(), 29, "{t}");
        // Every sample line is "name{labels} value" or "name value".
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.contains(' '), "{l}");
            assert!(l.rsplit(' ').next().unwrap().parse::<f64>().is_ok(), "{l}");
        }
    }
}
