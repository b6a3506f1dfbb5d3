//! The counters in Prometheus' text exposition format (version 0.0.4).

use ovr_dataplane::counters::Snapshot;
use std::fmt::Write;

/// A label value with `\`, `"` and newlines escaped.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: impl core::fmt::Display) {
        let labels: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
            .collect();
        if labels.is_empty() {
            let _ = writeln!(self.0, "{name} {v}");
        } else {
            let _ = writeln!(self.0, "{name}{{{}}} {v}", labels.join(","));
        }
    }
}

/// Renders a snapshot (its interface names already filled in).
pub fn render(s: &Snapshot) -> String {
    let mut o = Out(String::new());
    type Field = fn(&ovr_dataplane::counters::InterfaceSnapshot) -> u64;
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
        o.family(name, "counter", help);
        for i in &s.interfaces {
            o.sample(name, &[("interface", &i.name)], f(i));
        }
    }
    o.family("ovr_drops_total", "counter", "Packets dropped, by reason");
    for (reason, n) in &s.drops {
        o.sample("ovr_drops_total", &[("reason", reason)], n);
    }
    let f = &s.flows;
    o.family(
        "ovr_flows_active",
        "gauge",
        "Flows in the flow table (each direction counts one)",
    );
    o.sample("ovr_flows_active", &[], f.active);
    o.family(
        "ovr_flows_created_total",
        "counter",
        "Flow pairs (or single denied flows) installed",
    );
    o.sample("ovr_flows_created_total", &[], f.created);
    o.family("ovr_flows_aged_total", "counter", "Flows removed by aging");
    o.sample("ovr_flows_aged_total", &[], f.aged);
    o.family(
        "ovr_flows_revalidated_total",
        "counter",
        "Cached flow decisions taken again after a table change",
    );
    o.sample("ovr_flows_revalidated_total", &[], f.revalidated);
    o.family(
        "ovr_flows_refused_total",
        "counter",
        "Flows not installed, by cause",
    );
    for (why, n) in [
        ("full", f.refused_full),
        ("bucket", f.refused_bucket),
        ("quota", f.refused_quota),
    ] {
        o.sample("ovr_flows_refused_total", &[("cause", why)], n);
    }
    o.family(
        "ovr_node_packets_total",
        "counter",
        "Packets processed by each graph node",
    );
    for n in &s.nodes {
        o.sample("ovr_node_packets_total", &[("node", n.name)], n.packets);
    }
    o.family(
        "ovr_node_vectors_total",
        "counter",
        "Vectors processed by each graph node",
    );
    for n in &s.nodes {
        o.sample("ovr_node_vectors_total", &[("node", n.name)], n.vectors);
    }
    o.family(
        "ovr_node_ns_per_packet",
        "gauge",
        "Average time per packet in each graph node (ns)",
    );
    for n in &s.nodes {
        o.sample(
            "ovr_node_ns_per_packet",
            &[("node", n.name)],
            format!("{:.1}", n.ns_per_packet),
        );
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
        o.family(name, "counter", help);
        o.sample(name, &[], v);
    }
    o.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use ovr_dataplane::context::OffloadCounters;
    use ovr_dataplane::counters::{FlowSnapshot, InterfaceSnapshot};

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
            nodes: vec![],
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
        };
        let t = render(&s);
        assert!(
            t.contains("ovr_interface_rx_packets_total{interface=\"a\\\"b\"} 3\n"),
            "{t}"
        );
        assert!(t.contains("ovr_drops_total{reason=\"ttl-expired\"} 2\n"));
        assert!(t.contains("ovr_flows_active 4\n"));
        assert!(t.contains("ovr_offload_segments_total 45\n"));
        assert!(t.contains("ovr_flows_refused_total{cause=\"quota\"} 5\n"));
        assert!(t.contains("# TYPE ovr_flows_aged_total counter\n"));
        // Every sample line is "name{labels} value" or "name value".
        for l in t.lines().filter(|l| !l.starts_with('#')) {
            assert!(l.contains(' '), "{l}");
            assert!(l.rsplit(' ').next().unwrap().parse::<f64>().is_ok(), "{l}");
        }
    }
}
