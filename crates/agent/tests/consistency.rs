//! Random sequences of API changes: after each, the installed tables equal what a fresh
//! daemon would build from the final model; a refused change leaves everything as it
//! was; and the names that survive a change keep their ids.

mod common;

use common::*;
use ovr_agent::change::{Change, Object, PolicyChange};
use ovr_agent::store::{Store, initial};
use ovr_config::Config;
use ovr_config::model::*;
use proptest::prelude::*;

const BASE: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:0a", addresses: ["192.0.2.1/24"] }
tunnels:
  - { name: to-b, underlay: uplink, remote: 192.0.2.2, remote_mac: "02:00:00:00:00:0b" }
networks:
  - { name: n0, vni: 10 }
  - { name: n1 }
nexthops:
  - { name: h0, kind: drop }
  - { name: h1, kind: tunnel, tunnel: to-b, encap: vxlan, vni: 5 }
  - { name: h2, kind: vrf, network: n1, inner: ip }
"#;

fn net(i: u8) -> String {
    format!("n{i}")
}

fn hop(i: u8) -> String {
    format!("h{i}")
}

fn nexthop(name: u8, kind: u8, a: u8, b: u8) -> NextHopConfig {
    let mut n = NextHopConfig::new(hop(name), NextHopKindConfig::Drop);
    match kind % 4 {
        0 => {}
        1 => {
            n.kind = NextHopKindConfig::Tunnel;
            n.tunnel = Some("to-b".into());
            n.encap = Some(EncapConfig::Vxlan);
            n.vni = Some(u32::from(a) + 1);
        }
        2 => {
            n.kind = NextHopKindConfig::Vrf;
            n.network = Some(net(a));
            n.inner = Some(InnerConfig::Ip);
        }
        _ => {
            n.kind = NextHopKindConfig::Ecmp;
            let mut m = vec![hop(a)];
            if b != a {
                m.push(hop(b));
            }
            n.members = Some(m);
        }
    }
    n
}

fn object() -> impl Strategy<Value = Object> {
    let network = (
        0..3u8,
        prop::option::of(10..13u32),
        prop::option::of(1..3u32),
    )
        .prop_map(|(i, vni, flow_quota)| {
            Object::Network(NetworkConfig {
                name: net(i),
                vni,
                router_mac: None,
                gateways: vec![],
                flood: vec![],
                policy: None,
                flow_quota,
                route_targets: None,
                encap: None,
            })
        });
    let hop = (0..5u8, 0..4u8, 0..5u8, 0..5u8)
        .prop_map(|(n, k, a, b)| Object::Nexthop(nexthop(n, k, a % 3, b)));
    let route = (0..3u8, 0..4u8, 0..5u8).prop_map(|(n, p, h)| {
        Object::Route(RouteConfig {
            network: net(n),
            prefix: format!("10.{p}.0.0/16").parse().unwrap(),
            nexthop: self::hop(h),
        })
    });
    let label = (0..3u32, 0..5u8).prop_map(|(l, h)| {
        Object::Label(LabelConfig {
            label: 100 + l,
            nexthop: self::hop(h),
        })
    });
    let bridge = (0..3u8, 0..3u8, 0..5u8).prop_map(|(n, m, h)| {
        Object::Bridge(BridgeConfig {
            network: net(n),
            mac: format!("02:00:00:00:09:0{m}").parse().unwrap(),
            nexthop: self::hop(h),
        })
    });
    let iface = (0..3u8, 0..3u8, any::<bool>()).prop_map(|(i, n, peer)| {
        Object::Interface(InterfaceConfig {
            name: format!("w{i}"),
            kind: InterfaceKindConfig::Workload,
            mac: None,
            addresses: vec![],
            mtu: 1500,
            network: Some(net(n)),
            policy: true,
            admin_up: true,
            peer_mac: peer.then(|| format!("02:00:00:00:08:0{i}").parse().unwrap()),
            peer_addresses: vec![],
            memif: None,
            police: None,
        })
    });
    prop_oneof![network, hop, route, label, bridge, iface]
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => object().prop_map(Change::Create),
        2 => object().prop_map(Change::Replace),
        2 => object().prop_map(|o| Change::Delete(o.key())),
        1 => (0..3u8, 0..3u8, any::<bool>()).prop_map(|(n, other, set)| {
            Change::SetPolicy(PolicyChange {
                network: net(n),
                rules: set.then(|| vec![RuleConfig {
                    action: ActionConfig::Allow,
                    src_network: Some(net(other)),
                    dst_network: None,
                    src: None,
                    dst: None,
                    protocol: None,
                    src_ports: None,
                    dst_ports: None,
                    chain: None,
                }]),
            })
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn tables_follow_the_model(batches in prop::collection::vec(prop::collection::vec(change(), 1..3), 1..30)) {
        let mut a = agent(Config::from_yaml(BASE).unwrap(), None);
        for changes in batches {
            let (config, tables, names) = (a.config().clone(), installed(&a), a.names().clone());
            let batch = changes.len() > 1;
            match a.apply(changes, batch) {
                Ok(_) => {
                    prop_assert_eq!(installed(&a), fresh(a.config()));
                    let now = a.names();
                    for (n, id) in &names.nexthops {
                        if let Some(new) = now.nexthops.get(n) {
                            prop_assert_eq!(new, id, "next hop {} was renumbered", n);
                        }
                    }
                    for (n, id) in &names.networks {
                        if let Some(new) = now.networks.get(n) {
                            prop_assert_eq!(new, id, "network {} was renumbered", n);
                        }
                    }
                }
                Err(_) => {
                    prop_assert_eq!(a.config(), &config);
                    prop_assert_eq!(installed(&a), tables);
                }
            }
        }
    }
}

/// A workload whose `peer_mac` makes a host route and a bridge entry that API entries
/// may collide with.
const PEERED: &str = r#"
  - { name: w9, network: n0, peer_mac: "02:00:00:00:08:09", peer_addresses: [10.0.0.1] }
"#;

/// Mostly route, bridge and label changes (the incremental way), some colliding with the
/// workload's own entries, now and then a next hop or a network (the whole way).
fn entry_change() -> impl Strategy<Value = Change> {
    let route = (0..2u8, 0..6u8, 0..5u8).prop_map(|(n, p, h)| {
        let prefix = match p {
            0 => "10.0.0.1/32".to_string(),
            1 => "2001:db8::/64".to_string(),
            p => format!("10.{p}.0.0/16"),
        };
        Object::Route(RouteConfig {
            network: net(n),
            prefix: prefix.parse().unwrap(),
            nexthop: hop(h),
        })
    });
    let bridge = (0..2u8, 7..10u8, 0..5u8).prop_map(|(n, m, h)| {
        Object::Bridge(BridgeConfig {
            network: net(n),
            mac: format!("02:00:00:00:08:0{m}").parse().unwrap(),
            nexthop: hop(h),
        })
    });
    // Label 5 is reserved: the tables refuse it.
    let label = (prop_oneof![Just(5u32), 100..104u32], 0..5u8).prop_map(|(label, h)| {
        Object::Label(LabelConfig {
            label,
            nexthop: hop(h),
        })
    });
    let entry = prop_oneof![route, bridge, label];
    prop_oneof![
        4 => entry.clone().prop_map(Change::Create),
        3 => entry.clone().prop_map(Change::Replace),
        3 => entry.prop_map(|o| Change::Delete(o.key())),
        1 => object().prop_map(Change::Create),
        1 => object().prop_map(|o| Change::Delete(o.key())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The incremental way against the whole translation: after every batch the tables
    /// equal a fresh translation of the model; at the end the state file (snapshot plus
    /// appended records) reads back as the same model and gives the same tables.
    #[test]
    fn entry_batches_match_a_whole_translation(batches in prop::collection::vec(prop::collection::vec(entry_change(), 1..6), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("state.json"));
        // The workload goes after the uplink, in the interfaces section.
        let base = BASE.replacen("tunnels:", &format!("{}tunnels:", PEERED.trim_start_matches('\n')), 1);
        let mut a = agent(Config::from_yaml(&base).unwrap(), Some(store.clone()));
        for changes in batches {
            let (config, tables) = (a.config().clone(), installed(&a));
            let batch = changes.len() > 1;
            match a.apply(changes, batch) {
                Ok(_) => {
                    prop_assert_eq!(installed(&a), fresh(a.config()));
                }
                Err(_) => {
                    prop_assert_eq!(a.config(), &config);
                    prop_assert_eq!(installed(&a), tables);
                }
            }
        }
        let (config, tables) = (a.config().clone(), installed(&a));
        drop(a);
        let start = initial(None, Some(&store)).unwrap();
        prop_assert_eq!(&start.config, &config);
        let (w, _r) = ovr_tables::state::new_tables();
        let b = ovr_agent::Agent::start(start, w, Some(store)).unwrap();
        prop_assert_eq!(installed(&b), tables);
    }
}
