//! Who refers to an object: deleting one still in use is refused with the referrer
//! named, rather than with whatever the translation would trip over first.

use crate::change::Key;
use ovr_config::model::{Config, NextHopKindConfig};

/// The first object that refers to `key`, described with its place in the document.
pub fn referrer(c: &Config, key: &Key) -> Option<String> {
    match key {
        Key::Network { name } => network(c, name),
        Key::Interface { name } => interface(c, name),
        Key::Tunnel { name } => c
            .nexthops
            .iter()
            .position(|n| n.tunnel.as_ref() == Some(name))
            .map(|i| format!("next hop '{}' (nexthops[{i}].tunnel)", c.nexthops[i].name)),
        Key::Nexthop { name } => nexthop(c, name),
        Key::Route { .. } | Key::Bridge { .. } | Key::Label { .. } => None,
    }
}

fn network(c: &Config, name: &str) -> Option<String> {
    let is = |n: &Option<String>| n.as_deref() == Some(name);
    if let Some(i) = c.interfaces.iter().position(|f| is(&f.network)) {
        let f = &c.interfaces[i].name;
        return Some(format!("interface '{f}' (interfaces[{i}].network)"));
    }
    if let Some(i) = c
        .nexthops
        .iter()
        .position(|n| n.kind == NextHopKindConfig::Vrf && is(&n.network))
    {
        let n = &c.nexthops[i].name;
        return Some(format!("next hop '{n}' (nexthops[{i}].network)"));
    }
    if let Some(i) = c.routes.iter().position(|r| r.network == name) {
        let p = c.routes[i].prefix;
        return Some(format!("route {p} (routes[{i}].network)"));
    }
    if let Some(i) = c.bridge.iter().position(|b| b.network == name) {
        let m = c.bridge[i].mac;
        return Some(format!("bridge entry {m} (bridge[{i}].network)"));
    }
    // Rules of other networks naming this one (its own policy goes with it).
    for (i, n) in c
        .networks
        .iter()
        .enumerate()
        .filter(|(_, n)| n.name != name)
    {
        for (k, r) in n.policy.iter().flatten().enumerate() {
            if is(&r.src_network) || is(&r.dst_network) {
                return Some(format!(
                    "the policy of network '{}' (networks[{i}].policy[{k}])",
                    n.name
                ));
            }
        }
    }
    None
}

fn interface(c: &Config, name: &str) -> Option<String> {
    if let Some(i) = c.tunnels.iter().position(|t| t.underlay == name) {
        let t = &c.tunnels[i].name;
        return Some(format!("tunnel '{t}' (tunnels[{i}].underlay)"));
    }
    if let Some(i) = c
        .nexthops
        .iter()
        .position(|n| n.interface.as_deref() == Some(name))
    {
        let n = &c.nexthops[i].name;
        return Some(format!("next hop '{n}' (nexthops[{i}].interface)"));
    }
    // A workload with a peer is also the next hop named after it.
    let peer = c
        .interfaces
        .iter()
        .any(|f| f.name == name && f.peer_mac.is_some());
    if peer { nexthop(c, name) } else { None }
}

fn nexthop(c: &Config, name: &str) -> Option<String> {
    if let Some(i) = c.routes.iter().position(|r| r.nexthop == name) {
        let (n, p) = (&c.routes[i].network, c.routes[i].prefix);
        return Some(format!("route {p} in network '{n}' (routes[{i}].nexthop)"));
    }
    if let Some(i) = c.bridge.iter().position(|b| b.nexthop == name) {
        let (n, m) = (&c.bridge[i].network, c.bridge[i].mac);
        return Some(format!(
            "bridge entry {m} in network '{n}' (bridge[{i}].nexthop)"
        ));
    }
    if let Some(i) = c.labels.iter().position(|l| l.nexthop == name) {
        let l = c.labels[i].label;
        return Some(format!("label {l} (labels[{i}].nexthop)"));
    }
    for (i, n) in c.nexthops.iter().enumerate() {
        if let Some(k) = n.members.iter().flatten().position(|m| m == name) {
            return Some(format!(
                "next hop '{}' (nexthops[{i}].members[{k}])",
                n.name
            ));
        }
    }
    for (i, n) in c.networks.iter().enumerate() {
        if let Some(k) = n.flood.iter().position(|m| m == name) {
            return Some(format!(
                "the flood list of network '{}' (networks[{i}].flood[{k}])",
                n.name
            ));
        }
    }
    None
}
