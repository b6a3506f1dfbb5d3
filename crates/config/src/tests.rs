use super::*;
use ovr_tables::ids::{InterfaceId, NextHopId, VrfId};
use ovr_tables::nexthop::{Encap, NextHop};
use ovr_tables::state::new_tables;
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
}

/// The error for `yaml`, as text.
fn error(yaml: &str) -> String {
    match Config::from_yaml(yaml).and_then(|c| {
        let t = c.translate()?;
        let (mut w, _r) = new_tables();
        t.apply(&mut w)
    }) {
        Ok(()) => panic!("accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

fn assert_error(yaml: &str, path: &str, words: &str) {
    let e = error(yaml);
    assert!(
        e.starts_with(path),
        "expected the error at {path}, got: {e}"
    );
    assert!(e.contains(words), "expected '{words}' in: {e}");
}

const BASE: &str = "
interfaces:
  - { name: uplink, kind: underlay, mac: '02:00:00:00:00:0a', addresses: [192.0.2.1/24] }
networks:
  - { name: red, vni: 100 }
tunnels:
  - { name: to-b, underlay: uplink, remote: 192.0.2.2, remote_mac: '02:00:00:00:00:0b' }
";

#[test]
fn each_mistake_is_reported_at_its_field() {
    assert_error(
        "interfaces: [{ name: a, colour: red }]",
        "interfaces[0]",
        "unknown field `colour`",
    );
    assert_error(
        "interfaces: [{ name: u, kind: underlay, mac: 'zz:00' }]",
        "interfaces[0].mac",
        "not a MAC address",
    );
    assert_error(
        "interfaces: [{ name: u, kind: underlay }]",
        "interfaces[0].mac",
        "needs its MAC",
    );
    assert_error(
        &format!("{BASE}routes: [{{ network: red, prefix: 10.1.0.1/24, nexthop: x }}]"),
        "routes[0].prefix",
        "10.1.0.0/24",
    );
    assert_error(
        &format!("{BASE}routes: [{{ network: green, prefix: 10.1.0.0/24, nexthop: x }}]"),
        "routes[0].network",
        "no network named 'green'",
    );
    assert_error(
        &format!("{BASE}nexthops: [{{ name: e, kind: ecmp, members: [nope] }}]"),
        "nexthops[0].members[0]",
        "no next hop named 'nope'",
    );
    assert_error(
        &format!("{BASE}nexthops: [{{ name: t, kind: tunnel, tunnel: to-b, encap: vxlan }}]"),
        "nexthops[0]",
        "needs 'vni'",
    );
    assert_error(
        &format!("{BASE}nexthops: [{{ name: t, kind: drop, vni: 3 }}]"),
        "nexthops[0].vni",
        "does not apply",
    );
    assert_error(
        "networks: [{ name: red }, { name: red }]",
        "networks[1].name",
        "used twice",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: u, kind: underlay, mac: '02:00:00:00:00:01', network: red }]",
        "interfaces[0].network",
        "belongs to no network",
    );
    assert_error(
        "networks: [{ name: red, policy: [{ action: allow, protocol: icmp, dst_ports: 80 }] }]",
        "networks[0].policy[0]",
        "tcp (6) or udp (17)",
    );
    assert_error(
        "networks: [{ name: red, policy: [{ action: allow, protocol: tcp, dst_ports: 90-80 }] }]",
        "networks[0].policy[0]",
        "empty",
    );
    // Refused by the tables' own validation, and traced back to the document.
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: d, kind: drop }}]\nlabels: [{{ label: 3, nexthop: d }}]"
        ),
        "labels[0]",
        "reserved",
    );
    assert_error(
        "networks: [{ name: red, vni: 16777216 }]",
        "networks[0]",
        "VNI 16777216",
    );
    assert_error("flows: { capacity: 0 }", "flows.capacity", "above 0");
    assert_error("routes: 3", "routes", "invalid type");
}

#[test]
fn a_workload_peer_name_cannot_clash_with_a_next_hop() {
    let yaml = "
networks: [{ name: red }]
interfaces: [{ name: vm1, network: red, peer_mac: '02:00:00:00:01:05' }]
nexthops: [{ name: vm1, kind: drop }]
";
    assert_error(yaml, "interfaces[0].peer_mac", "already is");
}

#[test]
fn load_names_the_file() {
    let e = Config::load(std::path::Path::new("/nonexistent/ovr.yaml")).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/ovr.yaml: "), "{e}");
}
