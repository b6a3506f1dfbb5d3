use super::*;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::prefix::IpPrefix;
use ovr_tables::state::{TableOp, new_tables};
use std::net::Ipv4Addr;

const EXAMPLE: &str = include_str!("../examples/two-networks.yaml");

#[test]
fn the_example_loads_into_the_tables() {
    let t = Config::from_yaml(EXAMPLE).unwrap().translate().unwrap();
    assert_eq!(t.ops.len(), t.origins.len());
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let n = &t.names;
    let (red, blue) = (n.networks["red"], n.networks["blue"]);
    assert_eq!((red, blue), (VrfId(1), VrfId(2)));
    assert_eq!(st.vrf_by_vni(200).unwrap().id, blue);
    let vrf = st.vrf(red).unwrap();
    assert_eq!(vrf.gateways.len(), 2);
    // The flood list: the tunnel named, then the workload with a peer.
    assert_eq!(vrf.flood, vec![n.nexthops["b-red"], n.nexthops["vm1"]]);
    // Host routes from peer_addresses, and the routes written.
    let lookup = |v: VrfId, a: [u8; 4]| st.vrf(v).unwrap().fib4.lookup(Ipv4Addr::from(a).into());
    assert_eq!(lookup(red, [10, 1, 0, 5]), Some(n.nexthops["vm1"]));
    assert_eq!(lookup(blue, [10, 1, 0, 5]), Some(n.nexthops["vm2"]));
    assert_eq!(lookup(red, [10, 2, 0, 9]), Some(n.nexthops["b-red"]));
    let both = st.nexthop(n.nexthops["b-both"]).unwrap();
    assert_eq!(
        both.members(),
        &[n.nexthops["b-mpls-udp"], n.nexthops["b-mpls-gre"]]
    );
    match st.nexthop(n.nexthops["b-mpls-gre"]) {
        Some(NextHop::Tunnel(t)) => {
            assert_eq!(t.encap, Encap::MplsOverGre { label: 1001 });
            assert_eq!(t.src, "192.0.2.1".parse::<std::net::IpAddr>().unwrap());
            assert_eq!(t.underlay, InterfaceId(0));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(st.labels().lookup(500), Some(n.nexthops["vm1"]));
    assert_eq!(
        vrf.bridge.lookup(&"02:00:00:00:01:06".parse().unwrap()),
        Some(n.nexthops["b-red"])
    );
    assert_eq!(vrf.policy.rules().len(), 2);
    assert_eq!(vrf.policy.rules()[1].dst_net, Some(blue));
    // Workloads take the gateway MAC by default.
    assert_eq!(
        st.interface(InterfaceId(1)).unwrap().mac,
        ovr_tables::vrf::DEFAULT_ROUTER_MAC
    );
    assert_eq!(n.interface_name(InterfaceId(2)), Some("vm2"));
    assert_eq!(n.nexthop_name(NextHopId(1)), Some("b-red"));
    assert_eq!(t.flows.network_quota, Some(10000));
    assert_eq!(t.flows.idle_timeout_ms, 60_000);
    // Exact routes, and the IPv6 host route of vm1's second address.
    let p = |s: &str| s.parse::<IpPrefix>().unwrap();
    assert_eq!(st.route(red, p("10.3.0.0/24")), Some(n.nexthops["b-both"]));
    assert_eq!(st.route(red, p("fd00:1::5/128")), Some(n.nexthops["vm1"]));
    assert_eq!(st.route(blue, p("10.3.0.0/24")), None);
    assert_eq!(vrf.gateways[1].prefix_len, 64);
    assert_eq!(vrf.router_mac, ovr_tables::vrf::DEFAULT_ROUTER_MAC);
    assert_eq!(
        st.vrf(blue).unwrap().flood,
        vec![n.nexthops["b-blue"], n.nexthops["vm2"]]
    );
    assert_eq!(st.labels().lookup(501), Some(n.nexthops["red-l2"]));
    match st.nexthop(n.nexthops["red-l2"]) {
        Some(NextHop::Vrf { vrf, inner }) => {
            assert_eq!((*vrf, *inner), (red, ovr_tables::nexthop::Inner::Ethernet));
        }
        other => panic!("{other:?}"),
    }
}

/// The rank of an op in the batch order the translation promises.
fn rank(op: &TableOp) -> u8 {
    match op {
        TableOp::UpsertVrf { .. } => 0,
        TableOp::SetGateway { .. } | TableOp::SetFlowQuota { .. } => 1,
        TableOp::UpsertInterface(_) => 2,
        TableOp::UpsertNextHop(_, NextHop::Composite(_)) => 4,
        TableOp::UpsertNextHop(..) => 3,
        TableOp::AddRoute { .. } => 5,
        TableOp::AddBridge { .. } => 6,
        TableOp::AddLabel { .. } => 7,
        TableOp::SetFlood { .. } => 8,
        TableOp::SetChains(_) => 9,
        TableOp::SetPolicy { .. } => 10,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn the_example_translates_in_order_with_document_ids() {
    let t = Config::from_yaml(EXAMPLE).unwrap().translate().unwrap();
    let ranks: Vec<u8> = t.ops.iter().map(rank).collect();
    assert!(ranks.is_sorted(), "{ranks:?}");
    // 2 VRFs + 2 gateways + 3 interfaces + 7 simple next hops + 1 composite + 2 routes
    // + 3 host routes + 3 bridge entries + 2 labels + 2 flood lists + 1 policy.
    assert_eq!(t.ops.len(), 28);
    assert!(matches!(
        &t.ops[0],
        TableOp::UpsertVrf { id: VrfId(1), name, vni: Some(100) } if name == "red"
    ));
    let n = &t.names;
    let ids: Vec<(&str, u32)> = [
        "b-red",
        "b-blue",
        "b-mpls-udp",
        "b-mpls-gre",
        "b-both",
        "red-l2",
        "vm1",
        "vm2",
    ]
    .iter()
    .map(|s| (*s, n.nexthops[*s].0))
    .collect();
    assert_eq!(
        ids.iter().map(|x| x.1).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    assert_eq!(n.interfaces["uplink"], InterfaceId(0));
    assert_eq!(n.tunnels["to-b"], 0);
    assert_eq!(n.tunnel_name(0), Some("to-b"));
    assert_eq!(n.network_name(VrfId(2)), Some("blue"));
    let at = |o: &str| t.origins.iter().position(|x| x.to_string() == o).unwrap();
    assert!(matches!(t.ops[at("routes[1]")], TableOp::AddRoute { .. }));
    // An entry's origin is its section and index, not a path string; as small as one.
    assert_eq!(size_of::<crate::Origin>(), size_of::<String>());
    assert_eq!(
        t.origins[at("routes[1]")],
        crate::Origin::Entry(crate::Section::Routes, 1)
    );
    assert!(matches!(
        t.ops[at("nexthops[4].members")],
        TableOp::UpsertNextHop(NextHopId(5), _)
    ));
    assert!(matches!(
        t.ops[at("interfaces[1].peer_addresses[1]")],
        TableOp::AddRoute { .. }
    ));
    assert!(matches!(
        t.ops[at("networks[0].policy")],
        TableOp::SetPolicy { vrf: VrfId(1), .. }
    ));
}

#[test]
fn the_model_serializes_back_to_the_same_configuration() {
    let c = Config::from_yaml(EXAMPLE).unwrap();
    let text = serde_yaml_ng::to_string(&c).unwrap();
    assert_eq!(Config::from_yaml(&text).unwrap(), c, "{text}");
    assert!(text.contains("dst_ports: 80-81"), "{text}");
    assert!(text.contains("protocol: tcp"), "{text}");
}

#[test]
fn defaults_apply_to_what_is_left_out() {
    let c = Config::from_yaml(
        "networks: [{ name: red }]\ninterfaces: [{ name: tap0, kind: tap, network: red }]",
    )
    .unwrap();
    let f = &c.interfaces[0];
    assert_eq!((f.mtu, f.policy, f.admin_up), (1500, true, true));
    assert_eq!(c.flows, FlowSettings::default());
    assert_eq!(c.flows.capacity, 1 << 20);
    let t = c.translate().unwrap();
    // No policy written: no SetPolicy; no flood members: no SetFlood.
    assert_eq!(t.ops.iter().map(rank).collect::<Vec<_>>(), vec![0, 1, 2]);
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    assert_eq!(
        r.enter().unwrap().interface(InterfaceId(0)).unwrap().mac,
        ovr_tables::vrf::DEFAULT_ROUTER_MAC
    );
    assert!(
        Config::from_yaml("")
            .unwrap()
            .translate()
            .unwrap()
            .ops
            .is_empty()
    );
}

#[test]
fn load_names_the_file() {
    let e = Config::load(std::path::Path::new("/nonexistent/ovr.yaml")).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/ovr.yaml: "), "{e}");
}

#[test]
fn kept_names_keep_their_ids_and_new_ones_take_free_ids() {
    let c = Config::from_yaml(EXAMPLE).unwrap();
    let before = c.translate().unwrap().names;
    let mut d = c.clone();
    // Remove a next hop written early (and the label using it), add one.
    d.labels.retain(|l| l.nexthop != "red-l2");
    d.nexthops.retain(|n| n.name != "red-l2");
    let mut extra = d.nexthops[0].clone();
    extra.name = "late".into();
    d.nexthops.insert(0, extra);
    let after = d.translate_keeping(&before).unwrap().names;
    for (name, id) in &before.nexthops {
        if name != "red-l2" {
            assert_eq!(after.nexthops[name], *id, "{name}");
        }
    }
    // Written first, yet it takes no id a kept name (or the one just freed) holds.
    assert!(
        !before
            .nexthops
            .values()
            .any(|id| *id == after.nexthops["late"])
    );
    // Without ids to keep, document order.
    assert_eq!(d.translate().unwrap().names.nexthops["late"], NextHopId(1));
}

const MEMIF_EXAMPLE: &str = include_str!("../../../examples/memif-l2.yaml");

#[test]
fn the_memif_example_loads_into_the_tables() {
    use ovr_tables::interface::{InterfaceKind, MemifMode, MemifRole};
    let t = Config::from_yaml(MEMIF_EXAMPLE)
        .unwrap()
        .translate()
        .unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let n = &t.names;
    for (name, sock, mac) in [
        ("memif-a", "/run/ovr/memif-a.sock", [2, 0, 0, 0, 0, 0x0a]),
        ("memif-b", "/run/ovr/memif-b.sock", [2, 0, 0, 0, 0, 0x0b]),
    ] {
        let i = st.interfaces().by_name(name).unwrap();
        assert_eq!(i.kind, InterfaceKind::Memif);
        let m = i.memif.as_ref().unwrap();
        assert_eq!(
            (m.role, m.socket.as_str(), m.id),
            (MemifRole::Server, sock, 0)
        );
        assert_eq!(m.mode, MemifMode::Ethernet);
        assert_eq!((m.ring_size, m.buffer_size, m.queues), (10, 2048, 1));
        // The function's MAC is bridged to its interface, in the one network.
        let vrf = n.networks["l2"];
        let nh = st
            .vrf(vrf)
            .unwrap()
            .bridge
            .lookup(&ovr_wire::ethernet::MacAddr(mac));
        assert_eq!(nh, Some(n.nexthops[name]));
    }
}

#[test]
fn a_policer_reaches_its_interface_with_its_burst_or_the_default() {
    use ovr_tables::interface::Police;
    let yaml = "networks: [{ name: red }]\ninterfaces:\n  \
        - { name: a, network: red, police: { packets_per_second: 50000 } }\n  \
        - { name: b, network: red, police: { packets_per_second: 100, burst: 5 } }\n  \
        - { name: c, network: red }";
    let t = Config::from_yaml(yaml).unwrap().translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let police = |name| st.interfaces().by_name(name).unwrap().police;
    let p = |packets_per_second, burst| {
        Some(Police {
            packets_per_second,
            burst,
        })
    };
    assert_eq!(police("a"), p(50_000, 5_000), "a tenth of a second's worth");
    assert_eq!(police("b"), p(100, 5));
    assert_eq!(police("c"), None);
}
