//! Tunnels and next hops: simple ones first (in document order, then one per workload
//! with a `peer_mac`), then composites, which refer to them.

use crate::model::*;
use crate::translate::{Builder, R, err, unicast};
use core::net::IpAddr;
use ovr_tables::ids::InterfaceId;
use ovr_tables::nexthop::{Ecmp, Encap, Inner, NextHop, Tunnel};
use ovr_tables::state::TableOp;
use ovr_wire::ethernet::MacAddr;

/// A tunnel with its names resolved: what a tunnel next hop through it needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ResolvedTunnel {
    underlay: InterfaceId,
    local: IpAddr,
    remote: IpAddr,
    remote_mac: MacAddr,
}

fn kind_name(k: NextHopKindConfig) -> &'static str {
    match k {
        NextHopKindConfig::Interface => "interface",
        NextHopKindConfig::Tunnel => "tunnel",
        NextHopKindConfig::Ecmp => "ecmp",
        NextHopKindConfig::Drop => "drop",
        NextHopKindConfig::Receive => "receive",
        NextHopKindConfig::Vrf => "vrf",
    }
}

impl Builder<'_> {
    /// Checks every tunnel (used or not) and works out its local address.
    pub(crate) fn resolve_tunnels(&mut self) -> R<()> {
        for (i, t) in self.c.tunnels.iter().enumerate() {
            let tp = format!("tunnels[{i}]");
            let underlay = self.interface(&format!("{tp}.underlay"), &t.underlay)?;
            let at = self.index.interfaces.get(&t.underlay).copied();
            let Some(uc) = at.and_then(|i| self.c.interfaces.get(i)) else {
                return err(format!("{tp}.underlay"), "no such interface");
            };
            if uc.kind != InterfaceKindConfig::Underlay {
                return err(
                    format!("{tp}.underlay"),
                    format!("'{}' is not an underlay interface", t.underlay),
                );
            }
            let local = match t.local {
                Some(l) if l.is_ipv4() != t.remote.is_ipv4() => {
                    return err(
                        format!("{tp}.local"),
                        "local and remote must both be IPv4 or both IPv6",
                    );
                }
                Some(l) => l,
                None => match uc
                    .addresses
                    .iter()
                    .find(|a| a.0.addr.is_ipv4() == t.remote.is_ipv4())
                {
                    Some(a) => a.0.addr,
                    None => {
                        return err(
                            tp,
                            format!(
                                "interface '{}' has no address of the remote's family to send from (give 'local')",
                                t.underlay
                            ),
                        );
                    }
                },
            };
            let remote_mac = unicast(&format!("{tp}.remote_mac"), t.remote_mac)?;
            self.tunnels.push(ResolvedTunnel {
                underlay,
                local,
                remote: t.remote,
                remote_mac,
            });
        }
        Ok(())
    }

    /// A simple next hop, or `None` for a composite (made once every simple one exists).
    pub(crate) fn simple_nexthop(&self, path: &str, n: &NextHopConfig) -> R<Option<NextHop>> {
        let kind = kind_name(n.kind);
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
                format!("does not apply to a next hop of kind {kind}"),
            );
        }
        let need = |v: &Option<String>, field: &str| match v {
            Some(s) => Ok(s.clone()),
            None => err(path, format!("a next hop of kind {kind} needs '{field}'")),
        };
        Ok(Some(match n.kind {
            NextHopKindConfig::Drop => NextHop::Drop,
            NextHopKindConfig::Receive => NextHop::Receive,
            NextHopKindConfig::Ecmp => return Ok(None),
            NextHopKindConfig::Interface => {
                let interface = self.interface(
                    &format!("{path}.interface"),
                    &need(&n.interface, "interface")?,
                )?;
                let Some(m) = n.mac else {
                    return err(path, "a next hop of kind interface needs 'mac'");
                };
                NextHop::Interface {
                    interface,
                    dst_mac: unicast(&format!("{path}.mac"), m)?,
                }
            }
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
                let tpath = format!("{path}.tunnel");
                let name = need(&n.tunnel, "tunnel")?;
                let Some(&t) = self.names.tunnels.get(&name) else {
                    return err(tpath, format!("no tunnel named '{name}'"));
                };
                let t = self.tunnels[t];
                NextHop::Tunnel(Tunnel {
                    encap: encap(path, n)?,
                    underlay: t.underlay,
                    src: t.local,
                    dst: t.remote,
                    dst_mac: t.remote_mac,
                    inner_dst: None,
                })
            }
        }))
    }

    pub(crate) fn nexthops(&mut self) -> R<()> {
        let mut composites = Vec::new();
        for (i, n) in self.c.nexthops.iter().enumerate() {
            let path = format!("nexthops[{i}]");
            let id = self.nexthop(&path, &n.name)?;
            match self.simple_nexthop(&path, n)? {
                Some(nh) => self.push(path, TableOp::UpsertNextHop(id, nh)),
                None => composites.push((i, id)),
            }
        }
        // Workloads with a peer: a next hop each, named after the interface (its id was
        // given with the others').
        for (i, f) in self.c.interfaces.iter().enumerate() {
            let Some(m) = f.peer_mac else { continue };
            let path = format!("interfaces[{i}].peer_mac");
            let dst_mac = unicast(&path, m)?;
            let id = self.nexthop(&path, &f.name)?;
            let nh = NextHop::Interface {
                interface: self.interface(&path, &f.name)?,
                dst_mac,
            };
            self.push(path, TableOp::UpsertNextHop(id, nh));
        }
        self.service_nexthops()?;
        for (i, id) in composites {
            let path = format!("nexthops[{i}]");
            let Some(members) = &self.c.nexthops[i].members else {
                return err(path, "a next hop of kind ecmp needs 'members'");
            };
            let path = format!("{path}.members");
            let mut m = Vec::with_capacity(members.len());
            for (k, name) in members.iter().enumerate() {
                let p = format!("{path}[{k}]");
                let nh = self.nexthop(&p, name)?;
                if m.contains(&nh) {
                    return err(p, format!("'{name}' is listed twice"));
                }
                let simple = self
                    .index
                    .nexthops
                    .get(name)
                    .and_then(|&k| self.c.nexthops.get(k))
                    .is_none_or(|n| n.kind != NextHopKindConfig::Ecmp);
                if !simple {
                    return err(p, format!("'{name}' is an ecmp next hop: they do not nest"));
                }
                m.push(nh);
            }
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
}

/// The encapsulation of a tunnel next hop: VXLAN takes a VNI, MPLS a label.
fn encap(path: &str, n: &NextHopConfig) -> R<Encap> {
    let Some(e) = n.encap else {
        return err(
            path,
            "a next hop of kind tunnel needs 'encap' (vxlan, mpls_udp or mpls_gre)",
        );
    };
    let (name, wants_vni) = match e {
        EncapConfig::Vxlan => ("vxlan", true),
        EncapConfig::MplsUdp => ("mpls_udp", false),
        EncapConfig::MplsGre => ("mpls_gre", false),
    };
    let (needed, stray) = if wants_vni {
        ("vni", n.label.map(|_| "label"))
    } else {
        ("label", n.vni.map(|_| "vni"))
    };
    if let Some(f) = stray {
        return err(
            format!("{path}.{f}"),
            format!("does not apply to encap {name} (it takes '{needed}')"),
        );
    }
    match (e, n.vni, n.label) {
        (EncapConfig::Vxlan, Some(vni), _) => Ok(Encap::Vxlan { vni }),
        (EncapConfig::MplsUdp, _, Some(label)) => Ok(Encap::MplsOverUdp { label }),
        (EncapConfig::MplsGre, _, Some(label)) => Ok(Encap::MplsOverGre { label }),
        _ => err(path, format!("encap {name} needs '{needed}'")),
    }
}
