//! What the cluster says about itself: each host (its leased record and its report) and
//! the whole store (counts, keys the hosts rejected, values no agent would accept).

use super::Ctx;
use crate::api::{Failure, exit, show};
use ovr_cluster::keys::{Key, PREFIX, STATUS_PREFIX};
use ovr_cluster::model::{self, HostStatus, Value as Model};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The fields of each host in `cluster hosts --json` (null when unknown).
const HOST_FIELDS: &[&str] = &[
    "name",
    "alive",
    "vtep",
    "mac",
    "underlay",
    "version",
    "applied_revision",
    "lag",
    "rejected",
];
/// Its table (other fields go to "details").
const HOST_COLUMNS: &[&str] = &[
    "name",
    "alive",
    "vtep",
    "mac",
    "version",
    "applied_revision",
    "lag",
    "rejected",
];

/// A host's report, or why it cannot be read.
fn report(bytes: &[u8]) -> Result<HostStatus, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("not a valid report: {e}"))
}

/// Every host that has a record (alive: its lease holds it), a report (the last thing a
/// host that went left behind) or ports written for it (a host that never came): those
/// without a record are listed as not alive.
pub async fn hosts(c: &Ctx) -> Result<(), Failure> {
    let hosts_prefix = format!("{PREFIX}hosts/");
    let ports_prefix = format!("{PREFIX}ports/");
    let (_, records) = c.kvs(&hosts_prefix).await?;
    let (_, ports) = c.kvs(&ports_prefix).await?;
    let (revision, reports) = c.kvs(STATUS_PREFIX).await?;
    let mut rows: BTreeMap<String, Value> = BTreeMap::new();
    for kv in &records {
        let name = kv.key.trim_start_matches(&hosts_prefix).to_string();
        let row = match Key::parse(&kv.key).and_then(|k| model::parse(&k, &kv.value)) {
            Ok(Model::Host(h)) => json!({
                "name": name, "alive": true, "vtep": h.vtep, "mac": h.mac,
                "underlay": h.underlay, "version": h.version,
            }),
            Ok(_) => unreachable!("a key under hosts/ is a host's"),
            Err(e) => json!({ "name": name, "alive": true, "error": e }),
        };
        rows.insert(name, row);
    }
    for kv in &ports {
        if let Some((host, _)) = kv.key.trim_start_matches(&ports_prefix).split_once('/') {
            rows.entry(host.to_string())
                .or_insert_with(|| json!({ "name": host, "alive": false }));
        }
    }
    for kv in &reports {
        let name = kv.key.trim_start_matches(STATUS_PREFIX).to_string();
        let row = rows
            .entry(name.clone())
            .or_insert_with(|| json!({ "name": name, "alive": false }));
        match report(&kv.value) {
            Ok(s) => {
                row["applied_revision"] = s.applied_revision.into();
                row["lag"] = (revision - s.applied_revision).max(0).into();
                row["rejected"] = s.rejected_count.into();
            }
            Err(e) => row["report_error"] = e.into(),
        }
    }
    let list: Vec<Value> = rows
        .into_values()
        .map(|mut row| {
            for f in HOST_FIELDS {
                if row.get(f).is_none() {
                    row[f] = Value::Null;
                }
            }
            row
        })
        .collect();
    c.print(&Value::Array(list), |v| show::table(HOST_COLUMNS, v));
    Ok(())
}

/// Counts by kind, the keys hosts rejected (from their reports) and the keys whose
/// value (or name) no agent accepts, checked here. Any of those makes it fail with
/// `exit::UNHEALTHY` (after printing), so that a script or a probe sees it.
pub async fn status(c: &Ctx) -> Result<(), Failure> {
    let (_, all) = c.kvs(PREFIX).await?;
    let (revision, reports) = c.kvs(STATUS_PREFIX).await?;
    let mut counts: BTreeMap<&str, usize> = ["networks", "policies", "ports", "hosts", "endpoints"]
        .into_iter()
        .map(|k| (k, 0))
        .collect();
    let mut invalid = Vec::new();
    for kv in &all {
        match Key::parse(&kv.key).and_then(|k| model::parse(&k, &kv.value)) {
            Ok(v) => {
                let kind = match v {
                    Model::Network(_) => "networks",
                    Model::Policy(_) => "policies",
                    Model::Port(_) => "ports",
                    Model::Service(_) => "services",
                    Model::Chain(_) => "chains",
                    Model::Host(_) => "hosts",
                    Model::Endpoint(_) => "endpoints",
                };
                *counts.entry(kind).or_default() += 1;
            }
            Err(e) => invalid.push(json!({ "key": kv.key, "reason": e })),
        }
    }
    let mut rejected = Vec::new();
    for kv in &reports {
        let host = kv.key.trim_start_matches(STATUS_PREFIX);
        match report(&kv.value) {
            Ok(s) => {
                for (key, reason) in &s.rejected {
                    rejected.push(json!({ "host": host, "key": key, "reason": reason }));
                }
                let unlisted = s.rejected_count.saturating_sub(s.rejected.len());
                if unlisted > 0 {
                    let reason = format!("{unlisted} more not listed in the report");
                    rejected.push(json!({ "host": host, "key": null, "reason": reason }));
                }
            }
            Err(e) => invalid.push(json!({ "key": kv.key, "reason": e })),
        }
    }
    let v = json!({
        "endpoints": c.endpoints.urls,
        "revision": revision,
        "counts": counts,
        "rejected": rejected,
        "invalid": invalid,
    });
    c.print(&v, human_status);
    if rejected.is_empty() && invalid.is_empty() {
        return Ok(());
    }
    Err(Failure {
        status: exit::UNHEALTHY,
        message: format!(
            "{} key(s) rejected by hosts, {} invalid",
            rejected.len(),
            invalid.len()
        ),
    })
}

fn human_status(v: &Value) {
    outln!(
        "etcd       {} (revision {})",
        show::cell(&v["endpoints"]),
        v["revision"]
    );
    for (kind, n) in v["counts"].as_object().into_iter().flatten() {
        outln!("{kind:<10} {n}");
    }
    for (title, list, who) in [
        ("rejected by hosts", &v["rejected"], "host"),
        ("invalid", &v["invalid"], "key"),
    ] {
        let rows = list.as_array().map_or(&[][..], Vec::as_slice);
        if rows.is_empty() {
            outln!("{title}: none");
            continue;
        }
        outln!("{title}:");
        for r in rows {
            let key = if who == "host" {
                format!("{} {}", show::cell(&r["host"]), show::cell(&r["key"]))
            } else {
                show::cell(&r["key"])
            };
            outln!("  {key}: {}", show::cell(&r["reason"]));
        }
    }
}
