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
    r.macs
        .insert(("red".into(), mac(1)), vxlan("192.0.2.2", 100));
    r.hosts.insert(("red".into(), ip("10.1.0.20")), mac(1));
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
    assert_eq!(c.bridge.len(), 1);
    assert_eq!(c.bridge[0].nexthop, "evpn:192.0.2.2:100");
    let routes: Vec<_> = c
        .routes
        .iter()
        .map(|r| (r.prefix.0.to_string(), r.nexthop.as_str()))
        .collect();
    assert_eq!(
        routes,
        [
            ("10.1.0.20/32".to_string(), "evpn:192.0.2.2:100"),
            ("10.9.0.0/24".to_string(), "evpn:ecmp:red:10.9.0.0/24"),
        ]
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
    assert!(c.bridge.is_empty());
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
    assert_eq!(c.networks[0].flood, ["h2:red"]);
    // The prefix through h2 reuses the intent's tunnel.
    let nh = c.nexthops.iter().find(|n| n.name == "evpn:192.0.2.2:5000");
    assert_eq!(nh.unwrap().tunnel.as_deref(), Some("to-h2"));
    assert_eq!(l.skipped["known_from_intent"], 4);
    c.translate().unwrap();
}

#[test]
fn a_local_workloads_mac_or_address_stays_local_and_mpls_is_not_installed() {
    let intent = Config::from_yaml(INTENT).unwrap();
    let mut r = Reach::default();
    let w1 = EvpnMac([2, 0, 0, 0, 1, 0x0a]);
    r.macs.insert(("red".into(), w1), vxlan("192.0.2.2", 100));
    r.hosts.insert(("red".into(), ip("10.1.0.10")), w1);
    r.macs.insert(
        ("red".into(), mac(9)),
        Remote {
            vtep: ip("192.0.2.4"),
            encap: Encap::MplsOverUdp,
            label: 100,
        },
    );
    r.flood
        .insert("blue".into(), [vxlan("192.0.2.2", 200)].into());
    let l = layer(&intent, &r, &neighbours(&["192.0.2.2"]));
    assert_eq!(l.config, intent);
    assert_eq!(l.skipped["known_from_intent"], 2);
    assert_eq!(l.skipped["mpls_not_installed"], 1);
    assert_eq!(l.skipped["no_such_network"], 1);
}
