//! From the written configuration to a batch of table changes, resolving names to ids.
//!
//! Ids: a name that already had an id (`translate_keeping`) keeps it, so that the flows
//! and ECMP state that cache next-hop ids survive unrelated changes; a new name takes the
//! lowest id no kept name holds. From nothing, ids therefore follow document order:
//! networks (VRFs) from 1, interfaces from 0, next hops from 1 (those written first, then
//! those a workload's `peer_mac` creates). The batch is
//! ordered so that everything exists before it is referred to: VRFs, gateways,
//! interfaces, simple next hops, composites, routes, bridge entries, labels, flood lists,
//! policies. The tables then validate it whole; what they refuse is traced back to the
//! field it came from through `Translation::origins`.

use crate::ConfigError;
use crate::model::*;
use crate::nexthops::ResolvedTunnel;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::interface::{Interface, InterfaceKind, MemifMode, MemifRole, MemifSpec, Police};
use ovr_tables::policy::{Policy, PolicyAction, PolicyError, PolicyRule, PortRange};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::{TableError, TableOp, TablesWriter};
use ovr_tables::vrf::DEFAULT_ROUTER_MAC;
use ovr_wire::ethernet::MacAddr;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Names and the ids they were given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Names {
    pub interfaces: BTreeMap<String, InterfaceId>,
    pub networks: BTreeMap<String, VrfId>,
    /// Those written under `nexthops`, and those made for workloads with a `peer_mac`
    /// (named after their interface).
    pub nexthops: BTreeMap<String, NextHopId>,
    /// Tunnels are not a table of their own: their index in `tunnels`.
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

    pub fn tunnel_name(&self, index: usize) -> Option<&str> {
        find(&self.tunnels, &index)
    }
}

fn find<'a, T: PartialEq>(m: &'a BTreeMap<String, T>, v: &T) -> Option<&'a str> {
    m.iter().find(|(_, x)| *x == v).map(|(k, _)| k.as_str())
}

/// Where in the document a table change came from. A route, bridge entry or label is its
/// section's entry at an index (`routes[3]`), kept as the two: a table of a million
/// routes then holds no path string per entry (the agent keeps each installed entry's
/// origin for as long as the entry is; 24 bytes, as a `String`'s inline part). Anything
/// else is its path. An entry learnt from a peer (the agent's, not the document's) is
/// `Learnt`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Entry(Section, usize),
    Path(String),
    Learnt,
}

/// The sections of table entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Routes,
    Bridge,
    Labels,
}

impl Section {
    pub fn name(self) -> &'static str {
        match self {
            Section::Routes => "routes",
            Section::Bridge => "bridge",
            Section::Labels => "labels",
        }
    }
}

impl core::fmt::Display for Origin {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Origin::Entry(section, i) => write!(f, "{}[{i}]", section.name()),
            Origin::Path(p) => f.write_str(p),
            Origin::Learnt => f.write_str("(learnt)"),
        }
    }
}

impl From<String> for Origin {
    fn from(path: String) -> Self {
        Origin::Path(path)
    }
}

/// The configuration as table changes.
#[derive(Debug, Clone)]
pub struct Translation {
    pub ops: Vec<TableOp>,
    /// For each op, where in the document it came from ("routes[3]").
    pub origins: Vec<Origin>,
    pub names: Names,
    pub flows: FlowSettings,
}

impl Translation {
    /// Commits the whole batch, or nothing; an error names the field the refused change
    /// came from.
    pub fn apply(&self, writer: &mut TablesWriter) -> Result<(), ConfigError> {
        writer.commit(self.ops.clone()).map_err(|e| {
            let origin = self.origins.get(e.index).map(Origin::to_string);
            let origin = origin.unwrap_or_default();
            ConfigError::invalid(
                refused_at(&origin, origin.ends_with(']'), &e.error),
                e.error.to_string(),
            )
        })
    }
}

/// Where a table refusal points: at the change's origin and, when that is an object
/// (`object`: "routes[3]", a request's body, not already one of its fields), at the
/// field the refusal is about, if it is about one.
pub fn refused_at(origin: &str, object: bool, e: &TableError) -> String {
    match (object, field_of(e)) {
        (true, Some(f)) if origin.is_empty() || origin == "(body)" => f.to_string(),
        (true, Some(f)) => format!("{origin}.{f}"),
        _ => origin.to_string(),
    }
}

/// The configuration's field a table refusal is about, where it is about one field of
/// the object (the tables know values, not the document's names).
fn field_of(e: &TableError) -> Option<&'static str> {
    Some(match e {
        TableError::MtuTooSmall(_) => "mtu",
        TableError::VniOutOfRange(_) | TableError::VniTaken { .. } => "vni",
        TableError::BadLabel(_) => "label",
        TableError::InterfaceNameTaken { .. } | TableError::EmptyName { .. } => "name",
        TableError::InterfaceNeedsVrf { .. } => "network",
        TableError::GroupMac(_) => "mac",
        TableError::BadMemberCount
        | TableError::DuplicateMember(_)
        | TableError::NestedComposite(_) => "members",
        _ => return None,
    })
}

pub(crate) type R<T> = Result<T, ConfigError>;

pub(crate) fn err<T>(path: impl Into<String>, msg: impl Into<String>) -> R<T> {
    Err(ConfigError::invalid(path.into(), msg.into()))
}

/// An interface's policer, checked at its fields (burst by default the dataplane's, as
/// for the new-flow limit).
fn police(path: &str, p: PoliceConfig) -> R<Police> {
    if p.packets_per_second == 0 {
        return err(
            format!("{path}.police.packets_per_second"),
            "at least 1 (leave 'police' out for no limit)",
        );
    }
    if p.burst == Some(0) {
        return err(format!("{path}.police.burst"), "at least 1 packet");
    }
    Ok(Police {
        packets_per_second: p.packets_per_second,
        burst: p
            .burst
            .unwrap_or_else(|| ovr_dataplane::rate::default_burst(p.packets_per_second)),
    })
}

/// A memif interface's connection, each setting checked at its field.
fn memif_spec(path: &str, m: &MemifConfig) -> R<MemifSpec> {
    let at = |f: &str| format!("{path}.memif.{f}");
    let sock = m.socket.as_str();
    match sock.strip_prefix('@') {
        Some(name) if name.is_empty() || name.len() > 106 => {
            return err(at("socket"), "an abstract name of 1 to 106 bytes after '@'");
        }
        Some(_) => {}
        None if !sock.starts_with('/') || sock.len() > 107 || sock.contains('\0') => {
            return err(
                at("socket"),
                "an absolute path of at most 107 bytes (or \"@name\": abstract)",
            );
        }
        None => {}
    }
    if let Some(s) = &m.secret
        && ovr_memif::msg::secret_bytes(s).is_none()
    {
        return err(at("secret"), "at most 24 bytes, no NUL");
    }
    if !(1..=ovr_memif::MAX_LOG2_RING).contains(&m.ring_size) {
        return err(
            at("ring_size"),
            format!(
                "log2 of the ring size: 1 to {} (10 is 1024 slots)",
                ovr_memif::MAX_LOG2_RING
            ),
        );
    }
    if !(128..=65472).contains(&m.buffer_size) || !m.buffer_size.is_multiple_of(64) {
        return err(at("buffer_size"), "128 to 65472 bytes, a multiple of 64");
    }
    if !(1..=ovr_memif::MAX_QUEUES as u16).contains(&m.queues) {
        return err(
            at("queues"),
            format!("1 to {} queue pairs", ovr_memif::MAX_QUEUES),
        );
    }
    Ok(MemifSpec {
        role: match m.role {
            MemifRoleConfig::Server => MemifRole::Server,
            MemifRoleConfig::Client => MemifRole::Client,
        },
        socket: m.socket.clone(),
        id: m.id,
        secret: m.secret.clone().filter(|s| !s.is_empty()),
        mode: match m.mode {
            MemifModeConfig::Ethernet => MemifMode::Ethernet,
            MemifModeConfig::Ip => MemifMode::Ip,
        },
        ring_size: m.ring_size,
        buffer_size: m.buffer_size,
        queues: m.queues,
    })
}

pub(crate) fn unicast(path: &str, m: Mac) -> R<MacAddr> {
    if m.0.is_multicast() {
        return err(
            path,
            format!(
                "{} is a group (multicast) MAC; a unicast one is needed",
                m.0
            ),
        );
    }
    Ok(m.0)
}

/// Checks names (not empty, not used twice) and gives each an id: the one it has in
/// `keep` if any, else the lowest id from `first` that no name in `keep` holds (an id
/// given up in this change is not handed to another name in the same change).
fn number<T: Copy + Ord>(
    section: &str,
    names: impl Iterator<Item = String>,
    keep: &BTreeMap<String, T>,
    first: u32,
    id: impl Fn(u32) -> T,
) -> R<BTreeMap<String, T>> {
    let mut seen = std::collections::HashMap::new();
    let mut order = Vec::new();
    for (i, n) in names.enumerate() {
        let path = format!("{section}[{i}].name");
        if n.is_empty() {
            return err(path, "must not be empty");
        }
        if let Some(first) = seen.get(&n) {
            return Err(crate::keys::duplicate(
                path,
                &format!("{section}[{first}]"),
                &format!("'{n}' is used twice"),
            ));
        }
        seen.insert(n.clone(), i);
        order.push(n);
    }
    Ok(allocate(order, keep, first, id))
}

/// Ids for distinct names: kept ones first, then the lowest free ones in order.
fn allocate<T: Copy + Ord>(
    names: Vec<String>,
    keep: &BTreeMap<String, T>,
    first: u32,
    id: impl Fn(u32) -> T,
) -> BTreeMap<String, T> {
    let taken: std::collections::BTreeSet<T> = keep.values().copied().collect();
    let mut m = BTreeMap::new();
    let mut next = first;
    for n in names {
        let v = match keep.get(&n) {
            Some(v) => *v,
            None => {
                while taken.contains(&id(next)) {
                    next += 1;
                }
                next += 1;
                id(next - 1)
            }
        };
        m.insert(n, v);
    }
    m
}

pub(crate) struct Builder<'a> {
    pub(crate) c: &'a Config,
    pub(crate) names: Names,
    /// Where each name is written in its section.
    pub(crate) index: Index,
    pub(crate) tunnels: Vec<ResolvedTunnel>,
    ops: Vec<TableOp>,
    origins: Vec<Origin>,
}

impl Builder<'_> {
    pub(crate) fn push(&mut self, origin: impl Into<Origin>, op: TableOp) {
        self.ops.push(op);
        self.origins.push(origin.into());
    }

    pub(crate) fn network(&self, path: &str, name: &str) -> R<VrfId> {
        match self.names.networks.get(name) {
            Some(v) => Ok(*v),
            None => err(path, format!("no network named '{name}'")),
        }
    }

    pub(crate) fn interface(&self, path: &str, name: &str) -> R<InterfaceId> {
        match self.names.interfaces.get(name) {
            Some(v) => Ok(*v),
            None => err(path, format!("no interface named '{name}'")),
        }
    }

    pub(crate) fn nexthop(&self, path: &str, name: &str) -> R<NextHopId> {
        match self.names.nexthops.get(name) {
            Some(v) => Ok(*v),
            None => err(path, format!("no next hop named '{name}'")),
        }
    }

    /// The router MAC of the network written at `i`.
    pub(crate) fn router_mac(&self, i: usize) -> R<MacAddr> {
        match self.c.networks[i].router_mac {
            Some(m) => unicast(&format!("networks[{i}].router_mac"), m),
            None => Ok(DEFAULT_ROUTER_MAC),
        }
    }

    fn networks(&mut self) -> R<()> {
        for (i, n) in self.c.networks.iter().enumerate() {
            let id = self.network("", &n.name)?;
            let path = format!("networks[{i}]");
            self.push(
                path.clone(),
                TableOp::UpsertVrf {
                    id,
                    name: n.name.clone(),
                    vni: n.vni,
                },
            );
        }
        for (i, n) in self.c.networks.iter().enumerate() {
            let vrf = self.network("", &n.name)?;
            let mac = self.router_mac(i)?;
            let addresses = n.gateways.iter().map(|a| a.0).collect();
            self.push(
                format!("networks[{i}].gateways"),
                TableOp::SetGateway {
                    vrf,
                    mac,
                    addresses,
                },
            );
            match n.flow_quota {
                Some(0) => {
                    return err(
                        format!("networks[{i}].flow_quota"),
                        "0 would refuse every flow: give at least 1, or leave it out",
                    );
                }
                Some(max) => self.push(
                    format!("networks[{i}].flow_quota"),
                    TableOp::SetFlowQuota {
                        vrf,
                        max: Some(max),
                    },
                ),
                None => {}
            }
        }
        self.route_targets()
    }

    /// Route targets are the speaker's business (ovrd's EVPN), not the tables': checked
    /// here so that a host never imports one route target into two networks.
    fn route_targets(&self) -> R<()> {
        let mut imported: BTreeMap<RouteTarget, &str> = BTreeMap::new();
        for (i, n) in self.c.networks.iter().enumerate() {
            let Some(rt) = &n.route_targets else { continue };
            let path = format!("networks[{i}].route_targets");
            if n.vni.is_none() {
                return err(path, "a network without a vni is not carried by BGP");
            }
            for (what, list) in [("import", &rt.import), ("export", &rt.export)] {
                if list.is_empty() {
                    return err(
                        format!("{path}.{what}"),
                        "at least one route target (auto: ASN:VNI)",
                    );
                }
                for (k, t) in list.iter().enumerate() {
                    if list[..k].contains(t) {
                        return err(
                            format!("{path}.{what}[{k}]"),
                            format!("{t} is listed twice"),
                        );
                    }
                }
            }
            for (k, t) in rt.import.iter().enumerate() {
                if *t == RouteTarget::Auto {
                    continue;
                }
                if let Some(other) = imported.insert(*t, &n.name) {
                    return err(
                        format!("{path}.import[{k}]"),
                        format!(
                            "{t} is imported by network '{other}' already (a route target names one network of a host)"
                        ),
                    );
                }
            }
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
                (None, false) => {
                    return err(
                        path,
                        format!("a {:?} interface needs 'network'", f.kind).to_lowercase(),
                    );
                }
                (Some(n), false) => Some(self.network(&format!("{path}.network"), n)?),
                (None, true) => None,
            };
            let mac = match (f.mac, vrf) {
                (Some(m), _) => unicast(&format!("{path}.mac"), m)?,
                (None, Some(_)) => {
                    let net = f.network.as_deref().unwrap_or_default();
                    self.router_mac(self.index.networks.get(net).copied().unwrap_or_default())?
                }
                (None, None) => {
                    return err(format!("{path}.mac"), "an underlay interface needs its MAC");
                }
            };
            if underlay && f.peer_mac.is_some() {
                return err(
                    format!("{path}.peer_mac"),
                    "only a workload interface has a peer",
                );
            }
            // An underlay may be a memif interface too: the uplink is then another
            // switch's (a VPP or DPDK host that owns the NIC), not a kernel interface.
            let memif = match (f.kind, &f.memif) {
                (InterfaceKindConfig::Memif | InterfaceKindConfig::Underlay, Some(m)) => {
                    Some(memif_spec(&path, m)?)
                }
                (InterfaceKindConfig::Memif, None) => {
                    return err(
                        format!("{path}.memif"),
                        "a memif interface needs its connection (socket, role, id)",
                    );
                }
                (_, Some(_)) => {
                    return err(
                        format!("{path}.memif"),
                        "only an interface of kind memif or underlay has one",
                    );
                }
                (_, None) => None,
            };
            if f.peer_mac.is_none() && !f.peer_addresses.is_empty() {
                return err(
                    format!("{path}.peer_addresses"),
                    "need 'peer_mac' (the next hop they are routed to)",
                );
            }
            let police = f.police.map(|p| police(&path, p)).transpose()?;
            self.push(
                path,
                TableOp::UpsertInterface(Interface {
                    id: self.interface("", &f.name)?,
                    name: f.name.clone(),
                    kind: match f.kind {
                        InterfaceKindConfig::Underlay => InterfaceKind::Underlay,
                        InterfaceKindConfig::Workload => InterfaceKind::Workload,
                        InterfaceKindConfig::Tap => InterfaceKind::Tap,
                        InterfaceKindConfig::Memif => InterfaceKind::Memif,
                    },
                    vrf,
                    mac,
                    addresses: f.addresses.iter().map(|a| a.0).collect(),
                    mtu: f.mtu,
                    policy: f.policy,
                    admin_up: f.admin_up,
                    memif,
                    police,
                }),
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
                prefix: r.prefix.0,
                nh: self.nexthop(&format!("{path}.nexthop"), &r.nexthop)?,
            };
            self.push(Origin::Entry(Section::Routes, i), op);
        }
        // A workload's peer: host routes, then (after every route) a bridge entry.
        let mut peers = Vec::new();
        for (i, f) in c.interfaces.iter().enumerate() {
            let (Some(m), Some(net)) = (f.peer_mac, &f.network) else {
                continue;
            };
            let path = format!("interfaces[{i}]");
            let vrf = self.network(&format!("{path}.network"), net)?;
            let nh = self.nexthop(&path, &f.name)?;
            for (k, addr) in f.peer_addresses.iter().enumerate() {
                let p = format!("{path}.peer_addresses[{k}]");
                let len = if addr.is_ipv4() { 32 } else { 128 };
                let prefix = IpPrefix::new(*addr, len).or_else(|e| err(&p, e.to_string()))?;
                self.push(p, TableOp::AddRoute { vrf, prefix, nh });
            }
            peers.push((format!("{path}.peer_mac"), vrf, m.0, nh));
        }
        for (path, vrf, mac, nh) in peers {
            self.push(path, TableOp::AddBridge { vrf, mac, nh });
        }
        for (i, b) in c.bridge.iter().enumerate() {
            let path = format!("bridge[{i}]");
            let op = TableOp::AddBridge {
                vrf: self.network(&format!("{path}.network"), &b.network)?,
                mac: b.mac.0,
                nh: self.nexthop(&format!("{path}.nexthop"), &b.nexthop)?,
            };
            self.push(Origin::Entry(Section::Bridge, i), op);
        }
        for (i, l) in c.labels.iter().enumerate() {
            let path = format!("labels[{i}]");
            let nh = self.nexthop(&format!("{path}.nexthop"), &l.nexthop)?;
            self.push(
                Origin::Entry(Section::Labels, i),
                TableOp::AddLabel { label: l.label, nh },
            );
        }
        Ok(())
    }

    fn floods(&mut self) -> R<()> {
        let c = self.c;
        for (i, n) in c.networks.iter().enumerate() {
            let path = format!("networks[{i}]");
            let mut members = n
                .flood
                .iter()
                .enumerate()
                .map(|(k, name)| self.nexthop(&format!("{path}.flood[{k}]"), name))
                .collect::<R<Vec<_>>>()?;
            for (k, f) in c.interfaces.iter().enumerate() {
                if f.peer_mac.is_some() && f.network.as_deref() == Some(n.name.as_str()) {
                    let nh = self.nexthop(&format!("interfaces[{k}]"), &f.name)?;
                    if !members.contains(&nh) {
                        members.push(nh);
                    }
                }
            }
            if !members.is_empty() {
                let vrf = self.network("", &n.name)?;
                self.push(format!("{path}.flood"), TableOp::SetFlood { vrf, members });
            }
        }
        Ok(())
    }

    fn policies(&mut self) -> R<()> {
        for (i, n) in self.c.networks.iter().enumerate() {
            let Some(rules) = &n.policy else { continue };
            let path = format!("networks[{i}].policy");
            let rules = rules
                .iter()
                .enumerate()
                .map(|(k, r)| self.rule(&format!("{path}[{k}]"), r))
                .collect::<R<Vec<_>>>()?;
            let policy = Policy::new(rules).or_else(|e| match e {
                PolicyError::EmptyPortRange { rule, first, last } => err(
                    format!("{path}[{rule}]"),
                    format!("port range {first}-{last} is empty"),
                ),
                PolicyError::PortsWithoutPortProtocol { rule } => err(
                    format!("{path}[{rule}]"),
                    "port ranges need protocol tcp (6) or udp (17)",
                ),
            })?;
            let vrf = self.network("", &n.name)?;
            self.push(
                path,
                TableOp::SetPolicy {
                    vrf,
                    policy: Arc::new(policy),
                },
            );
        }
        Ok(())
    }

    fn rule(&self, path: &str, r: &RuleConfig) -> R<PolicyRule> {
        let net = |field: &str, n: &Option<String>| {
            n.as_ref()
                .map(|n| self.network(&format!("{path}.{field}"), n))
                .transpose()
        };
        Ok(PolicyRule {
            src_net: net("src_network", &r.src_network)?,
            dst_net: net("dst_network", &r.dst_network)?,
            src: r.src.map(|p| p.0),
            dst: r.dst.map(|p| p.0),
            protocol: r.protocol.map(|p| p.0),
            src_ports: r.src_ports.map_or(PortRange::ANY, |p| p.0),
            dst_ports: r.dst_ports.map_or(PortRange::ANY, |p| p.0),
            action: match (r.action, self.chain_id(path, r)?) {
                (_, Some(chain)) => PolicyAction::Chain(chain),
                (ActionConfig::Deny, None) => PolicyAction::Deny,
                (_, None) => PolicyAction::Allow,
            },
        })
    }
}

/// Positions of names in their sections.
#[derive(Default)]
pub(crate) struct Index {
    pub(crate) networks: BTreeMap<String, usize>,
    pub(crate) interfaces: BTreeMap<String, usize>,
    pub(crate) nexthops: BTreeMap<String, usize>,
}

fn positions<'a>(names: impl Iterator<Item = &'a String>) -> BTreeMap<String, usize> {
    names.enumerate().map(|(i, n)| (n.clone(), i)).collect()
}

pub(crate) fn translate(c: &Config, keep: &Names) -> R<Translation> {
    crate::keys::check(c)?;
    let mut names = Names {
        networks: number(
            "networks",
            c.networks.iter().map(|n| n.name.clone()),
            &keep.networks,
            1,
            VrfId,
        )?,
        interfaces: number(
            "interfaces",
            c.interfaces.iter().map(|n| n.name.clone()),
            &keep.interfaces,
            0,
            InterfaceId,
        )?,
        nexthops: number(
            "nexthops",
            c.nexthops.iter().map(|n| n.name.clone()),
            &BTreeMap::new(),
            1,
            NextHopId,
        )?,
        tunnels: number(
            "tunnels",
            c.tunnels.iter().map(|n| n.name.clone()),
            &BTreeMap::new(),
            0,
            |i| i as usize,
        )?,
    };
    // Next hops written and those made for workloads' peers share one id space.
    let mut nh_names: Vec<String> = c.nexthops.iter().map(|n| n.name.clone()).collect();
    for (i, f) in c.interfaces.iter().enumerate() {
        if f.peer_mac.is_none() {
            continue;
        }
        if names.nexthops.contains_key(&f.name) {
            return err(
                format!("interfaces[{i}].peer_mac"),
                format!(
                    "the next hop this creates is named '{}', which a next hop already is",
                    f.name
                ),
            );
        }
        nh_names.push(f.name.clone());
    }
    // And those made for each side of a service instance.
    // (Two instances of one name are refused at their name by `check_services`.)
    let mut made = std::collections::HashSet::new();
    for (name, path) in crate::chains::nexthop_names(c) {
        if !made.insert(name.clone()) {
            continue;
        }
        if nh_names.contains(&name) {
            return err(
                path,
                format!("the next hop this creates is named '{name}', which a next hop already is"),
            );
        }
        nh_names.push(name);
    }
    names.nexthops = allocate(nh_names, &keep.nexthops, 1, NextHopId);
    if c.flows.capacity == 0 {
        return err("flows.capacity", "must be above 0");
    }
    let index = Index {
        networks: positions(c.networks.iter().map(|n| &n.name)),
        interfaces: positions(c.interfaces.iter().map(|n| &n.name)),
        nexthops: positions(c.nexthops.iter().map(|n| &n.name)),
    };
    let mut b = Builder {
        c,
        names,
        index,
        tunnels: Vec::new(),
        ops: Vec::new(),
        origins: Vec::new(),
    };
    b.check_services()?;
    b.networks()?;
    b.interfaces()?;
    b.resolve_tunnels()?;
    b.nexthops()?;
    b.entries()?;
    b.floods()?;
    b.chains()?;
    b.policies()?;
    Ok(Translation {
        ops: b.ops,
        origins: b.origins,
        names: b.names,
        flows: c.flows,
    })
}
