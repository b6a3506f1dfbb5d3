//! What is learnt through BGP, as forwarding state: the host's configuration (its intent:
//! the static file, or what the cluster derived) with the learnt reachability added to
//! it, whole, so that the agent installs only the difference. Per remote VTEP a tunnel
//! `evpn:VTEP` (its underlay MAC resolved beforehand: `neighbours`); per VTEP and VNI a
//! next hop `evpn:VTEP:VNI` (MPLS: per VTEP and label, `evpn:VTEP:mpls_udp:LABEL` or
//! `mpls_gre`); per network its flood list (type 3) and routes to prefixes (type 5, an
//! ECMP next hop `evpn:ecmp:NETWORK:PREFIX` where several VTEPs advertise one). Those are
//! few and go into the configuration; the many, bridge entries (type 2 MACs) and host
//! routes (type 2 MAC/IP), go beside it as the agent's learnt entries (`Learnt`), which
//! skip the configuration's costs (`ovr_agent::learnt`). A route is installed
//! only with the encapsulation its network uses (the network's `encap`, VXLAN by
//! default); one with another is skipped as `wrong_encap`.
//!
//! What the intent already has wins, so that the same endpoint known twice (from etcd
//! and from BGP) is installed once: a VTEP the intent has a tunnel to keeps that tunnel;
//! a MAC with a bridge entry, an address with a route, a VTEP already in a network's
//! flood list are not added again; a MAC or address of a local workload stays local.
//! Names starting with `evpn:` are this layer's: `strip` takes them away again.

use crate::evpn::{Encap, Mac as EvpnMac};
use crate::learnt::{Reach, Remote};
use crate::pernet::{PerNet, PerNetSet};
use core::net::IpAddr;
use ovr_agent::learnt::{Learnt, LearntChange, LearntKey};
use ovr_config::model::{
    Config, EncapConfig, InterfaceKindConfig, NetworkConfig, NextHopConfig, NextHopKindConfig,
    RouteConfig, TunnelConfig,
};
use ovr_config::values::{Mac, Prefix};
use ovr_tables::fasthash::FastMap as HashMap;
use ovr_tables::prefix::{IpPrefix, mask};
use ovr_wire::ethernet::MacAddr;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The prefix of every name this layer makes.
pub const PREFIX: &str = "evpn:";

/// The intent with what is learnt, and what could not be installed yet.
#[derive(Debug, Clone, Default)]
pub struct Layered {
    /// The intent with the learnt tunnels, next hops, flood lists and type 5 routes.
    pub config: Config,
    /// The learnt bridge entries and host routes.
    pub learnt: Learnt,
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

/// The VTEPs `reach` needs a tunnel to.
pub fn vteps(reach: &Reach) -> BTreeSet<IpAddr> {
    reach.remotes().map(|r| r.vtep).collect()
}

/// The encapsulation network `n` is sent to with.
pub fn encap_of(n: &NetworkConfig) -> Encap {
    n.encap.unwrap_or(EncapConfig::Vxlan).into()
}

/// `intent` without what an earlier `layer` added to it (`learnt` is not in it).
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
    layer_kept(intent, reach, neighbours).0
}

/// `layer`, and what it decided per MAC and address, for `State::mac` and `State::host`
/// to change afterwards one by one.
pub fn layer_kept(
    intent: &Config,
    reach: &Reach,
    neighbours: &BTreeMap<IpAddr, Mac>,
) -> (Layered, State) {
    let workloads = || {
        intent
            .interfaces
            .iter()
            .filter_map(|i| Some((i.network.as_ref()?, i)))
    };
    let state = State {
        networks: intent
            .networks
            .iter()
            .map(|n| (Arc::from(n.name.as_str()), encap_of(n)))
            .collect(),
        bridge: intent
            .bridge
            .iter()
            .map(|b| (b.network.clone(), b.mac.0.0))
            .collect(),
        routes: intent
            .routes
            .iter()
            .map(|r| (r.network.clone(), r.prefix.0))
            .collect(),
        local_macs: workloads()
            .filter_map(|(net, i)| Some((net.clone(), i.peer_mac?.0.0)))
            .collect(),
        local_ips: workloads()
            .flat_map(|(net, i)| i.peer_addresses.iter().map(|a| (net.clone(), *a)))
            .collect(),
        type5: reach
            .prefixes
            .keys()
            .filter_map(|(n, a, l)| Some((n.clone(), IpPrefix::new(*a, *l).ok()?)))
            .collect(),
        ..State::default()
    };
    let mut b = Builder {
        c: intent.clone(),
        learnt: Learnt::default(),
        out: Layered::default(),
        tunnels: intent
            .tunnels
            .iter()
            .map(|t| (t.remote, t.name.clone()))
            .collect(),
        neighbours,
        underlay: intent
            .interfaces
            .iter()
            .find(|i| i.kind == InterfaceKindConfig::Underlay)
            .map(|i| i.name.clone()),
        s: state,
    };
    b.flood(reach);
    b.macs(reach);
    b.hosts(reach);
    b.prefixes(reach);
    let (config, learnt, mut s) = (b.c, b.learnt, b.s);
    s.out = b.out;
    let out = Layered {
        config,
        learnt,
        ..s.out.clone()
    };
    (out, s)
}

/// What was decided for one MAC or address: installed through a next hop, or skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Via(Arc<str>),
    /// Skipped, and the VTEP whose MAC is not known when that is why.
    Skip(&'static str, Option<IpAddr>),
}

/// The whole layering must be done again: a change needs a tunnel or next hop that is
/// not there, removes the last use of one, or touches a type 5 prefix's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Whole;

/// What the last `layer_kept` decided, kept up to date by `mac` and `host`.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The intent's networks and their encapsulations.
    networks: HashMap<Arc<str>, Encap>,
    /// The intent's bridge entries and routes.
    bridge: PerNetSet<[u8; 6]>,
    routes: PerNetSet<IpPrefix>,
    /// The MACs and addresses of the host's workloads.
    local_macs: PerNetSet<[u8; 6]>,
    local_ips: PerNetSet<IpAddr>,
    /// The prefixes of type 5 routes (a host route with one of them depends on it).
    type5: PerNetSet<IpPrefix>,
    /// This layer's next hops, and how many entries use each.
    uses: BTreeMap<Arc<str>, usize>,
    /// The names of next hops through a VTEP with a VNI or label, made once (`via`).
    names: HashMap<Remote, Arc<str>>,
    /// The VTEPs without a MAC, and how many entries wait for each.
    waiting: BTreeMap<IpAddr, usize>,
    /// Per MAC, where it is reached (what a change is compared with) and what was
    /// decided; per address, what was decided.
    macs: PerNet<EvpnMac, (Remote, Outcome)>,
    hosts: PerNet<IpAddr, Outcome>,
    /// The counts and reasons, as `layer` reports them (without the configuration).
    pub out: Layered,
}

impl State {
    fn use_nexthop(&mut self, name: &Arc<str>) {
        match self.uses.get_mut(name) {
            Some(n) => *n += 1,
            None => {
                self.uses.insert(Arc::clone(name), 1);
            }
        }
    }

    /// Counts `o` (`add`) or takes it off the counts; Err when a next hop or a waiting
    /// VTEP loses its last use.
    fn count(&mut self, o: &Outcome, add: bool, mac: bool) -> Result<(), Whole> {
        let installed = if mac {
            &mut self.out.installed.macs
        } else {
            &mut self.out.installed.hosts
        };
        match o {
            Outcome::Via(nh) => {
                if add {
                    *installed += 1;
                    self.use_nexthop(nh);
                } else {
                    *installed -= 1;
                    let n = self.uses.get_mut(nh).ok_or(Whole)?;
                    *n -= 1;
                    if *n == 0 {
                        return Err(Whole);
                    }
                }
            }
            Outcome::Skip(why, vtep) => {
                let e = self.out.skipped.entry(why).or_default();
                if add {
                    *e += 1;
                } else {
                    *e -= 1;
                    if *e == 0 {
                        self.out.skipped.remove(why);
                    }
                }
                if let Some(v) = vtep {
                    let w = self.waiting.entry(*v).or_default();
                    if add {
                        *w += 1;
                    } else {
                        *w -= 1;
                        if *w == 0 {
                            return Err(Whole);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The next hop through `r` for `net` if it is there already.
    fn via(&mut self, net: &str, r: &Remote) -> Result<Outcome, Whole> {
        if self.networks.get(net) != Some(&r.encap) {
            return Ok(Outcome::Skip("wrong_encap", None));
        }
        let name = self
            .names
            .entry(r.bridging())
            .or_insert_with(|| nexthop_name(r));
        if self.uses.contains_key(name) {
            return Ok(Outcome::Via(name.clone()));
        }
        if self.waiting.contains_key(&r.vtep) {
            return Ok(Outcome::Skip("vtep_unresolved", Some(r.vtep)));
        }
        Err(Whole)
    }

    fn decide_mac(&mut self, net: &str, mac: EvpnMac, r: &Remote) -> Result<Outcome, Whole> {
        if !self.networks.contains_key(net) {
            return Ok(Outcome::Skip("no_such_network", None));
        }
        if self.bridge.contains(net, &mac.0) || self.local_macs.contains(net, &mac.0) {
            return Ok(Outcome::Skip("known_from_intent", None));
        }
        self.via(net, r)
    }

    fn decide_host(&mut self, net: &str, ip: IpAddr, r: &Remote) -> Result<Outcome, Whole> {
        let len = if ip.is_ipv4() { 32 } else { 128 };
        let Ok(p) = IpPrefix::new(ip, len) else {
            return Ok(Outcome::Skip("bad_prefix", None));
        };
        if !self.networks.contains_key(net) {
            return Ok(Outcome::Skip("no_such_network", None));
        }
        if self.routes.contains(net, &p) || self.local_ips.contains(net, &ip) {
            return Ok(Outcome::Skip("known_from_intent", None));
        }
        match r.routing() {
            Some(h) => self.via(net, &h),
            None => Ok(Outcome::Skip("no_routed_label", None)),
        }
    }

    /// MAC `mac` of `net` is now reached through `r` (None: no longer reached): the
    /// change to its bridge entry, if any, is added to `out`.
    pub fn mac(
        &mut self,
        net: &str,
        mac: EvpnMac,
        r: Option<&Remote>,
        out: &mut Vec<LearntChange>,
    ) -> Result<(), Whole> {
        let new = r.map(|r| self.decide_mac(net, mac, r)).transpose()?;
        // The remote is kept even when the decision stays (its routing label may change).
        let old = match (r, &new) {
            (Some(r), Some(n)) => self.macs.insert(net, mac, (*r, n.clone())),
            _ => self.macs.remove(net, &mac),
        }
        .map(|(_, o)| o);
        if old == new {
            return Ok(());
        }
        if let Some(n) = &new {
            self.count(n, true, true)?;
        }
        if let Some(o) = &old {
            self.count(o, false, true)?;
        }
        let key = LearntKey::Bridge(MacAddr(mac.0));
        out.extend(self.change(net, key, old.as_ref(), new.as_ref()));
        Ok(())
    }

    /// Address `ip` of `net` now has a host route through `r`, its MAC's remote (None:
    /// no host route): the change to its route, if any, is added to `out`.
    pub fn host(
        &mut self,
        net: &str,
        ip: IpAddr,
        r: Option<&Remote>,
        out: &mut Vec<LearntChange>,
    ) -> Result<(), Whole> {
        let len = if ip.is_ipv4() { 32 } else { 128 };
        if let Ok(p) = IpPrefix::new(ip, len)
            && self.type5.contains(net, &p)
        {
            return Err(Whole);
        }
        let new = r.map(|r| self.decide_host(net, ip, r)).transpose()?;
        let old = self.hosts.get(net, &ip);
        if old == new.as_ref() {
            return Ok(());
        }
        let old = match &new {
            Some(n) => {
                self.count(n, true, false)?;
                self.hosts.insert(net, ip, n.clone())
            }
            None => self.hosts.remove(net, &ip),
        };
        if let Some(o) = &old {
            self.count(o, false, false)?;
        }
        let Ok(p) = IpPrefix::new(ip, len) else {
            return Ok(());
        };
        out.extend(self.change(net, LearntKey::Route(p), old.as_ref(), new.as_ref()));
        Ok(())
    }

    /// The change from an entry installed through `old` to one through `new`, if any.
    fn change(
        &self,
        net: &str,
        key: LearntKey,
        old: Option<&Outcome>,
        new: Option<&Outcome>,
    ) -> Option<LearntChange> {
        fn via(o: Option<&Outcome>) -> Option<&Arc<str>> {
            match o {
                Some(Outcome::Via(nh)) => Some(nh),
                _ => None,
            }
        }
        let nexthop = match (via(old), via(new)) {
            (None, None) => return None,
            (Some(a), Some(b)) if a == b => return None,
            (_, b) => b.cloned(),
        };
        // A network an entry was installed in is the intent's: it is there.
        let (network, _) = self.networks.get_key_value(net)?;
        Some(LearntChange {
            network: Arc::clone(network),
            key,
            nexthop,
        })
    }

    /// Where MAC `mac` of `net` is reached, as last decided.
    pub fn remote(&self, net: &str, mac: EvpnMac) -> Option<Remote> {
        self.macs.get(net, &mac).map(|(r, _)| *r)
    }

    /// The VTEPs waiting for their MAC.
    pub fn unresolved(&self) -> &BTreeSet<IpAddr> {
        &self.out.unresolved
    }
}

/// The name of the next hop through `r`'s VTEP with its VNI or label.
fn nexthop_name(r: &Remote) -> Arc<str> {
    let (vtep, label) = (r.vtep, r.label);
    Arc::from(match r.encap {
        Encap::Vxlan => format!("{PREFIX}{vtep}:{label}"),
        Encap::MplsOverUdp => format!("{PREFIX}{vtep}:mpls_udp:{label}"),
        Encap::MplsOverGre => format!("{PREFIX}{vtep}:mpls_gre:{label}"),
    })
}

struct Builder<'a> {
    c: Config,
    learnt: Learnt,
    out: Layered,
    /// Tunnels by remote VTEP: the intent's and those made here.
    tunnels: BTreeMap<IpAddr, String>,
    neighbours: &'a BTreeMap<IpAddr, Mac>,
    underlay: Option<String>,
    s: State,
}

impl Builder<'_> {
    fn skip(&mut self, why: &'static str) {
        *self.out.skipped.entry(why).or_default() += 1;
    }

    fn has_network(&self, net: &str) -> bool {
        self.s.networks.contains_key(net)
    }

    /// A learnt entry of `net` (one of the intent's networks) through `nh`.
    fn learn(&mut self, net: &str, key: LearntKey, nh: &Arc<str>) {
        if let Some((network, _)) = self.s.networks.get_key_value(net) {
            self.learnt.set(network, key, Some(Arc::clone(nh)));
        }
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

    /// The next hop through `r` for `net` (VXLAN with its VNI, MPLS with its label),
    /// made on first use; counted as used.
    fn nexthop(&mut self, net: &str, r: &Remote) -> Result<Arc<str>, &'static str> {
        if self.s.networks.get(net) != Some(&r.encap) {
            return Err("wrong_encap");
        }
        let tunnel = self.tunnel(r.vtep).ok_or("vtep_unresolved")?;
        let name = nexthop_name(r);
        if !self.s.uses.contains_key(&name) {
            // A VXLAN next hop's label is its VNI; an MPLS one's its label.
            let (vni, label) = match r.encap {
                Encap::Vxlan => (Some(r.label), None),
                Encap::MplsOverUdp | Encap::MplsOverGre => (None, Some(r.label)),
            };
            self.c.nexthops.push(NextHopConfig {
                tunnel: Some(tunnel),
                encap: Some(r.encap.into()),
                vni,
                label,
                ..NextHopConfig::new(name.to_string(), NextHopKindConfig::Tunnel)
            });
        }
        self.s.use_nexthop(&name);
        Ok(name)
    }

    /// Where `r` is installed through for `net`, as `State` keeps it.
    fn outcome(&mut self, net: &str, r: &Remote) -> Outcome {
        match self.nexthop(net, r) {
            Ok(nh) => Outcome::Via(nh),
            Err(why) => {
                self.skip(why);
                let vtep = (why == "vtep_unresolved").then_some(r.vtep);
                if let Some(v) = vtep {
                    *self.s.waiting.entry(v).or_default() += 1;
                }
                Outcome::Skip(why, vtep)
            }
        }
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
                if let Outcome::Via(nh) = self.outcome(net, r)
                    && let Some(n) = self.c.networks.iter_mut().find(|n| &n.name == net)
                {
                    n.flood.push(nh.to_string());
                    self.out.installed.flood += 1;
                }
            }
        }
    }

    fn macs(&mut self, reach: &Reach) {
        for (net, mac, r) in reach.macs.iter() {
            let o = match self.s.decide_mac(net, *mac, r) {
                Ok(Outcome::Skip(why, None)) => {
                    self.skip(why);
                    Outcome::Skip(why, None)
                }
                _ => self.outcome(net, r),
            };
            if let Outcome::Via(nh) = &o {
                self.learn(net, LearntKey::Bridge(MacAddr(mac.0)), nh);
                self.out.installed.macs += 1;
            }
            self.s.macs.insert(net, *mac, (*r, o));
        }
    }

    fn hosts(&mut self, reach: &Reach) {
        for (net, ip, mac) in reach.hosts.iter() {
            let Some(r) = reach.macs.get(net, mac) else {
                continue;
            };
            let o = match (self.s.decide_host(net, *ip, r), r.routing()) {
                (Ok(Outcome::Skip(why, None)), _) => {
                    self.skip(why);
                    Outcome::Skip(why, None)
                }
                (_, Some(h)) => self.outcome(net, &h),
                (_, None) => {
                    self.skip("no_routed_label");
                    Outcome::Skip("no_routed_label", None)
                }
            };
            if let Outcome::Via(nh) = &o {
                let len = if ip.is_ipv4() { 32 } else { 128 };
                if let Ok(p) = IpPrefix::new(*ip, len) {
                    self.learn(net, LearntKey::Route(p), nh);
                    self.out.installed.hosts += 1;
                }
            }
            self.s.hosts.insert(net, *ip, o);
        }
    }

    /// Whether the intent, or a host route made here, has a route to `p`.
    fn has_route(&self, net: &str, p: &IpPrefix) -> bool {
        let host = p.prefix_len() == if p.addr().is_ipv4() { 32 } else { 128 };
        self.s.routes.contains(net, p)
            || (host && matches!(self.s.hosts.get(net, &p.addr()), Some(Outcome::Via(_))))
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
                if let Outcome::Via(nh) = self.outcome(net, r) {
                    members.push(nh);
                }
            }
            let nexthop = match members.len() {
                0 => continue,
                1 => members.remove(0).to_string(),
                _ => {
                    let name = format!("{PREFIX}ecmp:{net}:{addr}/{len}");
                    self.c.nexthops.push(NextHopConfig {
                        members: Some(members.iter().map(|m| m.to_string()).collect()),
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
