//! Services and chains: checked, and translated into a next hop per instance side and
//! the chain table.
//!
//! What this version refuses, each at its field: a function in two chains (or twice in
//! one: a port belongs to one place, which is how its packets find their way on), a
//! chain used from two networks (traffic leaving it is looked up in the network it came
//! from), and a port shared by two instances.
//!
//! A transparent function (a bump in the wire) has no MAC: ovr sends into one side
//! frames addressed to the gateway of the other side's network, which the function
//! passes through unchanged, so they come back out routed by ovr as an in-network
//! function's would.

use crate::model::{
    ActionConfig, ProbeKindConfig, RuleConfig, ServiceConfig, ServiceModeConfig, ServicePortConfig,
};
use crate::translate::{Builder, R, err, unicast};
use ovr_tables::chain::{
    Chain, ChainId, Function, FunctionMode, Instance, Probe, ProbeKind, ProbeTarget,
};
use ovr_tables::ids::VrfId;
use ovr_tables::nexthop::{ECMP_BUCKETS, NextHop};
use ovr_tables::state::TableOp;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Whether two IPv4 addresses are in one subnet of length `len`.
fn same_subnet(a: core::net::Ipv4Addr, b: core::net::Ipv4Addr, len: u8) -> bool {
    let mask = u32::MAX
        .checked_shl(32 - u32::from(len.min(32)))
        .unwrap_or(0);
    u32::from(a) & mask == u32::from(b) & mask
}

/// The name of the next hop made for one side of an instance.
pub(crate) fn nexthop_name(service: &str, instance: &str, side: &str) -> String {
    format!("{service}/{instance}/{side}")
}

/// The names of the next hops services make, each with where it comes from.
pub(crate) fn nexthop_names(c: &crate::Config) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for (i, s) in c.services.iter().enumerate() {
        for (k, inst) in s.instances.iter().enumerate() {
            for side in ["left", "right"] {
                v.push((
                    nexthop_name(&s.name, &inst.name, side),
                    format!("services[{i}].instances[{k}].name"),
                ));
            }
        }
    }
    v
}

impl Builder<'_> {
    /// Checks service, instance and chain names and where ports and functions are used.
    pub(crate) fn check_services(&self) -> R<()> {
        let c = self.c;
        let mut services = HashMap::new();
        let mut ports: HashMap<String, String> = HashMap::new();
        for (i, s) in c.services.iter().enumerate() {
            let path = format!("services[{i}]");
            if s.name.is_empty() || s.name.contains('/') {
                return err(format!("{path}.name"), "must not be empty or contain '/'");
            }
            if let Some(first) = services.insert(s.name.as_str(), i) {
                return Err(crate::keys::duplicate(
                    format!("{path}.name"),
                    &format!("services[{first}]"),
                    &format!("'{}' is used twice", s.name),
                ));
            }
            if s.instances.len() > ECMP_BUCKETS {
                return err(
                    format!("{path}.instances"),
                    format!("at most {ECMP_BUCKETS} instances (the ECMP group's buckets)"),
                );
            }
            self.check_probe(&path, s)?;
            let mut names = HashMap::new();
            for (k, inst) in s.instances.iter().enumerate() {
                let ip = format!("{path}.instances[{k}]");
                if inst.name.is_empty() || inst.name.contains('/') {
                    return err(format!("{ip}.name"), "must not be empty or contain '/'");
                }
                if let Some(first) = names.insert(inst.name.as_str(), k) {
                    return Err(crate::keys::duplicate(
                        format!("{ip}.name"),
                        &format!("{path}.instances[{first}]"),
                        &format!("'{}' is used twice", inst.name),
                    ));
                }
                for (side, p) in [("left", &inst.left), ("right", &inst.right)] {
                    let at = format!("{ip}.{side}");
                    if let Some(via) = &p.via {
                        self.check_remote_port(&at, s.mode, p, via, &mut ports)?;
                        continue;
                    }
                    let Some(&f) = self.index.interfaces.get(&p.interface) else {
                        return err(
                            format!("{at}.interface"),
                            format!("no interface named '{}'", p.interface),
                        );
                    };
                    if c.interfaces[f].network.is_none() {
                        return err(
                            format!("{at}.interface"),
                            format!(
                                "'{}' has no network: a function's port needs one (its gateway answers the function)",
                                p.interface
                            ),
                        );
                    }
                    if let Some(first) = ports.insert(p.interface.clone(), at.clone()) {
                        return Err(crate::keys::duplicate(
                            format!("{at}.interface"),
                            &first,
                            &format!("interface '{}' is a port of one instance side", p.interface),
                        ));
                    }
                    match (s.mode, p.mac) {
                        (ServiceModeConfig::InNetwork, None) => {
                            return err(
                                format!("{at}.mac"),
                                "an in-network function needs its MAC on each side (where ovr sends)",
                            );
                        }
                        (ServiceModeConfig::Transparent, Some(_)) => {
                            return err(
                                format!("{at}.mac"),
                                "a transparent function has no MAC of its own: leave it out",
                            );
                        }
                        _ => {}
                    }
                    // A bump in the wire passes frames addressed to the gateway from one
                    // port to the other: a port sending with the gateway's MAC would
                    // teach a bridging function that MAC on the wrong side.
                    if s.mode == ServiceModeConfig::Transparent {
                        let net = c.interfaces[f].network.as_deref().unwrap_or_default();
                        let gateway = self.router_mac(
                            self.index.networks.get(net).copied().unwrap_or_default(),
                        )?;
                        if c.interfaces[f].mac.is_none_or(|m| m.0 == gateway) {
                            return err(
                                format!("{at}.interface"),
                                format!(
                                    "'{}' needs a MAC of its own (not the gateway's) to be a transparent function's port",
                                    p.interface
                                ),
                            );
                        }
                    }
                }
            }
        }
        let mut chains = HashMap::new();
        let mut used: HashMap<&str, String> = HashMap::new();
        for (i, ch) in c.chains.iter().enumerate() {
            let path = format!("chains[{i}]");
            if ch.name.is_empty() {
                return err(format!("{path}.name"), "must not be empty");
            }
            if let Some(first) = chains.insert(ch.name.as_str(), i) {
                return Err(crate::keys::duplicate(
                    format!("{path}.name"),
                    &format!("chains[{first}]"),
                    &format!("'{}' is used twice", ch.name),
                ));
            }
            if ch.functions.is_empty() {
                return err(
                    format!("{path}.functions"),
                    "a chain needs at least one function",
                );
            }
            for (k, f) in ch.functions.iter().enumerate() {
                let at = format!("{path}.functions[{k}]");
                if !services.contains_key(f.as_str()) {
                    return err(at, format!("no service named '{f}'"));
                }
                if let Some(first) = used.insert(f.as_str(), at.clone()) {
                    return Err(crate::keys::duplicate(
                        at,
                        &first,
                        &format!("service '{f}' is in one place of one chain"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// A function's probe: its timing within bounds, and with `arp` or `icmp` an
    /// in-network function whose sides here each give an IPv4 address with a gateway of
    /// the port's network in its subnet (the probe's source).
    fn check_probe(&self, path: &str, s: &ServiceConfig) -> R<()> {
        let p = &s.probe;
        if let Err((field, why)) = p.check_timing() {
            return err(format!("{path}.probe.{field}"), why);
        }
        if p.kind == ProbeKindConfig::Link {
            return Ok(());
        }
        if s.mode == ServiceModeConfig::Transparent {
            return err(
                format!("{path}.probe.kind"),
                "a transparent function has no address to probe: only `link` is supported",
            );
        }
        for (k, inst) in s.instances.iter().enumerate() {
            for (side, port) in [("left", &inst.left), ("right", &inst.right)] {
                if port.via.is_none() {
                    self.probe_target(&format!("{path}.instances[{k}].{side}"), port)?;
                }
            }
        }
        Ok(())
    }

    /// The addresses a probe of a side of this host uses: the gateway's in the port's
    /// network whose subnet holds the function's address, and that address.
    fn probe_target(&self, at: &str, port: &ServicePortConfig) -> R<ProbeTarget> {
        let to = match port.address {
            Some(core::net::IpAddr::V4(a)) => a,
            Some(_) => {
                return err(
                    format!("{at}.address"),
                    "probes (arp, icmp) are sent to IPv4 addresses only",
                );
            }
            None => {
                return err(
                    format!("{at}.address"),
                    "required with probe arp or icmp: the function's address the probe is sent to",
                );
            }
        };
        let net = self
            .index
            .interfaces
            .get(&port.interface)
            .and_then(|&f| self.c.interfaces[f].network.as_deref())
            .and_then(|n| self.c.networks.iter().find(|x| x.name == n));
        let Some(net) = net else {
            return err(
                format!("{at}.interface"),
                format!("'{}' has no network", port.interface),
            );
        };
        let from = net.gateways.iter().find_map(|g| match g.0.addr {
            core::net::IpAddr::V4(a) if same_subnet(a, to, g.0.prefix_len) => Some(a),
            _ => None,
        });
        match from {
            Some(from) => Ok(ProbeTarget { from, to }),
            None => err(
                format!("{at}.address"),
                format!(
                    "network '{}' has no gateway address in the subnet of {to} to send the probe from",
                    net.name
                ),
            ),
        }
    }

    /// A side of an instance on another host: `via` names a VXLAN tunnel next hop, the
    /// function routes (its MAC is where that host bridges the frame), and no other side
    /// is the same MAC behind the same next hop.
    fn check_remote_port(
        &self,
        at: &str,
        mode: ServiceModeConfig,
        p: &crate::model::ServicePortConfig,
        via: &str,
        ports: &mut HashMap<String, String>,
    ) -> R<()> {
        if !p.interface.is_empty() {
            return err(
                format!("{at}.interface"),
                "give either an interface of this host or `via` (an instance on another host), not both",
            );
        }
        if mode == ServiceModeConfig::Transparent {
            return err(
                format!("{at}.via"),
                "a transparent function's instances must be on this host (it has no MAC to be bridged to)",
            );
        }
        let Some(n) = self.c.nexthops.iter().find(|n| n.name == via) else {
            return err(format!("{at}.via"), format!("no next hop named '{via}'"));
        };
        let vxlan = n.kind == crate::model::NextHopKindConfig::Tunnel
            && n.encap.unwrap_or(crate::model::EncapConfig::Vxlan)
                == crate::model::EncapConfig::Vxlan;
        if !vxlan {
            return err(
                format!("{at}.via"),
                format!(
                    "'{via}' is not a VXLAN tunnel next hop (an instance on another host is reached through one)"
                ),
            );
        }
        let Some(mac) = p.mac else {
            return err(
                format!("{at}.mac"),
                "an in-network function needs its MAC on each side (where ovr sends)",
            );
        };
        if let Some(first) = ports.insert(format!("{via} {mac}"), at.to_string()) {
            return Err(crate::keys::duplicate(
                format!("{at}.via"),
                &first,
                &format!("{mac} behind '{via}' is the port of one instance side"),
            ));
        }
        Ok(())
    }

    /// A next hop to each side of every instance (ids given with the others').
    pub(crate) fn service_nexthops(&mut self) -> R<()> {
        for (i, s) in self.c.services.iter().enumerate() {
            for (k, inst) in s.instances.iter().enumerate() {
                for (side, p, other) in [
                    ("left", &inst.left, &inst.right),
                    ("right", &inst.right, &inst.left),
                ] {
                    let path = format!("services[{i}].instances[{k}].{side}");
                    if let Some(via) = &p.via {
                        let nh = self.remote_port_nexthop(&path, via, p.mac)?;
                        let id = self.nexthop(&path, &nexthop_name(&s.name, &inst.name, side))?;
                        self.push(path, TableOp::UpsertNextHop(id, nh));
                        continue;
                    }
                    let dst_mac = match (s.mode, p.mac) {
                        (_, Some(mac)) => unicast(&format!("{path}.mac"), mac)?,
                        // Transparent: addressed to the gateway of the other side's
                        // network, the frame comes back out of it routed by ovr.
                        (ServiceModeConfig::Transparent, None) => {
                            self.port_gateway(&format!("{path}.interface"), &other.interface)?
                        }
                        (ServiceModeConfig::InNetwork, None) => {
                            return err(format!("{path}.mac"), "required");
                        }
                    };
                    let interface = self.interface(&format!("{path}.interface"), &p.interface)?;
                    let id = self.nexthop(&path, &nexthop_name(&s.name, &inst.name, side))?;
                    self.push(
                        path,
                        TableOp::UpsertNextHop(id, NextHop::Interface { interface, dst_mac }),
                    );
                }
            }
        }
        Ok(())
    }

    /// The next hop to a port on another host: its tunnel next hop, the frame inside
    /// addressed to the function's MAC.
    fn remote_port_nexthop(
        &self,
        path: &str,
        via: &str,
        mac: Option<crate::values::Mac>,
    ) -> R<NextHop> {
        let Some(n) = self.c.nexthops.iter().find(|n| n.name == via) else {
            return err(format!("{path}.via"), format!("no next hop named '{via}'"));
        };
        let Some(mac) = mac else {
            return err(format!("{path}.mac"), "required");
        };
        let inner = unicast(&format!("{path}.mac"), mac)?;
        match self.simple_nexthop(&format!("{path}.via"), n)? {
            Some(NextHop::Tunnel(mut t)) => {
                t.inner_dst = Some(inner);
                Ok(NextHop::Tunnel(t))
            }
            _ => err(
                format!("{path}.via"),
                format!("'{via}' is not a VXLAN tunnel next hop"),
            ),
        }
    }

    /// The gateway MAC of a port's network.
    fn port_gateway(&self, path: &str, interface: &str) -> R<ovr_wire::ethernet::MacAddr> {
        let Some(&f) = self.index.interfaces.get(interface) else {
            return err(path, format!("no interface named '{interface}'"));
        };
        let net = self.c.interfaces[f].network.as_deref().unwrap_or_default();
        match self.index.networks.get(net) {
            Some(&n) => self.router_mac(n),
            None => err(path, format!("no network named '{net}'")),
        }
    }

    /// The network each chain is used from, checking the rules that name chains.
    fn chain_sources(&self) -> R<BTreeMap<String, (VrfId, String)>> {
        let mut from: BTreeMap<String, (VrfId, String)> = BTreeMap::new();
        for (i, n) in self.c.networks.iter().enumerate() {
            for (k, r) in n.policy.iter().flatten().enumerate() {
                let path = format!("networks[{i}].policy[{k}]");
                let Some(name) = self.rule_chain(&path, r)? else {
                    continue;
                };
                let vrf = self.network(&path, &n.name)?;
                match from.get(name) {
                    Some((v, first)) if *v != vrf => {
                        return err(
                            format!("{path}.chain"),
                            format!(
                                "chain '{name}' is already used from another network ({first}): a chain serves one source network"
                            ),
                        );
                    }
                    Some(_) => {}
                    None => {
                        from.insert(name.to_string(), (vrf, path));
                    }
                }
            }
        }
        Ok(from)
    }

    /// The chain a rule names: required with `action: chain`, refused otherwise.
    fn rule_chain<'r>(&self, path: &str, r: &'r RuleConfig) -> R<Option<&'r str>> {
        match (r.action, &r.chain) {
            (ActionConfig::Chain, None) => {
                err(format!("{path}.chain"), "required with action chain")
            }
            (ActionConfig::Chain, Some(name)) => {
                if !self.c.chains.iter().any(|c| &c.name == name) {
                    return err(format!("{path}.chain"), format!("no chain named '{name}'"));
                }
                Ok(Some(name))
            }
            (_, Some(_)) => err(format!("{path}.chain"), "only with action chain"),
            (_, None) => Ok(None),
        }
    }

    /// The id of the chain a rule names (its index in `chains`).
    pub(crate) fn chain_id(&self, path: &str, r: &RuleConfig) -> R<Option<ChainId>> {
        Ok(self.rule_chain(path, r)?.and_then(|name| {
            self.c
                .chains
                .iter()
                .position(|c| c.name == name)
                .map(|i| ChainId(i as u32))
        }))
    }

    /// The chain table, when there are services or chains.
    pub(crate) fn chains(&mut self) -> R<()> {
        if self.c.chains.is_empty() && self.c.services.is_empty() {
            return Ok(());
        }
        let from = self.chain_sources()?;
        let mut chains = Vec::with_capacity(self.c.chains.len());
        for (i, ch) in self.c.chains.iter().enumerate() {
            let mut functions = Vec::new();
            for (k, name) in ch.functions.iter().enumerate() {
                let at = format!("chains[{i}].functions[{k}]");
                let Some(s) = self.c.services.iter().find(|s| &s.name == name) else {
                    return err(at, format!("no service named '{name}'"));
                };
                let mut instances = Vec::new();
                for inst in &s.instances {
                    let nh = |side| self.nexthop(&at, &nexthop_name(&s.name, &inst.name, side));
                    let port = |p: &crate::model::ServicePortConfig| match p.via {
                        Some(_) => Ok(None),
                        None => self.interface(&at, &p.interface).map(Some),
                    };
                    // Sides of this host are probed; one on another host is its
                    // host's to follow.
                    let target = |p: &ServicePortConfig, side: &str| {
                        if s.probe.kind == ProbeKindConfig::Link || p.via.is_some() {
                            return Ok(None);
                        }
                        self.probe_target(&format!("{at}.{}.{side}", inst.name), p)
                            .map(Some)
                    };
                    instances.push(Instance {
                        name: inst.name.clone(),
                        left: port(&inst.left)?,
                        right: port(&inst.right)?,
                        left_nh: nh("left")?,
                        right_nh: nh("right")?,
                        left_probe: target(&inst.left, "left")?,
                        right_probe: target(&inst.right, "right")?,
                    });
                }
                functions.push(Function {
                    name: s.name.clone(),
                    mode: match s.mode {
                        ServiceModeConfig::InNetwork => FunctionMode::InNetwork,
                        ServiceModeConfig::Transparent => FunctionMode::Transparent,
                    },
                    probe: Probe {
                        kind: match s.probe.kind {
                            ProbeKindConfig::Link => ProbeKind::Link,
                            ProbeKindConfig::Arp => ProbeKind::Arp,
                            ProbeKindConfig::Icmp => ProbeKind::Icmp,
                        },
                        interval_ms: s.probe.interval_ms,
                        failures: s.probe.failures,
                    },
                    instances,
                });
            }
            chains.push(Chain {
                id: ChainId(i as u32),
                name: ch.name.clone(),
                from: from.get(&ch.name).map(|(v, _)| *v),
                functions,
            });
        }
        self.push("chains".to_string(), TableOp::SetChains(Arc::new(chains)));
        Ok(())
    }
}
