//! Human output of the API's answers: aligned tables and field lists.

use serde_json::Value;

/// A value in a cell: lists joined by commas, nothing as "-".
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "-".into(),
        Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// Rows under a header, each column as wide as its widest cell.
fn aligned(header: &[String], rows: &[Vec<String>]) {
    let mut w: Vec<usize> = header.iter().map(String::len).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |r: &[String]| {
        let cells: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = w[i]))
            .collect();
        outln!("{}", cells.join("  ").trim_end());
    };
    line(header);
    for r in rows {
        line(r);
    }
}

/// A list of objects: the kind's columns, then any other field set, as details.
pub fn table(columns: &[&str], v: &Value) {
    let items = v.as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        outln!("(none)");
        return;
    }
    let mut header: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    header.push("details".into());
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|o| {
            let mut r: Vec<String> = columns.iter().map(|c| cell(&o[*c])).collect();
            let details: Vec<String> = o
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, v)| {
                    !columns.contains(&k.as_str()) && !v.is_null() && v != &&Value::Array(vec![])
                })
                .map(|(k, v)| format!("{k}={}", cell(v)))
                .collect();
            r.push(details.join(" "));
            r
        })
        .collect();
    aligned(&header, &rows);
}

/// One object, a field per line.
pub fn object(v: &Value) {
    for (k, v) in v.as_object().into_iter().flatten() {
        outln!("{k:<16} {}", cell(v));
    }
}

pub fn applied(v: &Value) {
    outln!("ok ({} table changes)", v["table_changes"]);
}

pub fn policies(v: &Value) {
    for p in v.as_array().into_iter().flatten() {
        let name = cell(&p["network"]);
        match p["rules"].as_array() {
            None => outln!("{name}: default (allow within the network, deny between networks)"),
            Some(rules) => {
                outln!("{name}:");
                for (i, r) in rules.iter().enumerate() {
                    let fields: Vec<String> = r
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(k, v)| *k != "action" && !v.is_null())
                        .map(|(k, v)| format!("{k}={}", cell(v)))
                        .collect();
                    outln!("  {i:>3} {:<6} {}", cell(&r["action"]), fields.join(" "));
                }
            }
        }
    }
}

pub fn flows(v: &Value) {
    let items = v["flows"].as_array().cloned().unwrap_or_default();
    let header: Vec<String> = [
        "id",
        "network",
        "source",
        "destination",
        "proto",
        "action",
        "nexthop",
        "packets",
        "bytes",
        "idle ms",
        "fast path",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let ep = |a: &Value, p: &Value| {
        let a = cell(a);
        if a.contains(':') {
            format!("[{a}]:{}", cell(p))
        } else {
            format!("{a}:{}", cell(p))
        }
    };
    let rows: Vec<Vec<String>> = items
        .iter()
        .map(|f| {
            let action = match f["drop_reason"].as_str() {
                Some(r) => format!("drop ({r})"),
                None => cell(&f["action"]),
            };
            let nh = if f["nexthop_name"].is_null() {
                cell(&f["nexthop"])
            } else {
                cell(&f["nexthop_name"])
            };
            vec![
                cell(&f["id"]),
                if f["network"].is_null() {
                    cell(&f["vrf"])
                } else {
                    cell(&f["network"])
                },
                ep(&f["src"], &f["src_port"]),
                ep(&f["dst"], &f["dst_port"]),
                cell(&f["protocol"]),
                action,
                nh,
                cell(&f["packets"]),
                cell(&f["bytes"]),
                cell(&f["idle_ms"]),
                if f["offloaded"].as_bool() == Some(true) {
                    "yes"
                } else {
                    "-"
                }
                .to_string(),
            ]
        })
        .collect();
    aligned(&header, &rows);
    outln!(
        "{} shown, {} matched, {} active",
        items.len(),
        v["matched"],
        v["active"]
    );
}

pub fn drops(v: &Value) {
    let m = v.as_object().cloned().unwrap_or_default();
    if m.is_empty() {
        outln!("no drops");
        return;
    }
    let rows: Vec<Vec<String>> = m.iter().map(|(k, n)| vec![k.clone(), cell(n)]).collect();
    aligned(&["reason".into(), "packets".into()], &rows);
}

pub fn counters(v: &Value) {
    outln!("interfaces");
    let ifs: Vec<Vec<String>> = v["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| {
            ["name", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes"]
                .iter()
                .map(|k| cell(&i[*k]))
                .collect()
        })
        .collect();
    aligned(
        &["name", "rx pkts", "rx bytes", "tx pkts", "tx bytes"].map(String::from),
        &ifs,
    );
    outln!("\nnodes");
    let nodes: Vec<Vec<String>> = v["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            vec![
                cell(&n["name"]),
                cell(&n["vectors"]),
                cell(&n["packets"]),
                format!("{:.1}", n["average_vector"].as_f64().unwrap_or(0.0)),
                format!("{:.1}", n["ns_per_packet"].as_f64().unwrap_or(0.0)),
            ]
        })
        .collect();
    aligned(
        &["name", "vectors", "packets", "pkts/vec", "ns/pkt"].map(String::from),
        &nodes,
    );
    outln!("\ndrops");
    drops(&v["drops"]);
    let f = &v["flows"];
    outln!(
        "\nflows: {} active, {} created, {} revalidated, {} aged, refused {} full / {} bucket / {} quota",
        f["active"],
        f["created"],
        f["revalidated"],
        f["aged"],
        f["refused_full"],
        f["refused_bucket"],
        f["refused_quota"]
    );
    // Only with a fast path below the pipeline (ovrd --offload).
    let fp = &v["fast_path"];
    if fp["installed"].as_u64().unwrap_or(0) + fp["refused"].as_u64().unwrap_or(0) > 0 {
        outln!(
            "fast path: {} flows (installed {}, refused {}, removed {}, invalidations {}, \
             rechecks {} (kept {}, removed {}), errors {}, redirect_failed {}), carried {} \
             packets {} bytes",
            fp["flows"],
            fp["installed"],
            fp["refused"],
            fp["removed"],
            fp["invalidations"],
            fp["rechecks"],
            fp["rechecked_kept"],
            fp["rechecked_removed"],
            fp["errors"],
            fp["redirect_failed"],
            fp["packets"],
            fp["bytes"]
        );
    }
}
