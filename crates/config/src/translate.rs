//! From the written configuration to a batch of table changes, resolving names to ids.
//!
//! Ids follow document order: networks (VRFs) from 1, interfaces from 0, next hops from
//! 1 (those written first, then those a workload's `peer_mac` creates). The batch is
//! ordered so that everything exists before it is referred to; the tables then validate
//! it whole.

use crate::ConfigError;
use crate::model::*;
use core::net::IpAddr;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceAddress, InterfaceKind};
use ovr_tables::nexthop::{Ecmp, Encap, Inner, NextHop, Tunnel};
use ovr_tables::policy::{Policy, PolicyAction, PolicyError, PolicyRule, PortRange};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::{TableOp, TablesWriter};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::MacAddr;
use ovr_wire::ip_proto;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Names and the ids they were given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pub interfaces: BTreeMap<String, InterfaceId>,
    pub networks: BTreeMap<String, VrfId>,
    pub nexthops: BTreeMap<String, NextHopId>,
    pub tunnels: BTreeMap<String, usize>,
}

impl Names {
    pub fn interface_name(&self, id: InterfaceId) -> Option<&str> {
        find(&self.interfaces, &id)
    }

    pub fn network_name(&self, id: VrfId) -> Option<&str> {
        find(&self.networks, &id)
    }

    pub fn nexthop_name(&self, id: NextHopId) -> Option<&str> {
        find(&self.nexthops, &id)
    }
}

fn find<'a, T: PartialEq>(m: &'a BTreeMap<String, T>, v: &T) -> Option<&'a str> {
    m.iter().find(|(_, x)| *x == v).map(|(k, _)| k.as_str())
}

/// The configuration as table changes.
#[derive(Debug, Clone)]
pub struct Translation {
    pub ops: Vec<TableOp>,
    /// For each op, where in the document it came from ("routes[3]").
    pub origins: Vec<String>,
    pub names: Names,
    pub flows: FlowSettings,
}

impl Translation {
    /// Commits the whole batch, or nothing; an error names the field it came from.
    pub fn apply(&self, writer: &mut TablesWriter) -> Result<(), ConfigError> {
        writer.commit(self.ops.clone()).map_err(|e| {
            let path = self.origins.get(e.index).cloned().unwrap_or_default();
            ConfigError::invalid(path, e.error.to_string())
        })
    }
}

type R<T> = Result<T, ConfigError>;

fn err<T>(path: impl Into<String>, msg: impl Into<String>) -> R<T> {
    Err(ConfigError::invalid(path.into(), msg.into()))
}

fn mac(path: &str, s: &str) -> R<MacAddr> {
    s.parse().or_else(|_| {
        err(
            path,
            format!("'{s}' is not a MAC address (like 02:00:00:00:00:01)"),
        )
    })
}

fn unicast_mac(path: &str, s: &str) -> R<MacAddr> {
    let m = mac(path, s)?;
    if m.is_multicast() {
        return err(
            path,
            format!("'{s}' is a group (multicast) MAC; a unicast one is needed"),
        );
    }
    Ok(m)
}

fn ip(path: &str, s: &str) -> R<IpAddr> {
    s.parse()
        .or_else(|_| err(path, format!("'{s}' is not an IPv4 or IPv6 address")))
}

/// "address/length" of an interface (host bits allowed: it is an address on a subnet).
fn if_address(path: &str, s: &str) -> R<InterfaceAddress> {
    let Some((a, l)) = s.split_once('/') else {
        return err(
            path,
            format!("'{s}' needs a prefix length, like 10.1.0.1/24"),
        );
    };
    let addr = ip(path, a)?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    match l.parse::<u8>() {
        Ok(prefix_len) if prefix_len <= max => Ok(InterfaceAddress { addr, prefix_len }),
        _ => err(path, format!("'{l}' is not a prefix length (0-{max})")),
    }
}

fn prefix(path: &str, s: &str) -> R<IpPrefix> {
    s.parse::<IpPrefix>().or_else(|e| err(path, e.to_string()))
}

fn protocol(path: &str, p: &NumberOrText) -> R<u8> {
    match p {
        NumberOrText::Number(n) => {
            u8::try_from(*n).or_else(|_| err(path, format!("protocol {n} is above 255")))
        }
        NumberOrText::Text(t) => match t.to_ascii_lowercase().as_str() {
            "tcp" => Ok(ip_proto::TCP),
            "udp" => Ok(ip_proto::UDP),
            "icmp" => Ok(ip_proto::ICMP),
            "icmpv6" => Ok(ip_proto::ICMPV6),
            "gre" => Ok(ip_proto::GRE),
            _ => err(
                path,
                format!("'{t}' is not a protocol (tcp, udp, icmp, icmpv6 or a number)"),
            ),
        },
    }
}

fn ports(path: &str, p: &Option<NumberOrText>) -> R<PortRange> {
    let port = |s: &str| {
        s.trim()
            .parse::<u16>()
            .or_else(|_| err(path, format!("'{s}' is not a port (0-65535)")))
    };
    match p {
        None => Ok(PortRange::ANY),
        Some(NumberOrText::Number(n)) => {
            let n = u16::try_from(*n).or_else(|_| err(path, format!("port {n} is above 65535")))?;
            Ok(PortRange { first: n, last: n })
        }
        Some(NumberOrText::Text(t)) => match t.split_once('-') {
            Some((a, b)) => Ok(PortRange {
                first: port(a)?,
                last: port(b)?,
            }),
            None => {
                let n = port(t)?;
                Ok(PortRange { first: n, last: n })
            }
        },
    }
}

/// Assigns ids to names in order, refusing duplicates.
fn number<T: Copy>(
    section: &str,
    names: impl Iterator<Item = String>,
    id: impl Fn(usize) -> T,
) -> R<BTreeMap<String, T>> {
    let mut m = BTreeMap::new();
    for (i, n) in names.enumerate() {
        let path = format!("{section}[{i}].name");
        if n.is_empty() {
            return err(path, "must not be empty");
        }
        if m.insert(n.clone(), id(i)).is_some() {
            return err(path, format!("'{n}' is used twice"));
        }
    }
    Ok(m)
}

struct Builder<'a> {
    c: &'a Config,
    names: Names,
    ops: Vec<TableOp>,
    origins: Vec<String>,
}

impl Builder<'_> {
    fn push(&mut self, origin: String, op: TableOp) {
        self.ops.push(op);
        self.origins.push(origin);
    }

    fn network(&self, path: &str, name: &str) -> R<VrfId> {
        match self.names.networks.get(name) {
            Some(v) => Ok(*v),
            None => err(path, format!("no network named '{name}'")),
        }
    }

    fn interface(&self, path: &str, name: &str) -> R<InterfaceId> {
        match self.names.interfaces.get(name) {
            Some(v) => Ok(*v),
            None => err(path, format!("no interface named '{name}'")),
        }
    }

    fn nexthop(&self, path: &str, name: &str) -> R<NextHopId> {
        match self.names.nexthops.get(name) {
            Some(v) => Ok(*v),
            None => err(path, format!("no next hop named '{name}'")),
        }
    }

    fn router_mac(&self, vrf: VrfId) -> R<MacAddr> {
        let n = &self.c.networks[vrf.0 as usize - 1];
        match &n.router_mac {
            Some(m) => unicast_mac(&format!("networks[{}].router_mac", vrf.0 - 1), m),
            None => Ok(DEFAULT_ROUTER_MAC),
        }
    }

    fn networks(&mut self) -> R<()> {
        for (i, n) in self.c.networks.iter().enumerate() {
            let id = VrfId(i as u32 + 1);
            let path = format!("networks[{i}]");
            self.push(
                path.clone(),
                TableOp::UpsertVrf {
                    id,
                    name: n.name.clone(),
                    vni: n.vni,
                },
            );
            let addresses = n
                .gateways
                .iter()
                .enumerate()
                .map(|(k, g)| if_address(&format!("{path}.gateways[{k}]"), g))
                .collect::<R<Vec<_>>>()?;
            let mac = self.router_mac(id)?;
            self.push(
                format!("{path}.gateways"),
                TableOp::SetGateway {
                    vrf: id,
                    mac,
                    addresses,
                },
            );
        }
        Ok(())
    }

    fn interfaces(&mut self) -> R<()> {
        for (i, f) in self.c.interfaces.iter().enumerate() {
            let path = format!("interfaces[{i}]");
            let underlay = f.kind == InterfaceKindConfig::Underlay;
            let vrf = match (&f.network, underlay) {
                (Some(_), true) => {
                    return err(
                        format!("{path}.network"),
                        "an underlay interface belongs to no network",
                    );
                }
                (None, false) => return err(path, "a workload interface needs a network"),
                (Some(n), false) => Some(self.network(&format!("{path}.network"), n)?),
                (None, true) => None,
            };
            let mac = match (&f.mac, vrf) {
                (Some(m), _) => unicast_mac(&format!("{path}.mac"), m)?,
                (None, Some(v)) => self.router_mac(v)?,
                (None, None) => {
                    return err(format!("{path}.mac"), "an underlay interface needs its MAC");
                }
            };
            if underlay && (f.peer_mac.is_some() || !f.peer_addresses.is_empty()) {
                return err(
                    format!("{path}.peer_mac"),
                    "only a workload interface has a peer",
                );
            }
            let addresses = f
                .addresses
                .iter()
                .enumerate()
                .map(|(k, a)| if_address(&format!("{path}.addresses[{k}]"), a))
                .collect::<R<Vec<_>>>()?;
            self.push(
                path,
                TableOp::UpsertInterface(Interface {
                    id: InterfaceId(i as u32),
                    name: f.name.clone(),
                    kind: match f.kind {
                        InterfaceKindConfig::Underlay => InterfaceKind::Underlay,
                        InterfaceKindConfig::Workload => InterfaceKind::Workload,
                        InterfaceKindConfig::Tap => InterfaceKind::Tap,
                        InterfaceKindConfig::Memif => InterfaceKind::Memif,
                    },
                    vrf,
                    mac,
                    addresses,
                    mtu: f.mtu,
                    policy: f.policy,
                    admin_up: f.admin_up,
                }),
            );
        }
        Ok(())
    }

    fn tunnel(&self, path: &str, name: &str) -> R<(InterfaceId, IpAddr, IpAddr, MacAddr)> {
        let Some(&i) = self.names.tunnels.get(name) else {
            return err(path, format!("no tunnel named '{name}'"));
        };
        let t = &self.c.tunnels[i];
        let tp = format!("tunnels[{i}]");
        let underlay = self.interface(&format!("{tp}.underlay"), &t.underlay)?;
        let uc = &self.c.interfaces[underlay.0 as usize];
        if uc.kind != InterfaceKindConfig::Underlay {
            return err(
                format!("{tp}.underlay"),
                format!("'{}' is not an underlay interface", t.underlay),
            );
        }
        let remote = ip(&format!("{tp}.remote"), &t.remote)?;
        let local = match &t.local {
            Some(l) => ip(&format!("{tp}.local"), l)?,
            None => {
                let mut found = None;
                for (k, a) in uc.addresses.iter().enumerate() {
                    let a = if_address(&format!("interfaces[{}].addresses[{k}]", underlay.0), a)?;
                    if a.addr.is_ipv4() == remote.is_ipv4() {
                        found = Some(a.addr);
                        break;
                    }
                }
                match found {
                    Some(a) => a,
                    None => {
                        return err(
                            format!("{tp}.local"),
                            format!(
                                "interface '{}' has no address of the remote's family to send from",
                                t.underlay
                            ),
                        );
                    }
                }
            }
        };
        if local.is_ipv4() != remote.is_ipv4() {
            return err(
                format!("{tp}.local"),
                "local and remote must both be IPv4 or both IPv6",
            );
        }
        let remote_mac = unicast_mac(&format!("{tp}.remote_mac"), &t.remote_mac)?;
        Ok((underlay, local, remote, remote_mac))
    }

    fn simple_nexthop(&self, path: &str, n: &NextHopConfig) -> R<Option<NextHop>> {
        let need = |v: &Option<String>, field: &str| match v {
            Some(s) => Ok(s.clone()),
            None => err(
                path,
                format!("a next hop of kind {:?} needs '{field}'", n.kind).to_lowercase(),
            ),
        };
        let set = [
            ("interface", n.interface.is_some()),
            ("mac", n.mac.is_some()),
            ("tunnel", n.tunnel.is_some()),
            ("encap", n.encap.is_some()),
            ("vni", n.vni.is_some()),
            ("label", n.label.is_some()),
            ("members", n.members.is_some()),
            ("network", n.network.is_some()),
            ("inner", n.inner.is_some()),
        ];
        let allowed: &[&str] = match n.kind {
            NextHopKindConfig::Interface => &["interface", "mac"],
            NextHopKindConfig::Tunnel => &["tunnel", "encap", "vni", "label"],
            NextHopKindConfig::Ecmp => &["members"],
            NextHopKindConfig::Vrf => &["network", "inner"],
            NextHopKindConfig::Drop | NextHopKindConfig::Receive => &[],
        };
        if let Some((f, _)) = set.iter().find(|(f, s)| *s && !allowed.contains(f)) {
            return err(
                format!("{path}.{f}"),
                format!("does not apply to a next hop of kind {:?}", n.kind).to_lowercase(),
            );
        }
        Ok(Some(match n.kind {
            NextHopKindConfig::Drop => NextHop::Drop,
            NextHopKindConfig::Receive => NextHop::Receive,
            NextHopKindConfig::Ecmp => return Ok(None),
            NextHopKindConfig::Interface => NextHop::Interface {
                interface: self.interface(
                    &format!("{path}.interface"),
                    &need(&n.interface, "interface")?,
                )?,
                dst_mac: unicast_mac(&format!("{path}.mac"), &need(&n.mac, "mac")?)?,
            },
            NextHopKindConfig::Vrf => NextHop::Vrf {
                vrf: self.network(&format!("{path}.network"), &need(&n.network, "network")?)?,
                inner: match n.inner {
                    Some(InnerConfig::Ethernet) => Inner::Ethernet,
                    Some(InnerConfig::Ip) => Inner::Ip,
                    None => {
                        return err(
                            path,
                            "a next hop of kind vrf needs 'inner' (ethernet or ip)",
                        );
                    }
                },
            },
            NextHopKindConfig::Tunnel => {
                let (underlay, src, dst, dst_mac) =
                    self.tunnel(&format!("{path}.tunnel"), &need(&n.tunnel, "tunnel")?)?;
                let encap = match (n.encap, n.vni, n.label) {
                    (Some(EncapConfig::Vxlan), Some(vni), None) => Encap::Vxlan { vni },
                    (Some(EncapConfig::MplsUdp), None, Some(label)) => Encap::MplsOverUdp { label },
                    (Some(EncapConfig::MplsGre), None, Some(label)) => Encap::MplsOverGre { label },
                    (None, _, _) => {
                        return err(
                            path,
                            "a tunnel next hop needs 'encap' (vxlan, mpls_udp or mpls_gre)",
                        );
                    }
                    (Some(EncapConfig::Vxlan), _, _) => {
                        return err(path, "encap vxlan needs 'vni' and no 'label'");
                    }
                    (Some(_), _, _) => {
                        return err(path, "MPLS encapsulations need 'label' and no 'vni'");
                    }
                };
                NextHop::Tunnel(Tunnel {
                    encap,
                    underlay,
                    src,
                    dst,
                    dst_mac,
                })
            }
        }))
    }

    fn nexthops(&mut self) -> R<()> {
        let mut composites = Vec::new();
        for (i, n) in self.c.nexthops.iter().enumerate() {
            let path = format!("nexthops[{i}]");
            let id = NextHopId(i as u32 + 1);
            match self.simple_nexthop(&path, n)? {
                Some(nh) => self.push(path, TableOp::UpsertNextHop(id, nh)),
                None => composites.push((i, id)),
            }
        }
        // Workloads with a peer: a next hop each, named after the interface.
        let mut next = self.c.nexthops.len() as u32 + 1;
        for (i, f) in self.c.interfaces.iter().enumerate() {
            let Some(m) = &f.peer_mac else { continue };
            let path = format!("interfaces[{i}].peer_mac");
            let dst_mac = unicast_mac(&path, m)?;
            let id = NextHopId(next);
            next += 1;
            if self.names.nexthops.insert(f.name.clone(), id).is_some() {
                return err(
                    path,
                    format!(
                        "the next hop this creates is named '{}', which a next hop already is",
                        f.name
                    ),
                );
            }
            let nh = NextHop::Interface {
                interface: InterfaceId(i as u32),
                dst_mac,
            };
            self.push(path, TableOp::UpsertNextHop(id, nh));
        }
        for (i, id) in composites {
            let path = format!("nexthops[{i}].members");
            let Some(members) = &self.c.nexthops[i].members else {
                return err(path, "an ecmp next hop needs 'members'");
            };
            let m = members
                .iter()
                .enumerate()
                .map(|(k, name)| self.nexthop(&format!("{path}[{k}]"), name))
                .collect::<R<Vec<_>>>()?;
            if m.is_empty() {
                return err(path, "an ecmp next hop needs at least one member");
            }
            self.push(
                path,
                TableOp::UpsertNextHop(id, NextHop::Composite(Ecmp::new(&m))),
            );
        }
        Ok(())
    }

    fn entries(&mut self) -> R<()> {
        let c = self.c;
        for (i, r) in c.routes.iter().enumerate() {
            let path = format!("routes[{i}]");
            let op = TableOp::AddRoute {
                vrf: self.network(&format!("{path}.network"), &r.network)?,
                prefix: prefix(&format!("{path}.prefix"), &r.prefix)?,
                nh: self.nexthop(&format!("{path}.nexthop"), &r.nexthop)?,
            };
            self.push(path, op);
        }
        for (i, b) in c.bridge.iter().enumerate() {
            let path = format!("bridge[{i}]");
            let op = TableOp::AddBridge {
                vrf: self.network(&format!("{path}.network"), &b.network)?,
                mac: mac(&format!("{path}.mac"), &b.mac)?,
                nh: self.nexthop(&format!("{path}.nexthop"), &b.nexthop)?,
            };
            self.push(path, op);
        }
        for (i, f) in c.interfaces.iter().enumerate() {
            let (Some(m), Some(net)) = (&f.peer_mac, &f.network) else {
                continue;
            };
            let path = format!("interfaces[{i}]");
            let vrf = self.network(&format!("{path}.network"), net)?;
            let nh = self.nexthop(&path, &f.name)?;
            let mac = mac(&format!("{path}.peer_mac"), m)?;
            self.push(
                format!("{path}.peer_mac"),
                TableOp::AddBridge { vrf, mac, nh },
            );
            for (k, a) in f.peer_addresses.iter().enumerate() {
                let p = format!("{path}.peer_addresses[{k}]");
                let addr = ip(&p, a)?;
                let len = if addr.is_ipv4() { 32 } else { 128 };
                let prefix = IpPrefix::new(addr, len).or_else(|e| err(&p, e.to_string()))?;
                self.push(p, TableOp::AddRoute { vrf, prefix, nh });
            }
        }
        for (i, l) in c.labels.iter().enumerate() {
            let path = format!("labels[{i}]");
            let nh = self.nexthop(&format!("{path}.nexthop"), &l.nexthop)?;
            self.push(path, TableOp::AddLabel { label: l.label, nh });
        }
        Ok(())
    }

    fn floods_and_policies(&mut self) -> R<()> {
        let c = self.c;
        for (i, n) in c.networks.iter().enumerate() {
            let path = format!("networks[{i}]");
            let vrf = VrfId(i as u32 + 1);
            let mut members = n
                .flood
                .iter()
                .enumerate()
                .map(|(k, name)| self.nexthop(&format!("{path}.flood[{k}]"), name))
                .collect::<R<Vec<_>>>()?;
            for f in &c.interfaces {
                if f.peer_mac.is_some() && f.network.as_deref() == Some(n.name.as_str()) {
                    let nh = self.nexthop(&path, &f.name)?;
                    if !members.contains(&nh) {
                        members.push(nh);
                    }
                }
            }
            if !members.is_empty() {
                self.push(format!("{path}.flood"), TableOp::SetFlood { vrf, members });
            }
            if let Some(rules) = &n.policy {
                let rules = rules
                    .iter()
                    .enumerate()
                    .map(|(k, r)| self.rule(&format!("{path}.policy[{k}]"), r))
                    .collect::<R<Vec<_>>>()?;
                let policy = Policy::new(rules).or_else(|e| {
                    let k = match e {
                        PolicyError::EmptyPortRange { rule, .. }
                        | PolicyError::PortsWithoutPortProtocol { rule } => rule,
                    };
                    err(format!("{path}.policy[{k}]"), e.to_string())
                })?;
                self.push(
                    format!("{path}.policy"),
                    TableOp::SetPolicy {
                        vrf,
                        policy: Arc::new(policy),
                    },
                );
            }
        }
        Ok(())
    }

    fn rule(&self, path: &str, r: &RuleConfig) -> R<PolicyRule> {
        let net = |field: &str, n: &Option<String>| {
            n.as_ref()
                .map(|n| self.network(&format!("{path}.{field}"), n))
                .transpose()
        };
        let pfx = |field: &str, p: &Option<String>| {
            p.as_ref()
                .map(|p| prefix(&format!("{path}.{field}"), p))
                .transpose()
        };
        Ok(PolicyRule {
            src_net: net("src_network", &r.src_network)?,
            dst_net: net("dst_network", &r.dst_network)?,
            src: pfx("src", &r.src)?,
            dst: pfx("dst", &r.dst)?,
            protocol: r
                .protocol
                .as_ref()
                .map(|p| protocol(&format!("{path}.protocol"), p))
                .transpose()?,
            src_ports: ports(&format!("{path}.src_ports"), &r.src_ports)?,
            dst_ports: ports(&format!("{path}.dst_ports"), &r.dst_ports)?,
            action: match r.action {
                ActionConfig::Allow => PolicyAction::Allow,
                ActionConfig::Deny => PolicyAction::Deny,
            },
        })
    }
}

pub(crate) fn translate(c: &Config) -> R<Translation> {
    let names = Names {
        networks: number("networks", c.networks.iter().map(|n| n.name.clone()), |i| {
            VrfId(i as u32 + 1)
        })?,
        interfaces: number(
            "interfaces",
            c.interfaces.iter().map(|n| n.name.clone()),
            |i| InterfaceId(i as u32),
        )?,
        nexthops: number("nexthops", c.nexthops.iter().map(|n| n.name.clone()), |i| {
            NextHopId(i as u32 + 1)
        })?,
        tunnels: number("tunnels", c.tunnels.iter().map(|n| n.name.clone()), |i| i)?,
    };
    if c.flows.capacity == 0 {
        return err("flows.capacity", "must be above 0");
    }
    let mut b = Builder {
        c,
        names,
        ops: Vec::new(),
        origins: Vec::new(),
    };
    b.networks()?;
    b.interfaces()?;
    b.nexthops()?;
    b.entries()?;
    b.floods_and_policies()?;
    Ok(Translation {
        ops: b.ops,
        origins: b.origins,
        names: b.names,
        flows: c.flows,
    })
}
