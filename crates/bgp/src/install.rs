//! What is learnt through BGP, as forwarding state: the host's configuration (its intent:
//! the static file, or what the cluster derived) with the learnt reachability added to
//! it, whole, so that the agent installs only the difference. Per remote VTEP a tunnel
//! `evpn:VTEP` (its underlay MAC resolved beforehand: `neighbours`); per VTEP and VNI a
//! next hop `evpn:VTEP:VNI`; per network its flood list (type 3), bridge entries (type
//! 2 MACs), host routes (type 2 MAC/IP) and routes to prefixes (type 5, an ECMP next hop
//! `evpn:ecmp:NETWORK:PREFIX` where several VTEPs advertise one).
//!
//! What the intent already has wins, so that the same endpoint known twice (from etcd
//! and from BGP) is installed once: a VTEP the intent has a tunnel to keeps that tunnel;
//! a MAC with a bridge entry, an address with a route, a VTEP already in a network's
//! flood list are not added again; a MAC or address of a local workload stays local.
//! Names starting with `evpn:` are this layer's: `strip` takes them away again.

use crate::evpn::Encap;
use crate::learnt::{Reach, Remote};
use core::net::IpAddr;
use ovr_config::model::{
    BridgeConfig, Config, EncapConfig, InterfaceKindConfig, NextHopConfig, NextHopKindConfig,
    RouteConfig, TunnelConfig,
};
use ovr_config::values::{Mac, Prefix};
use ovr_tables::prefix::{IpPrefix, mask};
use std::collections::{BTreeMap, BTreeSet};

/// The prefix of every name this layer makes.
pub const PREFIX: &str = "evpn:";

/// The intent with what is learnt, and what could not be installed yet.
#[derive(Debug, Clone, Default)]
pub struct Layered {
    pub config: Config,
    /// VTEPs whose underlay MAC is not known yet: nothing through them is installed.
    pub unresolved: BTreeSet<IpAddr>,
    /// Learnt entries not installed, by reason (counted per entry).
    pub skipped: BTreeMap<&'static str, u64>,
    /// Entries installed from BGP: tunnels, bridge entries, host routes, prefixes.
    pub installed: Counts,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub tunnels: usize,
    pub flood: usize,
    pub macs: usize,
    pub hosts: usize,
    pub prefixes: usize,
}

/// The VTEPs `reach` needs a tunnel to (VXLAN ones: the others are not installed).
pub fn vteps(reach: &Reach) -> BTreeSet<IpAddr> {
    let flood = reach.flood.values().flatten();
    let macs = reach.macs.values();
    let prefixes = reach.prefixes.values().flatten();
    flood
        .chain(macs)
        .chain(prefixes)
        .filter(|r| r.encap == Encap::Vxlan)
        .map(|r| r.vtep)
        .collect()
}

/// `intent` without what an earlier `layer` added to it.
pub fn strip(intent: &Config) -> Config {
    let ours = |n: &str| n.starts_with(PREFIX);
    let mut c = intent.clone();
    c.tunnels.retain(|t| !ours(&t.name));
    c.nexthops.retain(|n| !ours(&n.name));
    c.bridge.retain(|b| !ours(&b.nexthop));
    c.routes.retain(|r| !ours(&r.nexthop));
    for n in &mut c.networks {
        n.flood.retain(|f| !ours(f));
    }
    c
}

/// `intent` with `reach` added; `neighbours` are the underlay MACs of VTEPs resolved so far.
pub fn layer(intent: &Config, reach: &Reach, neighbours: &BTreeMap<IpAddr, Mac>) -> Layered {
    let mut b = Builder {
        c: intent.clone(),
        out: Layered::default(),
        tunnels: intent
            .tunnels
            .iter()
            .map(|t| (t.remote, t.name.clone()))
            .collect(),
        nexthops: BTreeSet::new(),
        neighbours,
        underlay: intent
            .interfaces
            .iter()
            .find(|i| i.kind == InterfaceKindConfig::Underlay)
            .map(|i| i.name.clone()),
    };
    b.flood(reach);
    b.macs(reach);
    b.hosts(reach);
    b.prefixes(reach);
    b.out.config = b.c;
    b.out
}

struct Builder<'a> {
    c: Config,
    out: Layered,
    /// Tunnels by remote VTEP: the intent's and those made here.
    tunnels: BTreeMap<IpAddr, String>,
    nexthops: BTreeSet<String>,
    neighbours: &'a BTreeMap<IpAddr, Mac>,
    underlay: Option<String>,
}

impl Builder<'_> {
    fn skip(&mut self, why: &'static str) {
        *self.out.skipped.entry(why).or_default() += 1;
    }

    fn has_network(&self, net: &str) -> bool {
        self.c.networks.iter().any(|n| n.name == net)
    }

    /// The tunnel to `vtep`: the intent's, or one made here once its MAC is known.
    fn tunnel(&mut self, vtep: IpAddr) -> Option<String> {
        if let Some(t) = self.tunnels.get(&vtep) {
            return Some(t.clone());
        }
        let Some(underlay) = self.underlay.clone() else {
            self.out.unresolved.insert(vtep);
            return None;
        };
        let Some(mac) = self.neighbours.get(&vtep) else {
            self.out.unresolved.insert(vtep);
            return None;
        };
        let name = format!("{PREFIX}{vtep}");
        self.c.tunnels.push(TunnelConfig {
            name: name.clone(),
            underlay,
            remote: vtep,
            remote_mac: *mac,
            local: None,
        });
        self.out.installed.tunnels += 1;
        self.tunnels.insert(vtep, name.clone());
        Some(name)
    }

    /// The next hop through `r` (VXLAN with its VNI), made on first use.
    fn nexthop(&mut self, r: &Remote) -> Result<String, &'static str> {
        if r.encap != Encap::Vxlan {
            return Err("mpls_not_installed");
        }
        let tunnel = self.tunnel(r.vtep).ok_or("vtep_unresolved")?;
        let name = format!("{PREFIX}{}:{}", r.vtep, r.label);
        if self.nexthops.insert(name.clone()) {
            self.c.nexthops.push(NextHopConfig {
                tunnel: Some(tunnel),
                encap: Some(EncapConfig::Vxlan),
                vni: Some(r.label),
                ..NextHopConfig::new(name.clone(), NextHopKindConfig::Tunnel)
            });
        }
        Ok(name)
    }

    /// The remote VTEPs a network's flood list reaches already (the intent's entries).
    fn flooded_to(&self, net: &str) -> BTreeSet<IpAddr> {
        let Some(n) = self.c.networks.iter().find(|n| n.name == net) else {
            return BTreeSet::new();
        };
        n.flood
            .iter()
            .filter_map(|f| self.c.nexthops.iter().find(|h| &h.name == f))
            .filter_map(|h| h.tunnel.as_ref())
            .filter_map(|t| self.c.tunnels.iter().find(|x| &x.name == t))
            .map(|t| t.remote)
            .collect()
    }

    fn flood(&mut self, reach: &Reach) {
        for (net, remotes) in &reach.flood {
            if !self.has_network(net) {
                self.skip("no_such_network");
                continue;
            }
            let known = self.flooded_to(net);
            for r in remotes {
                if known.contains(&r.vtep) {
                    self.skip("known_from_intent");
                    continue;
                }
                match self.nexthop(r) {
                    Ok(nh) => {
                        if let Some(n) = self.c.networks.iter_mut().find(|n| &n.name == net) {
                            n.flood.push(nh);
                            self.out.installed.flood += 1;
                        }
                    }
                    Err(why) => self.skip(why),
                }
            }
        }
    }

    /// Whether a workload of this host in `net` has this MAC or address.
    fn local(&self, net: &str, mac: Option<[u8; 6]>, ip: Option<IpAddr>) -> bool {
        self.c.interfaces.iter().any(|i| {
            i.network.as_deref() == Some(net)
                && (mac.is_some_and(|m| i.peer_mac.is_some_and(|p| p.0.0 == m))
                    || ip.is_some_and(|a| i.peer_addresses.contains(&a)))
        })
    }

    fn macs(&mut self, reach: &Reach) {
        for ((net, mac), r) in &reach.macs {
            if !self.has_network(net) {
                self.skip("no_such_network");
                continue;
            }
            let known = self
                .c
                .bridge
                .iter()
                .any(|b| &b.network == net && b.mac.0.0 == mac.0);
            if known || self.local(net, Some(mac.0), None) {
                self.skip("known_from_intent");
                continue;
            }
            match self.nexthop(r) {
                Ok(nh) => {
                    self.c.bridge.push(BridgeConfig {
                        network: net.clone(),
                        mac: Mac(ovr_wire::ethernet::MacAddr(mac.0)),
                        nexthop: nh,
                    });
                    self.out.installed.macs += 1;
                }
                Err(why) => self.skip(why),
            }
        }
    }

    fn has_route(&self, net: &str, p: &IpPrefix) -> bool {
        self.c
            .routes
            .iter()
            .any(|r| r.network == net && r.prefix.0 == *p)
    }

    fn hosts(&mut self, reach: &Reach) {
        for ((net, ip), mac) in &reach.hosts {
            let Some(r) = reach.macs.get(&(net.clone(), *mac)) else {
                continue;
            };
            let len = if ip.is_ipv4() { 32 } else { 128 };
            let Ok(p) = IpPrefix::new(*ip, len) else {
                self.skip("bad_prefix");
                continue;
            };
            if !self.has_network(net) {
                self.skip("no_such_network");
                continue;
            }
            if self.has_route(net, &p) || self.local(net, None, Some(*ip)) {
                self.skip("known_from_intent");
                continue;
            }
            match self.nexthop(r) {
                Ok(nh) => {
                    self.c.routes.push(RouteConfig {
                        network: net.clone(),
                        prefix: Prefix(p),
                        nexthop: nh,
                    });
                    self.out.installed.hosts += 1;
                }
                Err(why) => self.skip(why),
            }
        }
    }

    fn prefixes(&mut self, reach: &Reach) {
        for ((net, addr, len), remotes) in &reach.prefixes {
            let Ok(p) = IpPrefix::new(*addr, *len) else {
                self.skip("bad_prefix");
                continue;
            };
            let Some(n) = self.c.networks.iter().find(|n| &n.name == net) else {
                self.skip("no_such_network");
                continue;
            };
            // A subnet this host has a gateway in is stretched across the hosts: its
            // addresses are reached by their host routes (type 2), not through one VTEP.
            let own = n
                .gateways
                .iter()
                .any(|g| g.0.prefix_len == *len && mask(g.0.addr, g.0.prefix_len) == *addr);
            if own || self.has_route(net, &p) {
                self.skip("known_from_intent");
                continue;
            }
            let mut members = Vec::new();
            for r in remotes {
                match self.nexthop(r) {
                    Ok(nh) => members.push(nh),
                    Err(why) => self.skip(why),
                }
            }
            let nexthop = match members.len() {
                0 => continue,
                1 => members.remove(0),
                _ => {
                    let name = format!("{PREFIX}ecmp:{net}:{addr}/{len}");
                    self.c.nexthops.push(NextHopConfig {
                        members: Some(members),
                        ..NextHopConfig::new(name.clone(), NextHopKindConfig::Ecmp)
                    });
                    name
                }
            };
            self.c.routes.push(RouteConfig {
                network: net.clone(),
                prefix: Prefix(p),
                nexthop,
            });
            self.out.installed.prefixes += 1;
        }
    }
}

#[cfg(test)]
#[path = "install_tests.rs"]
mod tests;
