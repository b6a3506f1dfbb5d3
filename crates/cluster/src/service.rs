//! Service chains in a host's derived configuration (docs/chains.md, "In the cluster").
//!
//! A host installs a chain when a policy of one of its networks steers into it (a rule
//! `action: chain` whose source and destination networks both have a port here). Each
//! function's instances become `services` of the host's configuration:
//!
//! - an instance on this host: its two ports are local ports, so their interfaces (a
//!   transparent function's send from the port's MAC, with no workload behind them);
//! - an instance on another host, of an in-network function (a transparent one is left
//!   out: it has no MAC to be bridged to): its ports' endpoints, published by that host
//!   once the ports are up, say it is there; each side is then reached `via` the VXLAN
//!   next hop to that host in the port's network (`HOST:NETWORK`), the frame inside
//!   addressed to the port's MAC, which that host bridges to it. While either endpoint is missing
//!   (its host down, a port gone, or its host's probe of it failing) the instance is
//!   left out: it takes no sessions here.
//!
//! A function's probe (ARP, ICMP) is in every host's configuration, and each host probes
//! the sides of its own instances only: an instance on another host is that host's word,
//! through the endpoints it withdraws while its probe fails (ovrd's `Sink`), not probed
//! again over the overlay from every host.
//!
//! And the two networks route each other's endpoints (their host routes, "leaked"),
//! which a chain needs at both ends: what leaves the chain is routed in the source
//! network to the destination, and the destination's host routes the reply back in its
//! own network (see docs/chains.md for which host holds which flow pair).
//!
//! Settled the same way on every host: a rule naming a chain that does not exist, or a
//! chain already used from another network (the first by network name keeps it), is
//! refused and the rule denies (fails closed); a service named by two chains stays with
//! the first chain by name; a port that two services' instances name stays with the
//! first service by name; with an ARP or ICMP probe, an instance whose side cannot be
//! probed (no IPv4 address, no gateway in its subnet) is refused.

use crate::keys::Key;
use crate::model::{Chain, Network, Port, Service, Value};
use crate::view::View;
use core::net::IpAddr;
use ovr_config::model::{
    ActionConfig, ChainConfig, Config, EncapConfig, ProbeKindConfig, RouteConfig, ServiceConfig,
    ServiceInstanceConfig, ServiceModeConfig, ServicePortConfig,
};
use ovr_config::values::Prefix;
use ovr_tables::prefix::{IpPrefix, mask};
use std::collections::{BTreeMap, BTreeSet};

/// What the chains' derivation needs from the rest of it.
pub(crate) struct Inputs<'a> {
    pub host: &'a str,
    pub view: &'a View,
    pub networks: &'a BTreeMap<&'a str, &'a Network>,
    /// The networks with a port here.
    pub local: &'a BTreeSet<&'a str>,
    /// Every accepted port, by (host, name).
    pub ports: &'a BTreeMap<(&'a str, &'a str), &'a Port>,
    /// The live hosts other than this one.
    pub alive: &'a BTreeSet<&'a str>,
    /// Next hops to (host, network): (bridged, routed).
    pub reachable: &'a BTreeMap<(&'a str, &'a str), (String, String)>,
    /// The addresses of remote endpoints by (host, network).
    pub remote_ips: &'a BTreeMap<(&'a str, &'a str), Vec<IpAddr>>,
}

/// Adds the chains this host takes part in to `c` (whose networks and policies are
/// derived already), with their services and the routes between their networks.
pub(crate) fn derive(i: &Inputs, c: &mut Config, rejected: &mut BTreeMap<String, String>) {
    let services: BTreeMap<&str, &Service> = i
        .view
        .valid()
        .filter_map(|(k, _, v)| match (k, v) {
            (Key::Service(n), Value::Service(s)) => Some((n.as_str(), s)),
            _ => None,
        })
        .collect();
    let chains: BTreeMap<&str, &Chain> = i
        .view
        .valid()
        .filter_map(|(k, _, v)| match (k, v) {
            (Key::Chain(n), Value::Chain(s)) => Some((n.as_str(), s)),
            _ => None,
        })
        .collect();

    // Which chains the local networks' rules use (networks in name order: the first
    // keeps a chain), and which rules must fail closed.
    let mut used: BTreeMap<String, String> = BTreeMap::new();
    let mut pairs: BTreeSet<(String, String)> = BTreeSet::new();
    let mut taken: BTreeMap<String, String> = BTreeMap::new();
    let mut refused_chains: BTreeSet<String> = BTreeSet::new();
    let mut order: Vec<usize> = (0..c.networks.len()).collect();
    order.sort_by(|a, b| c.networks[*a].name.cmp(&c.networks[*b].name));
    for n in order {
        let net = c.networks[n].name.clone();
        for r in c.networks[n].policy.iter_mut().flatten() {
            let (ActionConfig::Chain, Some(name)) = (r.action, r.chain.clone()) else {
                continue;
            };
            let why = match chains.get(name.as_str()) {
                None => Some(format!("no chain '{name}'")),
                Some(ch) => match used.get(&name) {
                    Some(from) if *from != net => Some(format!(
                        "chain '{name}' is already used from network '{from}' (a chain serves one source network)"
                    )),
                    _ => usable(&name, ch, &services, &mut taken).err(),
                },
            };
            if let Some(why) = why {
                rejected.insert(
                    policy_key(i.view, &net, &name),
                    format!("{why}: its rules deny"),
                );
                refused_chains.insert(name.clone());
                r.action = ActionConfig::Deny;
                r.chain = None;
                continue;
            }
            used.insert(name.clone(), net.clone());
            if let Some(dst) = &r.dst_network {
                pairs.insert((net.clone(), dst.clone()));
            }
        }
    }

    // The services of the chains used, with the instances that are there.
    let mut ports_taken: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for name in used.keys() {
        let ch = chains[name.as_str()];
        for f in &ch.functions {
            let s = services[f.as_str()];
            let mut instances = Vec::new();
            for (k, inst) in s.instances.iter().enumerate() {
                let at = format!("instances[{k}]");
                match instance(i, inst, f, s, &mut ports_taken) {
                    Ok(Some(x)) => instances.push(x),
                    Ok(None) => {}
                    Err(why) => {
                        rejected.insert(Key::Service(f.clone()).to_string(), format!("{at}.{why}"));
                    }
                }
            }
            // The probe goes to every host's configuration: a host probes the sides of
            // its own instances only (those of another host are `via` it, and its word).
            c.services.push(ServiceConfig {
                name: f.clone(),
                mode: s.mode,
                probe: s.probe,
                instances,
            });
        }
        c.chains.push(ChainConfig {
            name: name.clone(),
            functions: ch.functions.clone(),
        });
    }

    // Each chain's two networks route each other's endpoints, both ways in the
    // destination network's VNI: what leaves the chain arrives at b's host in B, and b's
    // reply arrives at the host that sent it on in B too, where the reverse of the pair
    // out of the instance (keyed in B) sends it back into the instance.
    for (a, b) in &pairs {
        leak(i, c, b, a, b);
        leak(i, c, a, b, b);
    }
}

/// The ports (host, name) of the instances of the chains that the policies of networks
/// `local` name: a host needs their endpoints (its view keeps them, see `View`) to reach
/// the instances, even with no port of its own in their network.
pub(crate) fn instance_ports<'v>(
    view: &'v View,
    local: &BTreeSet<&str>,
) -> BTreeSet<(&'v str, &'v str)> {
    let mut named: BTreeSet<&str> = BTreeSet::new();
    for (_, _, v) in view.valid() {
        if let Value::Policy(p) = v
            && local.contains(p.network.as_str())
        {
            named.extend(p.rules.iter().filter_map(|r| r.chain.as_deref()));
        }
    }
    let functions: BTreeSet<&str> = view
        .valid()
        .filter_map(|(k, _, v)| match (k, v) {
            (Key::Chain(name), Value::Chain(ch)) if named.contains(name.as_str()) => {
                Some(ch.functions.iter().map(String::as_str))
            }
            _ => None,
        })
        .flatten()
        .collect();
    view.valid()
        .filter_map(|(k, _, v)| match (k, v) {
            (Key::Service(f), Value::Service(s)) if functions.contains(f.as_str()) => Some(
                s.instances
                    .iter()
                    .flat_map(|i| [&i.left, &i.right].map(|p| (i.host.as_str(), p.as_str()))),
            ),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The names of the ports on `host` that are sides of a transparent function's
/// instance (`Port::interface_config`).
pub(crate) fn transparent_sides<'v>(view: &'v View, host: &str) -> BTreeSet<&'v str> {
    view.valid()
        .filter_map(|(_, _, v)| match v {
            Value::Service(s) if s.mode == ServiceModeConfig::Transparent => Some(&s.instances),
            _ => None,
        })
        .flatten()
        .filter(|i| i.host == host)
        .flat_map(|i| [i.left.as_str(), i.right.as_str()])
        .collect()
}

/// The networks of those ports among `ports` (the accepted ones).
pub(crate) fn instance_networks<'v>(
    view: &'v View,
    local: &BTreeSet<&str>,
    ports: &BTreeMap<(&'v str, &'v str), &'v Port>,
) -> BTreeSet<&'v str> {
    instance_ports(view, local)
        .into_iter()
        .filter_map(|k| ports.get(&k).map(|p| p.network.as_str()))
        .collect()
}

/// The policy key that holds a network's rule naming `chain` (for the report).
fn policy_key(view: &View, network: &str, chain: &str) -> String {
    view.valid()
        .find_map(|(k, _, v)| match v {
            Value::Policy(p)
                if p.network == network
                    && p.rules.iter().any(|r| r.chain.as_deref() == Some(chain)) =>
            {
                Some(k.to_string())
            }
            _ => None,
        })
        .unwrap_or_else(|| Key::Chain(chain.to_string()).to_string())
}

/// Whether a chain can be installed: its functions exist and none is another chain's.
fn usable(
    name: &str,
    ch: &Chain,
    services: &BTreeMap<&str, &Service>,
    taken: &mut BTreeMap<String, String>,
) -> Result<(), String> {
    for (k, f) in ch.functions.iter().enumerate() {
        if !services.contains_key(f.as_str()) {
            return Err(format!("chain '{name}': functions[{k}]: no service '{f}'"));
        }
        if let Some(other) = taken.get(f.as_str())
            && other != name
        {
            return Err(format!(
                "chain '{name}': functions[{k}]: service '{f}' is already in chain '{other}'"
            ));
        }
    }
    for f in &ch.functions {
        taken.insert(f.clone(), name.to_string());
    }
    Ok(())
}

/// One instance as this host sees it: `Ok(None)` when it is not there (a port of it is
/// not up, or its host is not alive), `Err` when its intent is wrong.
fn instance<'v>(
    i: &Inputs<'v>,
    inst: &'v crate::model::ServiceInstance,
    service: &'v str,
    s: &Service,
    taken: &mut BTreeMap<(&'v str, &'v str), &'v str>,
) -> Result<Option<ServiceInstanceConfig>, String> {
    let probe = &s.probe;
    let transparent = s.mode == ServiceModeConfig::Transparent;
    let mut sides = Vec::new();
    for (side, name) in [("left", &inst.left), ("right", &inst.right)] {
        let Some(p) = i.ports.get(&(inst.host.as_str(), name.as_str())) else {
            return Err(format!("{side}: no port {}/{name}", inst.host));
        };
        if let Some(other) = taken.insert((inst.host.as_str(), name.as_str()), service)
            && other != service
        {
            return Err(format!(
                "{side}: port {}/{name} is already service '{other}''s (two instances cannot share a next hop)",
                inst.host
            ));
        }
        if transparent {
            // A bump in the wire has no MAC another host could bridge a frame to: only
            // its own host steers into it.
            if inst.host != i.host {
                return Ok(None);
            }
            sides.push(ServicePortConfig {
                interface: p.interface.clone(),
                via: None,
                mac: None,
                address: None,
            });
            continue;
        }
        let address = match probe.kind {
            ProbeKindConfig::Link => p.ips.first().copied(),
            kind => Some(
                probe_target(i, p, kind)
                    .map_err(|why| format!("{side}: port {}/{name}: {why}", inst.host))?,
            ),
        };
        if inst.host == i.host {
            sides.push(ServicePortConfig {
                interface: p.interface.clone(),
                via: None,
                mac: Some(p.mac),
                address,
            });
            continue;
        }
        let n = i.networks.get(p.network.as_str());
        if n.is_none_or(|n| n.encap != EncapConfig::Vxlan) {
            return Err(format!(
                "{side}: port {}/{name}'s network '{}' is not a VXLAN network (an instance on another host is reached through VXLAN)",
                inst.host, p.network
            ));
        }
        let up = i.alive.contains(inst.host.as_str())
            && i.view
                .entries
                .get(&Key::Endpoint {
                    host: inst.host.clone(),
                    name: name.clone(),
                })
                .is_some_and(|e| matches!(&e.value, Ok(Value::Endpoint(x)) if x.mac == p.mac));
        let via = i.reachable.get(&(inst.host.as_str(), p.network.as_str()));
        match (up, via) {
            (true, Some((l2, _))) => sides.push(ServicePortConfig {
                interface: String::new(),
                via: Some(l2.clone()),
                mac: Some(p.mac),
                address,
            }),
            _ => return Ok(None),
        }
    }
    let right = sides.pop();
    let left = sides.pop();
    Ok(left.zip(right).map(|(left, right)| ServiceInstanceConfig {
        name: inst.name.clone(),
        left,
        right,
    }))
}

/// Where an ARP or ICMP probe of a side goes: the port's first IPv4 address, which needs
/// a gateway address of the port's network in its subnet to be sent from. Checked on
/// every host alike (not only on the instance's, whose configuration would refuse it),
/// so that every host leaves such an instance out and reports why.
fn probe_target(i: &Inputs, p: &Port, kind: ProbeKindConfig) -> Result<IpAddr, String> {
    let what = match kind {
        ProbeKindConfig::Arp => "arp",
        _ => "icmp",
    };
    let Some(to) = p.ips.iter().copied().find(IpAddr::is_ipv4) else {
        return Err(format!(
            "no IPv4 address to send the {what} probe to (probes are IPv4 only)"
        ));
    };
    let gateways = i.networks.get(p.network.as_str()).map(|n| &n.gateways);
    let from = gateways.into_iter().flatten().find(|g| {
        let g = g.0;
        g.addr.is_ipv4() && mask(g.addr, g.prefix_len) == mask(to, g.prefix_len)
    });
    match from {
        Some(_) => Ok(to),
        None => Err(format!(
            "network '{}' has no gateway address in the subnet of {to} to send the {what} probe from",
            p.network
        )),
    }
}

/// Host routes in network `into` for the endpoints of network `of`: to this host's
/// ports by their interface, to other hosts' by the routed next hop there in network
/// `vni_of` (whose VNI the packet carries). An address `into` has itself is left out.
fn leak(i: &Inputs, c: &mut Config, into: &str, of: &str, vni_of: &str) {
    if !i.local.contains(into) || !i.local.contains(of) {
        return;
    }
    let own: BTreeSet<IpAddr> = i
        .ports
        .values()
        .filter(|p| p.network == into)
        .flat_map(|p| p.ips.iter().copied())
        .chain(
            i.remote_ips
                .iter()
                .filter(|((_, n), _)| *n == into)
                .flat_map(|(_, v)| v.iter().copied()),
        )
        .collect();
    let mut routes: Vec<(IpAddr, String)> = Vec::new();
    for ((host, _), p) in i.ports {
        if *host == i.host && p.network == of {
            routes.extend(p.ips.iter().map(|a| (*a, p.interface.clone())));
        }
    }
    for ((host, net), ips) in i.remote_ips {
        if *net != of {
            continue;
        }
        if let Some((_, routed)) = i.reachable.get(&(*host, vni_of)) {
            routes.extend(ips.iter().map(|a| (*a, routed.clone())));
        }
    }
    for (a, nexthop) in routes {
        if own.contains(&a) {
            continue;
        }
        let len = if a.is_ipv4() { 32 } else { 128 };
        if let Ok(p) = IpPrefix::new(a, len) {
            c.routes.push(RouteConfig {
                network: into.to_string(),
                prefix: Prefix(p),
                nexthop,
            });
        }
    }
}
