use super::*;
use crate::evpn::{Encap, Rd};
use crate::learnt::Rib;
use core::net::Ipv4Addr;
use proptest::prelude::*;

const INTENT: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
  - { name: w1, kind: workload, network: red, peer_mac: "02:00:00:00:01:05", peer_addresses: [10.1.0.5] }
networks:
  - { name: red, vni: 100, gateways: [10.1.0.1/24] }
  - { name: blue, vni: 200 }
  - { name: grey, vni: 400, encap: mpls_udp }
tunnels:
  - { name: to-4, underlay: uplink, remote: 192.0.2.4, remote_mac: "02:00:00:00:00:04" }
bridge:
  - { network: red, mac: "02:00:00:00:01:04", nexthop: n4 }
nexthops:
  - { name: n4, kind: tunnel, tunnel: to-4, encap: vxlan, vni: 100 }
routes:
  - { network: red, prefix: 10.1.0.3/32, nexthop: n4 }
"#;

fn intent() -> Config {
    Config::from_yaml(INTENT).unwrap()
}

fn vtep(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(192, 0, 2, n))
}

fn context() -> Context {
    Context {
        imports: [
            (RouteTarget::auto(65000, 100), "red".to_string()),
            (RouteTarget::auto(65000, 200), "blue".to_string()),
            (RouteTarget::auto(65000, 300), "green".to_string()),
            (RouteTarget::auto(65000, 400), "grey".to_string()),
        ]
        .into(),
        own: vtep(1),
    }
}

/// VTEPs 2 and 3 resolved, 4 has the intent's tunnel, 5 is not resolved.
fn neighbours() -> BTreeMap<IpAddr, Mac> {
    [2u8, 3]
        .into_iter()
        .map(|n| (vtep(n), format!("02:00:00:00:00:{n:02x}").parse().unwrap()))
        .collect()
}

/// A type 2 route: from VTEP `from`, MAC `m`, address `ip` (last byte), sequence, VNI
/// (400: grey's, over MPLS in UDP with the VNI as label, 401 routed). MAC 7 in blue comes
/// over MPLS and MAC 6 in grey over VXLAN: encapsulations their networks do not use.
fn mac_ip(from: u8, m: u8, ip: Option<u8>, seq: Option<u32>, vni: u32) -> Route {
    let mpls = (m == 7 && vni == 200) || (m != 6 && vni == 400);
    Route {
        nlri: Nlri::MacIp {
            rd: Rd::Ip {
                router: Ipv4Addr::new(192, 0, 2, from),
                assigned: 1,
            },
            tag: 0,
            mac: EvpnMac([2, 0, 0, 0, 1, m]),
            ip: ip.map(|i| IpAddr::V4(Ipv4Addr::new(10, 1, 0, i))),
            label: vni,
            // Grey's addresses are routed with label 401, but MAC 5's.
            routed: (mpls && ip.is_some() && m != 5).then_some(vni + 1),
        },
        next_hop: vtep(from),
        targets: vec![RouteTarget::auto(65000, vni)],
        encap: if mpls {
            Encap::MplsOverUdp
        } else {
            Encap::Vxlan
        },
        router_mac: None,
        pmsi: None,
        mobility: seq,
    }
}

fn imet(from: u8, vni: u32) -> Route {
    Route {
        nlri: Nlri::Imet {
            rd: Rd::Ip {
                router: Ipv4Addr::new(192, 0, 2, from),
                assigned: 1,
            },
            tag: 0,
            originator: vtep(from),
        },
        pmsi: Some((vni, Ipv4Addr::new(192, 0, 2, from))),
        ..mac_ip(from, 0, None, None, vni)
    }
}

fn prefix(from: u8, last: u8, len: u8) -> Route {
    Route {
        nlri: Nlri::Prefix {
            rd: Rd::Ip {
                router: Ipv4Addr::new(192, 0, 2, from),
                assigned: 1,
            },
            tag: 0,
            addr: IpAddr::V4(Ipv4Addr::new(10, 1, 0, last)),
            len,
            gateway: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            label: 100,
        },
        ..mac_ip(from, 0, None, None, 100)
    }
}

/// Applies learnt changes as the agent does, checking that each changes something (a
/// removal removes an entry that is there).
fn apply(l: &mut ovr_agent::learnt::Learnt, changes: Vec<LearntChange>) {
    for c in changes {
        let old = l.set(&c.network, c.key, c.nexthop.clone());
        assert_ne!(old, c.nexthop, "a change that changes nothing: {c:?}");
    }
}

/// A configuration as a comparable value (its sections' order aside).
fn sorted(c: &Config) -> Vec<String> {
    let mut v: Vec<String> = c
        .bridge
        .iter()
        .map(|b| format!("bridge {b:?}"))
        .chain(c.routes.iter().map(|r| format!("route {r:?}")))
        .chain(c.nexthops.iter().map(|n| format!("nexthop {n:?}")))
        .chain(c.tunnels.iter().map(|t| format!("tunnel {t:?}")))
        .chain(c.networks.iter().map(|n| format!("network {n:?}")))
        .collect();
    v.sort();
    v
}

/// Runs `batches` through an installer; after each, what is installed is what the
/// whole layering of the routes so far makes. Returns how many batches went entry by
/// entry.
fn check(batches: &[Vec<Learnt>]) -> usize {
    let mut inst = Installer::default();
    inst.set_intent(intent(), context());
    inst.set_neighbours(neighbours());
    let mut installed = match inst.take() {
        Install::Whole(l) => *l,
        other => panic!("the first install is whole: {other:?}"),
    };
    let mut rib = Rib::default();
    let mut incremental = 0;
    for b in batches {
        inst.learn(b);
        for l in b {
            rib.apply(l);
        }
        match inst.take() {
            Install::Whole(l) => installed = *l,
            Install::Changes(cs) => {
                apply(&mut installed.learnt, cs);
                incremental += 1;
            }
            Install::Nothing => {}
        }
        let ctx = context();
        let whole = install::layer(&intent(), &rib.reach(&ctx.imports, ctx.own), &neighbours());
        assert_eq!(sorted(&installed.config), sorted(&whole.config));
        assert_eq!(installed.learnt, whole.learnt);
        let r = inst.report();
        assert_eq!(r.installed, whole.installed);
        assert_eq!(r.skipped, whole.skipped);
        assert_eq!(r.unresolved, whole.unresolved);
        assert_eq!(
            inst.vteps(),
            install::vteps(&rib.reach(&ctx.imports, ctx.own))
        );
    }
    incremental
}

fn route() -> impl Strategy<Value = Route> {
    prop_oneof![
        8 => (1u8..6, 0u8..8, proptest::option::of(2u8..8), proptest::option::of(0u32..3),
              prop_oneof![Just(100u32), Just(200), Just(300), Just(400)])
            .prop_map(|(f, m, ip, seq, vni)| mac_ip(f, m, ip, seq, vni)),
        1 => (1u8..6, prop_oneof![Just(100u32), Just(200), Just(400)]).prop_map(|(f, v)| imet(f, v)),
        1 => (1u8..6, 2u8..8, prop_oneof![Just(24u8), Just(32)]).prop_map(|(f, a, l)| prefix(f, a, l)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn batches_applied_entry_by_entry_give_the_tables_of_the_whole_set_at_once(
        batches in proptest::collection::vec(
            proptest::collection::vec(
                (prop_oneof![Just("a"), Just("b")], route(), proptest::bool::weighted(0.3)),
                1..8,
            ),
            1..12,
        )
    ) {
        let batches: Vec<Vec<Learnt>> = batches
            .into_iter()
            .map(|b| b.into_iter().map(|(n, r, w)| learnt(n, r, w)).collect())
            .collect();
        check(&batches);
    }
}

#[test]
fn type_2_routes_through_known_next_hops_are_installed_entry_by_entry() {
    let add = |m: u8, w: bool| {
        vec![
            learnt("rr", mac_ip(2, m, None, None, 100), w),
            learnt("rr", mac_ip(2, m, Some(m), None, 100), w),
        ]
    };
    // The first MAC behind VTEP 2 makes its tunnel and next hop: whole. A second MAC,
    // a move to a higher sequence, its withdrawal: entry by entry. The last MAC's
    // withdrawal removes the next hop: whole.
    let moved = vec![learnt("rr", mac_ip(3, 6, Some(6), Some(1), 100), false)];
    let batches = [
        add(6, false),
        vec![learnt("rr", imet(3, 100), false)],
        add(7, false),
        moved.clone(),
        add(6, true),
        vec![learnt("rr", mac_ip(3, 6, Some(6), Some(1), 100), true)],
        add(7, true),
    ];
    assert!(check(&batches) >= 3);
    let mut inst = Installer::default();
    inst.set_intent(intent(), context());
    inst.set_neighbours(neighbours());
    let _ = inst.take();
    inst.learn(&add(6, false));
    assert!(matches!(inst.take(), Install::Whole(_)));
    inst.learn(&add(7, false));
    match inst.take() {
        Install::Changes(cs) => assert_eq!(cs.len(), 2, "{cs:?}"),
        other => panic!("{other:?}"),
    }
    // The same routes again change nothing.
    inst.learn(&add(7, false));
    assert!(matches!(inst.take(), Install::Nothing));
}

#[test]
fn a_lost_session_and_a_listing_remove_what_came_through_them() {
    let mut inst = Installer::default();
    inst.set_intent(intent(), context());
    inst.set_neighbours(neighbours());
    let _ = inst.take();
    inst.learn(&[
        learnt("a", mac_ip(2, 6, Some(6), None, 100), false),
        learnt("b", mac_ip(3, 7, Some(7), None, 100), false),
    ]);
    let _ = inst.take();
    assert_eq!(inst.drop_neighbor("a"), 1);
    let Install::Whole(l) = inst.take() else {
        panic!("a lost session: whole")
    };
    assert_eq!(l.learnt.bridge().count(), 1);
    // A listing without b's route withdraws it.
    inst.resync(&[], &Newer::default());
    let l = match inst.take() {
        Install::Whole(l) => *l,
        other => panic!("{other:?}"),
    };
    assert!(l.learnt.is_empty());
    assert!(inst.rib().is_empty());
}

#[test]
fn a_listing_does_not_undo_what_the_watch_changed_while_it_was_under_way() {
    let mut inst = Installer::default();
    inst.set_intent(intent(), context());
    inst.set_neighbours(neighbours());
    let (a, b, c) = (
        mac_ip(2, 6, Some(6), None, 100),
        mac_ip(3, 7, Some(7), None, 100),
        mac_ip(2, 8, Some(8), None, 100),
    );
    inst.learn(&[learnt("a", a.clone(), false), learnt("b", b.clone(), false)]);
    // The listing is asked for; meanwhile the watch withdraws a and brings c.
    let during = [learnt("a", a.clone(), true), learnt("a", c.clone(), false)];
    let mut newer = Newer::default();
    newer.saw(&during);
    inst.learn(&during);
    // The listing, from before both: a present, c absent, b gone.
    inst.resync(&[learnt("a", a, false)], &newer);
    let mut left: Vec<_> = inst
        .rib()
        .entries()
        .map(|(n, key, _)| (n.to_string(), *key))
        .collect();
    left.sort();
    assert_eq!(
        left,
        [("a".to_string(), c.nlri.key())],
        "a stays withdrawn, c stays, b goes"
    );
}
