//! A host's configuration, derived from the cluster's view and the host's own base
//! configuration (its underlay interface and flow settings):
//!
//! - its ports → workload interfaces of their networks;
//! - the networks with a local port (and only those: like route-target filtering) →
//!   networks, with the gateway, the policies written for them, and a flood list of every
//!   other host with an endpoint in them;
//! - every other live host with an endpoint in such a network → a tunnel, and per network
//!   a next hop (VXLAN with the VNI, or MPLS with the labels that host allocated);
//! - their endpoints → bridge entries and host routes (/32, /128) to those next hops;
//! - the service chains its networks' policies use → services, chains and the routes
//!   between a chain's two networks (`service`).
//!
//! Conflicts are settled the same way on every host, so that all agree without talking:
//! between ports (intent), the one created first keeps a MAC or an address and the later
//! one is refused; between endpoints (what is up), the newest wins, which is how a MAC
//! that moved is followed. Names made here: tunnels `to-HOST`, next hops `HOST:NETWORK`
//! (`HOST:NETWORK:ip` for routed MPLS), local MPLS targets `local:NETWORK:l2|l3`; port
//! interface names cannot hold ':' and so never collide with them.

use crate::keys::Key;
use crate::model::{Host, Labels, Network, Port, Value};
use crate::view::View;
use core::net::IpAddr;
use ovr_config::model::{
    BridgeConfig, Config, EncapConfig, InnerConfig, InterfaceKindConfig, LabelConfig,
    NetworkConfig, NextHopConfig, NextHopKindConfig, RouteConfig, RuleConfig, TunnelConfig,
};
use ovr_config::values::{Mac, Prefix};
use ovr_tables::prefix::IpPrefix;
use std::collections::{BTreeMap, BTreeSet};

/// The first label a host allocates; below are what operators write by hand.
pub const FIRST_LABEL: u32 = 100_000;

/// What a host is, for the derivation.
pub struct Local<'a> {
    pub host: &'a str,
    /// The host's own configuration: its underlay interface and flow settings (and
    /// whatever else is static on it).
    pub base: &'a Config,
    /// The labels this host gave its networks so far (kept while a network stays).
    pub labels: &'a BTreeMap<String, Labels>,
    /// Whether the other hosts' endpoints in etcd are this host's remote reachability
    /// (false: it comes from BGP EVPN only, `ovrd --reach evpn`).
    pub endpoints: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Derived {
    pub config: Config,
    /// Keys refused because of other keys (an unknown network, a MAC or address already
    /// taken), with the reason.
    pub rejected: BTreeMap<String, String>,
    /// This host's accepted ports, by name: what it publishes as endpoints once up.
    pub local_ports: BTreeMap<String, Port>,
    /// The labels of this host's MPLS networks (to publish in its host record).
    pub labels: BTreeMap<String, Labels>,
}

/// Remote endpoints by (host, network): their MACs and the addresses they won.
type Remote<'v> = BTreeMap<(&'v str, &'v str), Vec<(Mac, Vec<IpAddr>)>>;

/// Who holds what in one network.
#[derive(Default)]
struct Claims {
    macs: BTreeSet<[u8; 6]>,
    ips: BTreeSet<IpAddr>,
}

pub fn derive(view: &View, me: &Local) -> Derived {
    let mut d = Derived::default();
    let networks = networks(view, &mut d.rejected);

    // Ports (intent), first come first served.
    let mut ports: Vec<_> = view
        .valid()
        .filter_map(|(k, e, v)| match (k, v) {
            (Key::Port { host, name }, Value::Port(p)) => {
                Some((e.create_revision, k.to_string(), host, name, p))
            }
            _ => None,
        })
        .collect();
    ports.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut claims: BTreeMap<&str, Claims> = BTreeMap::new();
    let mut interfaces: BTreeSet<(&str, &str)> = BTreeSet::new();
    // (host, socket, id) of the memif ports: one interface per id on a socket.
    let mut memifs: BTreeSet<(&str, &str, u32)> = BTreeSet::new();
    let mut accepted: BTreeMap<(&str, &str), &Port> = BTreeMap::new();
    for (_, key, host, name, p) in ports {
        let Some(n) = networks.get(p.network.as_str()) else {
            d.rejected
                .insert(key, format!("network '{}' does not exist", p.network));
            continue;
        };
        let c = claims.entry(p.network.as_str()).or_default();
        if let Err(why) = claim_port(p, n, c, host, &interfaces, &memifs) {
            d.rejected.insert(key, why);
            continue;
        }
        c.macs.insert(p.mac.0.0);
        c.ips.extend(p.ips.iter().copied());
        interfaces.insert((host.as_str(), p.interface.as_str()));
        if let Some(m) = &p.memif {
            memifs.insert((host.as_str(), m.socket.as_str(), m.id));
        }
        accepted.insert((host.as_str(), name.as_str()), p);
        if host == me.host {
            d.local_ports.insert(name.clone(), p.clone());
        }
    }
    let local_nets: BTreeSet<&str> = d.local_ports.values().map(|p| p.network.as_str()).collect();
    d.labels = allocate_labels(&local_nets, &networks, me.labels);
    // The endpoints this host needs: its networks', and its chains' instances' ports'.
    let mut endpoint_nets = crate::service::instance_networks(view, &local_nets, &accepted);
    endpoint_nets.extend(local_nets.iter().copied());

    // Endpoints of the other live hosts in the local networks; the newest claim wins.
    let hosts: BTreeMap<&str, &Host> = view
        .valid()
        .filter_map(|(k, _, v)| match (k, v) {
            (Key::Host(h), Value::Host(x)) if h != me.host => Some((h.as_str(), x)),
            _ => None,
        })
        .collect();
    let mut endpoints: Vec<_> = view
        .valid()
        .filter_map(|(k, e, v)| match (k, v) {
            (Key::Endpoint { host, .. }, Value::Endpoint(x))
                if me.endpoints
                    && host != me.host
                    && hosts.contains_key(host.as_str())
                    && endpoint_nets.contains(x.network.as_str()) =>
            {
                Some((e.mod_revision, host.as_str(), x))
            }
            _ => None,
        })
        .collect();
    endpoints.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let mut remote_claims: BTreeMap<&str, Claims> = BTreeMap::new();
    let mut remote: Remote = BTreeMap::new();
    for (_, host, x) in endpoints {
        let mine = d.local_ports.values().any(|p| {
            p.network == x.network && (p.mac == x.mac || x.ips.iter().any(|a| p.ips.contains(a)))
        });
        let seen = remote_claims.entry(x.network.as_str()).or_default();
        if mine || seen.macs.contains(&x.mac.0.0) {
            continue;
        }
        let ips: Vec<IpAddr> = x
            .ips
            .iter()
            .copied()
            .filter(|a| seen.ips.insert(*a))
            .collect();
        seen.macs.insert(x.mac.0.0);
        remote
            .entry((host, x.network.as_str()))
            .or_default()
            .push((x.mac, ips));
    }

    d.config = build(
        me,
        &networks,
        &d.local_ports,
        &d.labels,
        &hosts,
        &remote,
        &accepted,
        view,
        &mut d.rejected,
    );
    d
}

/// The valid networks by name; a VNI given twice stays with the network created first.
fn networks<'v>(
    view: &'v View,
    rejected: &mut BTreeMap<String, String>,
) -> BTreeMap<&'v str, &'v Network> {
    let mut all: Vec<_> = view
        .valid()
        .filter_map(|(k, e, v)| match (k, v) {
            (Key::Network(n), Value::Network(x)) => Some((e.create_revision, n.as_str(), x)),
            _ => None,
        })
        .collect();
    all.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    let mut by_vni: BTreeMap<u32, &str> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (_, name, n) in all {
        if let Some(first) = by_vni.get(&n.vni) {
            rejected.insert(
                Key::Network(name.into()).to_string(),
                format!("vni {} is already network '{first}''s", n.vni),
            );
            continue;
        }
        by_vni.insert(n.vni, name);
        out.insert(name, n);
    }
    out
}

fn claim_port(
    p: &Port,
    n: &Network,
    c: &Claims,
    host: &str,
    interfaces: &BTreeSet<(&str, &str)>,
    memifs: &BTreeSet<(&str, &str, u32)>,
) -> Result<(), String> {
    if c.macs.contains(&p.mac.0.0) {
        return Err(format!(
            "mac {} is already a port's in network '{}'",
            p.mac, p.network
        ));
    }
    for (i, a) in p.ips.iter().enumerate() {
        if c.ips.contains(a) {
            return Err(format!(
                "ips[{i}]: {a} is already a port's in network '{}'",
                p.network
            ));
        }
        if n.gateways.iter().any(|g| g.0.addr == *a) {
            return Err(format!("ips[{i}]: {a} is the network's gateway"));
        }
        if !n.subnets.is_empty() && !n.subnets.iter().any(|s| s.0.contains(*a)) {
            return Err(format!("ips[{i}]: {a} is in none of the network's subnets"));
        }
    }
    if interfaces.contains(&(host, p.interface.as_str())) {
        return Err(format!(
            "interface {} is already a port's on host {host}",
            p.interface
        ));
    }
    if let Some(m) = &p.memif
        && memifs.contains(&(host, m.socket.as_str(), m.id))
    {
        return Err(format!(
            "memif id {} on socket {} is already a port's on host {host}",
            m.id, m.socket
        ));
    }
    Ok(())
}

/// Labels for the local MPLS networks: a network keeps the labels it had; a new one
/// takes the lowest free pair from `FIRST_LABEL`.
fn allocate_labels(
    local: &BTreeSet<&str>,
    networks: &BTreeMap<&str, &Network>,
    had: &BTreeMap<String, Labels>,
) -> BTreeMap<String, Labels> {
    let mpls: Vec<&str> = local
        .iter()
        .copied()
        .filter(|n| {
            networks
                .get(n)
                .is_some_and(|x| x.encap != EncapConfig::Vxlan)
        })
        .collect();
    let mut out: BTreeMap<String, Labels> = mpls
        .iter()
        .filter_map(|n| had.get(*n).map(|l| (n.to_string(), *l)))
        .collect();
    let mut used: BTreeSet<u32> = out.values().flat_map(|l| [l.l2, l.l3]).collect();
    let mut next = FIRST_LABEL;
    for n in &mpls {
        if out.contains_key(*n) {
            continue;
        }
        while used.contains(&next) || used.contains(&(next + 1)) {
            next += 2;
        }
        out.insert(
            n.to_string(),
            Labels {
                l2: next,
                l3: next + 1,
            },
        );
        used.extend([next, next + 1]);
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn build(
    me: &Local,
    networks: &BTreeMap<&str, &Network>,
    local_ports: &BTreeMap<String, Port>,
    labels: &BTreeMap<String, Labels>,
    hosts: &BTreeMap<&str, &Host>,
    remote: &Remote,
    ports: &BTreeMap<(&str, &str), &Port>,
    view: &View,
    rejected: &mut BTreeMap<String, String>,
) -> Config {
    let mut c = me.base.clone();
    let underlay = c
        .interfaces
        .iter()
        .find(|i| i.kind == InterfaceKindConfig::Underlay)
        .map(|i| i.name.clone());
    let transparent = crate::service::transparent_sides(view, me.host);
    for (name, p) in local_ports {
        c.interfaces
            .push(p.interface_config(transparent.contains(name.as_str())));
    }
    let local: BTreeSet<&str> = local_ports.values().map(|p| p.network.as_str()).collect();

    // Next hops per (remote host, network), where the host can be reached.
    let mut reachable: BTreeMap<(&str, &str), (String, String)> = BTreeMap::new();
    let mut tunnels: BTreeSet<&str> = BTreeSet::new();
    for &(host, net) in remote.keys() {
        let (h, n) = (hosts[host], networks[net]);
        let Some(underlay) = &underlay else { continue };
        // An instance on another host is reached through VXLAN only.
        if n.encap != EncapConfig::Vxlan && !local.contains(net) {
            continue;
        }
        let (l2, l3) = match n.encap {
            EncapConfig::Vxlan => ((None, Some(n.vni)), None),
            _ => match h.labels.get(net) {
                Some(l) => ((Some(l.l2), None), Some(l.l3)),
                None => {
                    rejected.insert(
                        Key::Host(host.into()).to_string(),
                        format!("no MPLS labels for network '{net}'"),
                    );
                    continue;
                }
            },
        };
        if tunnels.insert(host) {
            c.tunnels.push(TunnelConfig {
                name: format!("to-{host}"),
                underlay: underlay.clone(),
                remote: h.vtep,
                remote_mac: h.mac,
                local: None,
            });
        }
        let name = format!("{host}:{net}");
        let tunnel = |name: &str, label, vni| NextHopConfig {
            tunnel: Some(format!("to-{host}")),
            encap: Some(n.encap),
            vni,
            label,
            ..NextHopConfig::new(name, NextHopKindConfig::Tunnel)
        };
        c.nexthops.push(tunnel(&name, l2.0, l2.1));
        let routed = match l3 {
            Some(label) => {
                let r = format!("{name}:ip");
                c.nexthops.push(tunnel(&r, Some(label), None));
                r
            }
            None => name.clone(),
        };
        reachable.insert((host, net), (name, routed));
    }

    let policies = policies(view, &local);
    for net in &local {
        let n = networks[net];
        let flood = reachable
            .iter()
            .filter(|((_, x), _)| x == net)
            .filter(|_| n.flood)
            .map(|(_, (l2, _))| l2.clone())
            .collect();
        c.networks.push(NetworkConfig {
            name: net.to_string(),
            vni: Some(n.vni),
            router_mac: None,
            gateways: n.gateways.clone(),
            flood,
            policy: policies.get(*net).cloned(),
            flow_quota: n.quotas.flows,
            route_targets: n.route_targets.clone(),
            encap: (n.encap != EncapConfig::Vxlan).then_some(n.encap),
        });
    }
    for ((host, net), list) in remote {
        // (Instances' ports in a network without a port here: only their next hops.)
        let Some((l2, l3)) = reachable
            .get(&(*host, *net))
            .filter(|_| local.contains(net))
        else {
            continue;
        };
        for (mac, ips) in list {
            c.bridge.push(BridgeConfig {
                network: net.to_string(),
                mac: *mac,
                nexthop: l2.clone(),
            });
            for a in ips {
                let len = if a.is_ipv4() { 32 } else { 128 };
                if let Ok(p) = IpPrefix::new(*a, len) {
                    c.routes.push(RouteConfig {
                        network: net.to_string(),
                        prefix: Prefix(p),
                        nexthop: l3.clone(),
                    });
                }
            }
        }
    }
    let alive: BTreeSet<&str> = hosts.keys().copied().collect();
    let remote_ips: BTreeMap<(&str, &str), Vec<IpAddr>> = remote
        .iter()
        .map(|(k, list)| (*k, list.iter().flat_map(|(_, ips)| ips.clone()).collect()))
        .collect();
    crate::service::derive(
        &crate::service::Inputs {
            host: me.host,
            view,
            networks,
            local: &local,
            ports,
            alive: &alive,
            reachable: &reachable,
            remote_ips: &remote_ips,
        },
        &mut c,
        rejected,
    );
    for (net, l) in labels {
        for (label, inner, what) in [
            (l.l2, InnerConfig::Ethernet, "l2"),
            (l.l3, InnerConfig::Ip, "l3"),
        ] {
            let name = format!("local:{net}:{what}");
            c.nexthops.push(NextHopConfig {
                network: Some(net.clone()),
                inner: Some(inner),
                ..NextHopConfig::new(name.clone(), NextHopKindConfig::Vrf)
            });
            c.labels.push(LabelConfig {
                label,
                nexthop: name,
            });
        }
    }
    c
}

/// Each local network's rules, policies in key order; a rule naming a network this host
/// does not have is left out here (no traffic of that network passes this host).
fn policies(view: &View, local: &BTreeSet<&str>) -> BTreeMap<String, Vec<RuleConfig>> {
    let mut out: BTreeMap<String, Vec<RuleConfig>> = BTreeMap::new();
    for (_, _, v) in view.valid() {
        let Value::Policy(p) = v else { continue };
        if !local.contains(p.network.as_str()) {
            continue;
        }
        let here = |n: &Option<String>| n.as_deref().is_none_or(|n| local.contains(n));
        out.entry(p.network.clone()).or_default().extend(
            p.rules
                .iter()
                .filter(|r| here(&r.src_network) && here(&r.dst_network))
                .cloned(),
        );
    }
    out
}
