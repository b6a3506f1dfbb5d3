//! The cluster's data model: what lives under `/ovr/v1/` in etcd, one JSON value per key
//! (docs/cluster.md has the layout and a JSON Schema of each value).
//!
//! Intent (networks, policies, ports) is written by operators and tools; hosts and
//! endpoints are published by each agent under its lease. A value is checked on its own
//! here (`parse`); what depends on other keys (an unknown network, a MAC or address given
//! twice) is checked where the whole view is at hand (`derive`).

use crate::keys::Key;
use core::net::IpAddr;
use ovr_config::model::{
    ActionConfig, Config, EncapConfig, InterfaceConfig, InterfaceKindConfig, MemifConfig,
    NetworkConfig, PoliceConfig, ProbeConfig, ProbeKindConfig, RouteTargetsConfig, RuleConfig,
    ServiceModeConfig,
};
use ovr_config::values::{Address, Mac, Prefix};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A virtual network: one VNI, its subnets and its distributed gateway (the same
/// addresses on every host).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// The VXLAN network identifier (1 to 16777215), unique in the cluster.
    pub vni: u32,
    /// The network's subnets (IPv4 and IPv6); port addresses must fall in one.
    #[serde(default)]
    pub subnets: Vec<Prefix>,
    /// The gateway's addresses, "address/length", on every host with a port here.
    #[serde(default)]
    pub gateways: Vec<Address>,
    /// How hosts carry the network to each other.
    #[serde(default = "vxlan")]
    pub encap: EncapConfig,
    /// Replicate broadcast and unknown unicast to every other host with a port here.
    #[serde(default = "yes")]
    pub flood: bool,
    /// Limits on what the network may use on each host.
    #[serde(default, skip_serializing_if = "Quotas::is_empty")]
    pub quotas: Quotas,
    /// BGP EVPN route targets, as in a host's configuration (absent: auto, ASN:VNI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_targets: Option<RouteTargetsConfig>,
}

/// A network's limits, each per host (a tenant cannot fill a host's shared tables).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quotas {
    /// The most flows (each direction counts one) the network may hold on a host; absent:
    /// the host's `flows.network_quota`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
}

impl Quotas {
    fn is_empty(&self) -> bool {
        self.flows.is_none()
    }
}

fn vxlan() -> EncapConfig {
    EncapConfig::Vxlan
}

fn yes() -> bool {
    true
}

/// Rules for traffic from or to one network, appended in key order to its policy (no
/// policy at all: the default, allow within the network and deny between networks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub network: String,
    pub rules: Vec<RuleConfig>,
}

/// A workload's attachment to a network on one host: the intent (key
/// `ports/HOST/NAME`). The host's agent makes `interface` a workload interface of the
/// network and, once the interface is there, publishes it as an endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    pub network: String,
    /// The workload's MAC.
    pub mac: Mac,
    /// The workload's addresses (host routes on every host of the network).
    #[serde(default)]
    pub ips: Vec<IpAddr>,
    /// The host-side interface (a veth end, a TAP); with `memif`, the name ovr gives the
    /// memif interface (it has none in the kernel).
    pub interface: String,
    /// A memif port's connection (socket, id, role...), as in a host's configuration: the
    /// workload or network function is a memif peer rather than a kernel interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memif: Option<MemifConfig>,
    /// A limit on the packets the workload may send in (as in a host's configuration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub police: Option<PoliceConfig>,
    /// Who made the port (a CNI plugin's container id, a pod's names): kept, not used.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

impl Port {
    /// The port as its host's workload (or memif) interface in its network. A side of a
    /// transparent function has no workload behind it: its MAC is where ovr sends from
    /// (the interface's own, not the gateway's, which a bridging function would learn
    /// on the wrong side).
    pub fn interface_config(&self, transparent_side: bool) -> InterfaceConfig {
        InterfaceConfig {
            name: self.interface.clone(),
            kind: match self.memif {
                Some(_) => InterfaceKindConfig::Memif,
                None => InterfaceKindConfig::Workload,
            },
            mac: transparent_side.then_some(self.mac),
            addresses: vec![],
            mtu: 1500,
            network: Some(self.network.clone()),
            policy: true,
            admin_up: true,
            peer_mac: (!transparent_side).then_some(self.mac),
            peer_addresses: if transparent_side {
                vec![]
            } else {
                self.ips.clone()
            },
            memif: self.memif.clone(),
            police: self.police,
        }
    }
}

/// A network function (key `services/NAME`): its instances, each on one host with its
/// left and right sides being ports of that host (`ports/HOST/LEFT`, `ports/HOST/RIGHT`):
/// the port gives the side's network, MAC, address and interface, and once up it is an
/// endpoint, which is how the other hosts learn that the instance is there
/// (docs/chains.md, "In the cluster").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Service {
    /// `in-network` (reached from any host) or `transparent` (a bump in the wire, which
    /// has no MAC another host could bridge a frame to: used by its own host only).
    #[serde(default)]
    pub mode: ServiceModeConfig,
    /// How its instances' health is checked besides their ports' links (default: the
    /// links only). Each instance's host probes it; the other hosts take its word, the
    /// instance's ports' endpoints, which its host withdraws while a probe fails.
    #[serde(default, skip_serializing_if = "ProbeConfig::is_default")]
    pub probe: ProbeConfig,
    pub instances: Vec<ServiceInstance>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceInstance {
    pub name: String,
    /// The host the instance runs on.
    pub host: String,
    /// The port (a name under `ports/HOST/`) of its left side, towards the chain's source.
    pub left: String,
    /// The port of its right side, towards the chain's destination.
    pub right: String,
}

/// A chain (key `chains/NAME`): services in the order traffic from the source network
/// crosses them. A policy rule `{"action": "chain", "chain": NAME, "dst_network": B}`
/// of network A steers A's traffic to B through it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Chain {
    pub functions: Vec<String>,
}

/// An agent, as it publishes itself under its lease (key `hosts/NAME`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Where the host's tunnels end (the source address of what it sends).
    pub vtep: IpAddr,
    /// The MAC of its underlay interface (hosts share the underlay segment).
    pub mac: Mac,
    /// The underlay interface's addresses.
    #[serde(default)]
    pub underlay: Vec<Address>,
    /// The MPLS labels this host allocated, by network.
    #[serde(default)]
    pub labels: BTreeMap<String, Labels>,
    /// ovrd's version.
    pub version: String,
}

/// The two labels a host gives a network: bridged frames arrive as Ethernet, routed
/// packets as bare IP (docs/cluster.md, "MPLS").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    pub l2: u32,
    pub l3: u32,
}

/// A port that is really up on its host (key `endpoints/HOST/NAME`, under the host's
/// lease): what every other host of the network routes and bridges to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    pub network: String,
    pub mac: Mac,
    #[serde(default)]
    pub ips: Vec<IpAddr>,
}

/// Where an agent reports how far it got (key `/ovr/status/v1/NAME`, outside the watched
/// prefix so that reports do not wake every agent; under the host's lease).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostStatus {
    /// The etcd revision whose state the host's tables hold.
    pub applied_revision: i64,
    /// Keys refused, with the reason (at most `MAX_REPORTED`).
    pub rejected: BTreeMap<String, String>,
    /// How many keys were refused in all.
    pub rejected_count: usize,
    /// Networks installed on the host (those with a local port).
    pub networks: Vec<String>,
}

/// Rejections a host reports by key; the count says how many more there are.
pub const MAX_REPORTED: usize = 100;

/// A value under a key, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Network(Network),
    Policy(Policy),
    Port(Port),
    Service(Service),
    Chain(Chain),
    Host(Host),
    Endpoint(Endpoint),
}

/// The highest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;
/// The highest MPLS label (20 bits); 0-15 are reserved.
pub const MAX_LABEL: u32 = (1 << 20) - 1;

/// Parses and checks the value of a key on its own.
pub fn parse(key: &Key, bytes: &[u8]) -> Result<Value, String> {
    fn json<'a, T: Deserialize<'a>>(b: &'a [u8]) -> Result<T, String> {
        serde_json::from_slice(b).map_err(|e| format!("not a valid value: {e}"))
    }
    let v = match key {
        Key::Network(_) => Value::Network(json(bytes)?),
        Key::Policy(_) => Value::Policy(json(bytes)?),
        Key::Port { .. } => Value::Port(json(bytes)?),
        Key::Service(_) => Value::Service(json(bytes)?),
        Key::Chain(_) => Value::Chain(json(bytes)?),
        Key::Host(_) => Value::Host(json(bytes)?),
        Key::Endpoint { .. } => Value::Endpoint(json(bytes)?),
    };
    check(&v)?;
    Ok(v)
}

fn check(v: &Value) -> Result<(), String> {
    match v {
        Value::Network(n) => {
            if n.vni == 0 || n.vni > MAX_VNI {
                return Err(format!("vni: {} is not in 1..={MAX_VNI}", n.vni));
            }
            for (i, g) in n.gateways.iter().enumerate() {
                let a = g.0.addr;
                if !n.subnets.is_empty() && !n.subnets.iter().any(|s| s.0.contains(a)) {
                    return Err(format!("gateways[{i}]: {a} is in none of the subnets"));
                }
            }
        }
        Value::Port(p) => {
            crate::keys::check_name(&p.network).map_err(|e| format!("network: {e}"))?;
            if p.interface.is_empty() || p.interface.len() > 15 || p.interface.contains('/') {
                return Err(format!(
                    "interface: '{}' is not an interface name (1 to 15 characters, no '/')",
                    p.interface
                ));
            }
            if p.mac.0.is_multicast() || p.mac.0 == ovr_wire::ethernet::MacAddr([0; 6]) {
                return Err(format!("mac: {} is not a unicast MAC", p.mac));
            }
            distinct(&p.ips)?;
        }
        Value::Endpoint(e) => {
            crate::keys::check_name(&e.network).map_err(|e| format!("network: {e}"))?;
            distinct(&e.ips)?;
        }
        Value::Host(h) => {
            for (net, l) in &h.labels {
                for (what, v) in [("l2", l.l2), ("l3", l.l3)] {
                    if !(16..=MAX_LABEL).contains(&v) {
                        return Err(format!(
                            "labels.{net}.{what}: {v} is not in 16..={MAX_LABEL}"
                        ));
                    }
                }
            }
        }
        Value::Policy(p) => {
            crate::keys::check_name(&p.network).map_err(|e| format!("network: {e}"))?;
            for (k, r) in p.rules.iter().enumerate() {
                if r.action == ActionConfig::Chain && r.chain.is_none() {
                    return Err(format!("rules[{k}].chain: required with action chain"));
                }
                if let (ActionConfig::Chain, Some(c)) = (r.action, &r.chain) {
                    crate::keys::check_name(c).map_err(|e| format!("rules[{k}].chain: {e}"))?;
                    if r.dst_network.is_none() {
                        return Err(format!(
                            "rules[{k}].dst_network: a chain's rule names its destination network (whose routes it carries)"
                        ));
                    }
                }
            }
        }
        Value::Service(s) => check_service(s)?,
        Value::Chain(c) => {
            if c.functions.is_empty() {
                return Err("functions: a chain needs at least one function".into());
            }
            for (k, f) in c.functions.iter().enumerate() {
                crate::keys::check_name(f).map_err(|e| format!("functions[{k}]: {e}"))?;
                if c.functions[..k].contains(f) {
                    return Err(format!(
                        "functions[{k}]: '{f}' is listed twice (a service is in one place of a chain)"
                    ));
                }
            }
        }
    }
    translates(v)
}

/// What the tables would refuse in a network or a policy on its own (a gateway that is
/// not an interface address, a port range without tcp or udp...), found by translating
/// it alone: so that such a value is refused for its key, rather than making the whole
/// host's configuration fail to install.
fn translates(v: &Value) -> Result<(), String> {
    let net = |name: &str, vni: u32| NetworkConfig {
        name: name.to_string(),
        vni: Some(vni),
        router_mac: None,
        gateways: vec![],
        flood: vec![],
        policy: None,
        flow_quota: None,
        route_targets: None,
        encap: None,
    };
    let config = match v {
        Value::Network(n) => Config {
            networks: vec![NetworkConfig {
                gateways: n.gateways.clone(),
                flow_quota: n.quotas.flows,
                route_targets: n.route_targets.clone(),
                ..net("network", n.vni)
            }],
            ..Config::default()
        },
        Value::Policy(p) => {
            let mut names: Vec<&str> = p
                .rules
                .iter()
                .flat_map(|r| [r.src_network.as_deref(), r.dst_network.as_deref()])
                .flatten()
                .filter(|n| *n != p.network)
                .collect();
            names.sort_unstable();
            names.dedup();
            // A chain rule is checked as the same rule allowing (the chain is another
            // key's, checked where the view is at hand).
            let rules = p
                .rules
                .iter()
                .map(|r| match r.action {
                    ActionConfig::Chain => RuleConfig {
                        action: ActionConfig::Allow,
                        chain: None,
                        ..r.clone()
                    },
                    _ => r.clone(),
                })
                .collect();
            let mut networks = vec![NetworkConfig {
                policy: Some(rules),
                ..net(&p.network, 1)
            }];
            networks.extend(names.iter().zip(2..).map(|(n, vni)| net(n, vni)));
            Config {
                networks,
                ..Config::default()
            }
        }
        // A memif port's connection and a port's policer are checked as the host will
        // (its socket, secret, ring and buffer sizes; the rate and burst).
        Value::Port(p) if p.memif.is_some() || p.police.is_some() => Config {
            networks: vec![net(&p.network, 1)],
            interfaces: vec![p.interface_config(false)],
            ..Config::default()
        },
        _ => return Ok(()),
    };
    config.translate().map(|_| ()).map_err(|e| {
        e.to_string()
            .replace("networks[0].flow_quota", "quotas.flows")
            .replace("networks[0].", "")
            .replace("interfaces[0].", "")
    })
}

fn check_service(s: &Service) -> Result<(), String> {
    if s.mode == ServiceModeConfig::Transparent && s.probe.kind != ProbeKindConfig::Link {
        return Err("probe.kind: a transparent function has no address to probe: only link".into());
    }
    if let Err((field, why)) = s.probe.check_timing() {
        return Err(format!("probe.{field}: {why}"));
    }
    if s.instances.len() > ovr_tables::nexthop::ECMP_BUCKETS {
        return Err(format!(
            "instances: at most {} (the ECMP group's buckets)",
            ovr_tables::nexthop::ECMP_BUCKETS
        ));
    }
    for (k, i) in s.instances.iter().enumerate() {
        let at = format!("instances[{k}]");
        for (what, v) in [
            ("name", &i.name),
            ("host", &i.host),
            ("left", &i.left),
            ("right", &i.right),
        ] {
            crate::keys::check_name(v).map_err(|e| format!("{at}.{what}: {e}"))?;
        }
        if i.left == i.right {
            return Err(format!(
                "{at}.right: '{}' is the left port too (a side is a port of its own)",
                i.right
            ));
        }
        for (j, o) in s.instances[..k].iter().enumerate() {
            if o.name == i.name {
                return Err(format!("{at}.name: '{}' is instances[{j}]'s", i.name));
            }
            for (side, p) in [("left", &i.left), ("right", &i.right)] {
                if o.host == i.host && (o.left == *p || o.right == *p) {
                    return Err(format!(
                        "{at}.{side}: port {}/{p} is already instances[{j}]'s (two instances cannot share a next hop)",
                        i.host
                    ));
                }
            }
        }
    }
    Ok(())
}

fn distinct(ips: &[IpAddr]) -> Result<(), String> {
    for (i, a) in ips.iter().enumerate() {
        if ips[..i].contains(a) {
            return Err(format!("ips[{i}]: {a} is listed twice"));
        }
    }
    Ok(())
}
