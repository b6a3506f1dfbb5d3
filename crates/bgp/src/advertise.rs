//! What a host advertises: for each of its networks a type-3 route (flood to me, by
//! ingress replication) and a type-5 route per routed subnet, and for each of its ports
//! a type-2 route for the MAC alone and one per address. The set is computed whole from
//! the host's networks and ports; `changes` says what to announce and withdraw to go
//! from what is advertised to it, so that a resync re-announces nothing unchanged.

use crate::evpn::{Encap, Mac, Nlri, Rd, Route, RouteKey, RouteTarget};
use core::net::{IpAddr, Ipv4Addr};
use std::collections::BTreeSet;

/// A network the host has a port in, as BGP carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalNetwork {
    pub name: String,
    pub vni: u32,
    pub encap: Encap,
    /// MPLS: the labels the host allocated for bridged frames and routed packets.
    pub labels: Option<(u32, u32)>,
    /// The route distinguisher's number on this host (unique per network here).
    pub rd_index: u16,
    /// The route targets the routes carry (empty: the automatic ASN:VNI alone).
    pub export: Vec<RouteTarget>,
    /// Subnets routed by the network's gateway (type 5), address and length.
    pub subnets: Vec<(IpAddr, u8)>,
    /// The gateway's MAC, the inner destination of routed packets (type 5).
    pub router_mac: Mac,
}

impl LocalNetwork {
    fn targets(&self, asn: u16) -> Vec<RouteTarget> {
        let mut t = self.export.clone();
        if t.is_empty() {
            t.push(RouteTarget::auto(asn, self.vni));
        }
        t.sort_unstable();
        t.dedup();
        t
    }

    /// The label of bridged frames (the VNI for VXLAN).
    fn l2(&self) -> u32 {
        self.labels.map_or(self.vni, |(l2, _)| l2)
    }

    /// The label of routed packets (the VNI for VXLAN).
    fn l3(&self) -> u32 {
        self.labels.map_or(self.vni, |(_, l3)| l3)
    }
}

/// A port of the host: a workload's MAC and addresses in a network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalPort {
    pub network: String,
    pub mac: Mac,
    pub ips: Vec<IpAddr>,
}

/// Everything the host at `vtep` advertises for `networks` and `ports` (a port of a
/// network not given is left out).
pub fn routes(
    asn: u16,
    vtep: Ipv4Addr,
    networks: &[LocalNetwork],
    ports: &[LocalPort],
) -> BTreeSet<Route> {
    let mut out = BTreeSet::new();
    for n in networks {
        let rd = Rd::Ip {
            router: vtep,
            assigned: n.rd_index,
        };
        let base = Route {
            nlri: Nlri::Imet {
                rd,
                tag: 0,
                originator: vtep.into(),
            },
            next_hop: vtep.into(),
            targets: n.targets(asn),
            encap: n.encap,
            router_mac: None,
            pmsi: Some((n.l2(), vtep)),
            mobility: None,
        };
        for (addr, len) in &n.subnets {
            out.insert(Route {
                nlri: Nlri::Prefix {
                    rd,
                    tag: 0,
                    addr: *addr,
                    len: *len,
                    gateway: unspecified(*addr),
                    label: n.l3(),
                },
                router_mac: Some(n.router_mac),
                pmsi: None,
                ..base.clone()
            });
        }
        for p in ports.iter().filter(|p| p.network == n.name) {
            let ips = core::iter::once(None).chain(p.ips.iter().copied().map(Some));
            for ip in ips {
                out.insert(Route {
                    nlri: Nlri::MacIp {
                        rd,
                        tag: 0,
                        mac: p.mac,
                        ip,
                        label: n.l2(),
                        routed: n.labels.filter(|_| ip.is_some()).map(|(_, l3)| l3),
                    },
                    pmsi: None,
                    ..base.clone()
                });
            }
        }
        out.insert(base);
    }
    out
}

fn unspecified(like: IpAddr) -> IpAddr {
    match like {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        IpAddr::V6(_) => IpAddr::V6(core::net::Ipv6Addr::UNSPECIFIED),
    }
}

/// From what is advertised to what should be: the routes to announce (new, or whose
/// attributes changed: labels included, an announcement replaces the route of its key)
/// and those to withdraw (their key is no longer advertised).
pub fn changes(now: &BTreeSet<Route>, want: &BTreeSet<Route>) -> (Vec<Route>, Vec<Route>) {
    let announce = want.difference(now).cloned().collect();
    let kept: BTreeSet<RouteKey> = want.iter().map(|r| r.nlri.key()).collect();
    let withdraw = now
        .iter()
        .filter(|r| !kept.contains(&r.nlri.key()))
        .cloned()
        .collect();
    (announce, withdraw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn red() -> LocalNetwork {
        LocalNetwork {
            name: "red".into(),
            vni: 100,
            encap: Encap::Vxlan,
            labels: None,
            rd_index: 1,
            export: vec![
                RouteTarget {
                    asn: 65000,
                    value: 9,
                },
                RouteTarget::auto(65000, 100),
            ],
            subnets: vec![("10.1.0.0".parse().unwrap(), 24)],
            router_mac: Mac([2, 0, 0, 0, 0, 1]),
        }
    }

    fn port(ips: &[&str]) -> LocalPort {
        LocalPort {
            network: "red".into(),
            mac: Mac([2, 0, 0, 0, 1, 10]),
            ips: ips.iter().map(|i| i.parse().unwrap()).collect(),
        }
    }

    const VTEP: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);

    #[test]
    fn a_network_and_a_port_make_types_3_5_and_2() {
        let r = routes(65000, VTEP, &[red()], &[port(&["10.1.0.10", "fd00::10"])]);
        let kinds: Vec<&str> = r
            .iter()
            .map(|r| match &r.nlri {
                Nlri::Imet { .. } => "imet",
                Nlri::MacIp { ip: None, .. } => "mac",
                Nlri::MacIp { ip: Some(_), .. } => "mac-ip",
                Nlri::Prefix { .. } => "prefix",
            })
            .collect();
        let mut sorted = kinds.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["imet", "mac", "mac-ip", "mac-ip", "prefix"]);
        for route in &r {
            assert_eq!(route.next_hop, IpAddr::from(VTEP));
            assert_eq!(
                route.targets,
                [RouteTarget::auto(65000, 9), RouteTarget::auto(65000, 100)]
            );
            assert_eq!(
                route.nlri.rd(),
                Rd::Ip {
                    router: VTEP,
                    assigned: 1
                }
            );
            match &route.nlri {
                Nlri::Imet { .. } => assert_eq!(route.pmsi, Some((100, VTEP))),
                Nlri::Prefix { label, .. } => {
                    assert_eq!(
                        (*label, route.router_mac),
                        (100, Some(Mac([2, 0, 0, 0, 0, 1])))
                    );
                }
                Nlri::MacIp { label, .. } => assert_eq!(*label, 100),
            }
        }
        // MPLS: the host's labels, l2 for type 2 and 3, l3 for type 5.
        let mpls = LocalNetwork {
            encap: Encap::MplsOverUdp,
            labels: Some((100_000, 100_001)),
            ..red()
        };
        for route in routes(65000, VTEP, &[mpls], &[port(&["10.1.0.10"])]) {
            let want = if matches!(route.nlri, Nlri::Prefix { .. }) {
                100_001
            } else {
                100_000
            };
            match route.nlri {
                Nlri::Imet { .. } => assert_eq!(route.pmsi.unwrap().0, want),
                Nlri::MacIp {
                    label, routed, ip, ..
                } => {
                    assert_eq!(label, want);
                    // With an address, the routed packets' label second.
                    assert_eq!(routed, ip.map(|_| 100_001));
                }
                Nlri::Prefix { label, .. } => assert_eq!(label, want),
            }
        }
        // VXLAN: one VNI for both.
        for route in routes(65000, VTEP, &[red()], &[port(&["10.1.0.10"])]) {
            if let Nlri::MacIp { routed, .. } = route.nlri {
                assert_eq!(routed, None);
            }
        }
        // A port of a network the host does not advertise is left out.
        let mut other = port(&["10.1.0.10"]);
        other.network = "blue".into();
        assert_eq!(routes(65000, VTEP, &[red()], &[other]).len(), 2);
    }

    #[test]
    fn changes_announce_what_is_new_and_withdraw_what_went() {
        let before = routes(65000, VTEP, &[red()], &[port(&["10.1.0.10"])]);
        assert_eq!(changes(&before, &before), (vec![], vec![]));
        // The port's address changes: one MAC/IP route withdrawn, one announced.
        let after = routes(65000, VTEP, &[red()], &[port(&["10.1.0.11"])]);
        let (announce, withdraw) = changes(&before, &after);
        assert_eq!((announce.len(), withdraw.len()), (1, 1));
        assert!(
            matches!(withdraw[0].nlri, Nlri::MacIp { ip: Some(ip), .. } if ip.to_string() == "10.1.0.10")
        );
        // An attribute changes (an export target): announced again, nothing withdrawn.
        let mut n = red();
        n.export.clear();
        let auto = routes(65000, VTEP, &[n], &[port(&["10.1.0.11"])]);
        assert!(
            auto.iter()
                .all(|r| r.targets == [RouteTarget::auto(65000, 100)])
        );
        let (announce, withdraw) = changes(&after, &auto);
        assert_eq!((announce.len(), withdraw.len()), (after.len(), 0));
        // So does a label (the network's VNI): an announcement replaces the route of its
        // key (a withdrawal first would make the peers drop the MAC in between).
        let mut n = red();
        n.vni = 200;
        let relabelled = routes(65000, VTEP, &[n], &[port(&["10.1.0.11"])]);
        let (announce, withdraw) = changes(&after, &relabelled);
        assert_eq!((announce.len(), withdraw.len()), (after.len(), 0));
        // The network goes: everything withdrawn.
        let (announce, withdraw) = changes(&after, &BTreeSet::new());
        assert_eq!((announce.len(), withdraw.len()), (0, after.len()));
    }
}
