//! Every keyed collection holds each key once. Two entries with the same key would make
//! one table entry from two places: the second silently wins, and deleting either
//! leaves the model and the tables disagreeing. So a repeated key is refused, naming
//! both places (`routes[3]: duplicate of routes[1] (network red, prefix 10.0.0.0/24)`).
//! Names (interfaces, networks, tunnels, next hops) are checked as they are numbered
//! (`translate::number`).

use crate::ConfigError;
use crate::model::Config;
use crate::translate::R;
use std::collections::HashMap;
use std::hash::Hash;

/// A duplicate: `path` repeats the key first written at `first`.
pub(crate) fn duplicate(path: String, first: &str, what: &str) -> ConfigError {
    ConfigError::Duplicate {
        path,
        message: format!("duplicate of {first} ({what})"),
    }
}

/// Refuses the second of two items with the same key. `items`: (where, key); `path`
/// names a place (only for the message: a million routes are not formatted to be
/// checked); `what` describes a key.
fn unique<P: Copy, K: Hash + Eq>(
    items: impl Iterator<Item = (P, K)>,
    path: impl Fn(P) -> String,
    what: impl Fn(&K) -> String,
) -> R<()> {
    let mut seen: HashMap<K, P> = HashMap::new();
    for (at, key) in items {
        if let Some(first) = seen.get(&key) {
            return Err(duplicate(path(at), &path(*first), &what(&key)));
        }
        seen.insert(key, at);
    }
    Ok(())
}

/// Checks the keys of routes, bridge entries, labels, flood lists and workloads' peers.
pub(crate) fn check(c: &Config) -> R<()> {
    unique(
        c.routes
            .iter()
            .enumerate()
            .map(|(i, r)| (i, (r.network.as_str(), r.prefix))),
        |i| format!("routes[{i}]"),
        |(n, p)| format!("network {n}, prefix {p}"),
    )?;
    unique(
        c.bridge
            .iter()
            .enumerate()
            .map(|(i, b)| (i, (b.network.as_str(), b.mac))),
        |i| format!("bridge[{i}]"),
        |(n, m)| format!("network {n}, mac {m}"),
    )?;
    unique(
        c.labels.iter().enumerate().map(|(i, l)| (i, l.label)),
        |i| format!("labels[{i}]"),
        |l| format!("label {l}"),
    )?;
    for (i, n) in c.networks.iter().enumerate() {
        unique(
            n.flood.iter().enumerate().map(|(k, f)| (k, f.as_str())),
            |k| format!("networks[{i}].flood[{k}]"),
            |f| format!("next hop '{f}'"),
        )?;
    }
    // A workload's peer makes a host route per address and a bridge entry for its MAC:
    // two workloads of a network cannot claim the same address or MAC.
    let peers = || {
        c.interfaces
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((i, f.network.as_deref()?, f)))
            .filter(|(_, _, f)| f.peer_mac.is_some())
    };
    unique(
        peers().flat_map(|(i, net, f)| {
            f.peer_addresses
                .iter()
                .enumerate()
                .map(move |(k, a)| ((i, k), (net, *a)))
        }),
        |(i, k)| format!("interfaces[{i}].peer_addresses[{k}]"),
        |(n, a)| format!("network {n}, peer address {a}"),
    )?;
    unique(
        peers().filter_map(|(i, net, f)| Some((i, (net, f.peer_mac?)))),
        |i| format!("interfaces[{i}].peer_mac"),
        |(n, m)| format!("network {n}, peer mac {m}"),
    )
}
