use super::*;
use crate::evpn::Mac as EvpnMac;

const INTENT: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
  - { name: w1, kind: workload, network: red, peer_mac: "02:00:00:00:01:0a", peer_addresses: [10.1.0.10] }
networks:
  - { name: red, vni: 100, gateways: [10.1.0.1/24] }
"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn vxlan(vtep: &str, label: u32) -> Remote {
    Remote {
        vtep: ip(vtep),
        encap: Encap::Vxlan,
        label,
        routed: None,
    }
}

fn mac(last: u8) -> EvpnMac {
    EvpnMac([2, 0, 0, 0, 2, last])
}

fn reach() -> Reach {
    let mut r = Reach::default();
    r.flood.insert(
        "red".into(),
        [vxlan("192.0.2.2", 100), vxlan("192.0.2.3", 100)].into(),
    );
    r.macs.insert("red", mac(1), vxlan("192.0.2.2", 100));
    r.hosts.insert("red", ip("10.1.0.20"), mac(1));
    r.prefixes.insert(
        ("red".into(), ip("10.9.0.0"), 24),
        [vxlan("192.0.2.2", 5000), vxlan("192.0.2.3", 5000)].into(),
    );
    // The network's own subnet, as every host with a gateway in it advertises it.
    r.prefixes.insert(
        ("red".into(), ip("10.1.0.0"), 24),
        [vxlan("192.0.2.2", 100)].into(),
    );
    r
}

fn neighbours(vteps: &[&str]) -> BTreeMap<IpAddr, Mac> {
    vteps
        .iter()
        .enumerate()
        .map(|(i, v)| {
            (
                ip(v),
                Mac(ovr_wire::ethernet::MacAddr([2, 0, 0, 0, 0, 0x10 + i as u8])),
            )
        })
        .collect()
}

#[test]
fn learnt_reachability_becomes_tunnels_flood_bridge_host_routes_and_ecmp_routes() {
    let intent = Config::from_yaml(INTENT).unwrap();
    let l = layer(&intent, &reach(), &neighbours(&["192.0.2.2", "192.0.2.3"]));
    assert!(l.unresolved.is_empty());
    let c = &l.config;
    let tunnels: Vec<_> = c
        .tunnels
        .iter()
        .map(|t| (t.name.as_str(), t.remote))
        .collect();
    assert_eq!(
        tunnels,
        [
            ("evpn:192.0.2.2", ip("192.0.2.2")),
            ("evpn:192.0.2.3", ip("192.0.2.3"))
        ]
    );
    assert_eq!(
        c.networks[0].flood,
        ["evpn:192.0.2.2:100", "evpn:192.0.2.3:100"]
    );
    // The MAC and the host route are learnt entries, beside the configuration.
    assert!(c.bridge.is_empty());
    let bridge: Vec<_> = l.learnt.bridge().map(|(n, _, nh)| (&**n, &**nh)).collect();
    assert_eq!(bridge, [("red", "evpn:192.0.2.2:100")]);
    let hosts: Vec<_> = l
        .learnt
        .routes()
        .map(|(n, p, nh)| (&**n, p.to_string(), &**nh))
        .collect();
    assert_eq!(
        hosts,
        [("red", "10.1.0.20/32".into(), "evpn:192.0.2.2:100")]
    );
    // The type 5 prefix is the configuration's.
    let routes: Vec<_> = c
        .routes
        .iter()
        .map(|r| (r.prefix.0.to_string(), r.nexthop.as_str()))
        .collect();
    assert_eq!(
        routes,
        [("10.9.0.0/24".to_string(), "evpn:ecmp:red:10.9.0.0/24")]
    );
    let ecmp = c
        .nexthops
        .iter()
        .find(|n| n.kind == NextHopKindConfig::Ecmp);
    assert_eq!(
        ecmp.unwrap().members.as_deref().unwrap(),
        ["evpn:192.0.2.2:5000", "evpn:192.0.2.3:5000"]
    );
    assert_eq!(
        l.skipped["known_from_intent"], 1,
        "the network's own subnet"
    );
    // The result is a configuration the tables take whole.
    c.translate().unwrap();
    // And strip gives the intent back.
    assert_eq!(strip(c), intent);
}

#[test]
fn an_unresolved_vtep_installs_nothing_through_it_until_its_mac_is_known() {
    let intent = Config::from_yaml(INTENT).unwrap();
    let l = layer(&intent, &reach(), &neighbours(&["192.0.2.3"]));
    assert_eq!(l.unresolved, [ip("192.0.2.2")].into());
    let c = &l.config;
    assert_eq!(c.tunnels.len(), 1);
    assert_eq!(c.networks[0].flood, ["evpn:192.0.2.3:100"]);
    assert!(l.learnt.is_empty());
    // The prefix goes through the one VTEP that is resolved.
    assert_eq!(c.routes.len(), 1);
    assert_eq!(c.routes[0].nexthop, "evpn:192.0.2.3:5000");
    assert!(l.skipped["vtep_unresolved"] >= 3);
    c.translate().unwrap();
    assert_eq!(vteps(&reach()), [ip("192.0.2.2"), ip("192.0.2.3")].into());
}

#[test]
fn what_the_intent_knows_is_installed_once() {
    // h2 (192.0.2.2) is known from the cluster: a tunnel with its MAC, its workload's
    // bridge entry, host route and a place in the flood list.
    let intent = Config::from_yaml(&format!(
        "{INTENT}{}",
        r#"
tunnels:
  - { name: to-h2, underlay: uplink, remote: 192.0.2.2, remote_mac: "02:00:00:00:00:02" }
nexthops:
  - { name: "h2:red", kind: tunnel, tunnel: to-h2, encap: vxlan, vni: 100 }
bridge:
  - { network: red, mac: "02:00:00:00:02:01", nexthop: "h2:red" }
routes:
  - { network: red, prefix: 10.1.0.20/32, nexthop: "h2:red" }
"#
    ))
    .unwrap();
    let mut intent = intent;
    intent.networks[0].flood = vec!["h2:red".into()];
    // No MAC resolved for anyone: h2's tunnel is the intent's; h3 waits.
    let l = layer(&intent, &reach(), &BTreeMap::new());
    assert_eq!(l.unresolved, [ip("192.0.2.3")].into());
    let c = &l.config;
    assert_eq!(c.tunnels.len(), 1);
    assert_eq!(c.bridge.len(), 1);
    assert!(l.learnt.is_empty(), "{:?}", l.learnt);
    assert_eq!(c.networks[0].flood, ["h2:red"]);
    // The prefix through h2 reuses the intent's tunnel.
    let nh = c.nexthops.iter().find(|n| n.name == "evpn:192.0.2.2:5000");
    assert_eq!(nh.unwrap().tunnel.as_deref(), Some("to-h2"));
    assert_eq!(l.skipped["known_from_intent"], 4);
    c.translate().unwrap();
}

#[test]
fn a_local_workloads_mac_or_address_stays_local_and_another_encapsulation_is_refused() {
    let intent = Config::from_yaml(INTENT).unwrap();
    let mut r = Reach::default();
    let w1 = EvpnMac([2, 0, 0, 0, 1, 0x0a]);
    r.macs.insert("red", w1, vxlan("192.0.2.2", 100));
    r.hosts.insert("red", ip("10.1.0.10"), w1);
    // red is a VXLAN network: an MPLS route for it is not installed.
    r.macs.insert("red", mac(9), mpls("192.0.2.4", 100_000));
    r.flood
        .insert("blue".into(), [vxlan("192.0.2.2", 200)].into());
    let l = layer(&intent, &r, &neighbours(&["192.0.2.2", "192.0.2.4"]));
    assert_eq!(l.config, intent);
    assert_eq!(l.skipped["known_from_intent"], 2);
    assert_eq!(l.skipped["wrong_encap"], 1);
    assert_eq!(l.skipped["no_such_network"], 1);
}

fn mpls(vtep: &str, label: u32) -> Remote {
    Remote {
        vtep: ip(vtep),
        encap: Encap::MplsOverUdp,
        label,
        routed: None,
    }
}

#[test]
fn an_mpls_networks_routes_become_mpls_next_hops_with_their_labels() {
    let intent =
        Config::from_yaml(&INTENT.replace("gateways", "encap: mpls_udp, gateways")).unwrap();
    let mut r = Reach::default();
    r.flood
        .insert("red".into(), [mpls("192.0.2.2", 100_000)].into());
    // A MAC bridged with one label, its address routed with the other.
    let w = Remote {
        routed: Some(100_001),
        ..mpls("192.0.2.2", 100_000)
    };
    r.macs.insert("red", mac(1), w);
    r.hosts.insert("red", ip("10.1.0.20"), mac(1));
    // One without a routed label: bridged, its address not routed.
    r.macs.insert("red", mac(4), mpls("192.0.2.2", 100_000));
    r.hosts.insert("red", ip("10.1.0.21"), mac(4));
    r.prefixes.insert(
        ("red".into(), ip("10.9.0.0"), 24),
        [mpls("192.0.2.2", 100_001), mpls("192.0.2.3", 100_003)].into(),
    );
    // VXLAN and MPLS over GRE for an MPLS over UDP network: refused, each counted.
    r.macs.insert("red", mac(2), vxlan("192.0.2.2", 100));
    let gre = Remote {
        encap: Encap::MplsOverGre,
        ..mpls("192.0.2.3", 100_000)
    };
    r.macs.insert("red", mac(3), gre);
    let l = layer(&intent, &r, &neighbours(&["192.0.2.2", "192.0.2.3"]));
    let c = &l.config;
    let tunnels: Vec<_> = c.tunnels.iter().map(|t| t.remote).collect();
    assert_eq!(tunnels, [ip("192.0.2.2"), ip("192.0.2.3")]);
    let hops: Vec<_> = c
        .nexthops
        .iter()
        .filter(|n| n.kind == NextHopKindConfig::Tunnel)
        .map(|n| (n.name.as_str(), n.encap, n.label, n.vni))
        .collect();
    let udp = Some(EncapConfig::MplsUdp);
    assert_eq!(
        hops,
        [
            ("evpn:192.0.2.2:mpls_udp:100000", udp, Some(100_000), None),
            ("evpn:192.0.2.2:mpls_udp:100001", udp, Some(100_001), None),
            ("evpn:192.0.2.3:mpls_udp:100003", udp, Some(100_003), None),
        ]
    );
    assert_eq!(c.networks[0].flood, ["evpn:192.0.2.2:mpls_udp:100000"]);
    let bridge: Vec<_> = l.learnt.bridge().map(|(_, _, nh)| &**nh).collect();
    assert_eq!(bridge, ["evpn:192.0.2.2:mpls_udp:100000"; 2]);
    let hosts: Vec<_> = l
        .learnt
        .routes()
        .map(|(_, p, nh)| (p.to_string(), &**nh))
        .collect();
    assert_eq!(
        hosts,
        [("10.1.0.20/32".into(), "evpn:192.0.2.2:mpls_udp:100001")]
    );
    let routes: Vec<_> = c
        .routes
        .iter()
        .map(|r| (r.prefix.0.to_string(), r.nexthop.as_str()))
        .collect();
    assert_eq!(
        routes,
        [("10.9.0.0/24".into(), "evpn:ecmp:red:10.9.0.0/24")]
    );
    assert_eq!(l.skipped["wrong_encap"], 2);
    assert_eq!(l.skipped["no_routed_label"], 1);
    assert_eq!(
        l.installed,
        Counts {
            tunnels: 2,
            flood: 1,
            macs: 2,
            hosts: 1,
            prefixes: 1,
        }
    );
    // The tables take it whole: the next hops encapsulate as MPLS in UDP.
    c.translate().unwrap();
    assert_eq!(strip(c), intent);
}
