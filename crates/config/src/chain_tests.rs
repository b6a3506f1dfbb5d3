//! Services and chains: what they translate to, and each mistake at its field.

use crate::Config;
use crate::error_tests::assert_error;
use ovr_tables::chain::{ChainId, Side};
use ovr_tables::policy::PolicyAction;
use ovr_tables::state::{TableOp, new_tables};

const GOOD: &str = "
interfaces:
  - { name: wa, network: red }
  - { name: f1l, network: svc }
  - { name: f1r, network: svc }
  - { name: f2l, network: svc }
  - { name: f2r, network: svc }
networks:
  - name: red
    policy:
      - { action: chain, chain: through-fw, dst_network: blue, protocol: tcp }
      - { action: chain, chain: through-fw, dst_network: blue }
  - { name: blue }
  - { name: svc, gateways: [10.99.1.1/24, 10.99.2.1/24] }
services:
  - name: fw
    mode: in-network
    instances:
      - name: fw-1
        left: { interface: f1l, mac: '02:00:00:00:01:01', address: 10.99.1.11 }
        right: { interface: f1r, mac: '02:00:00:00:01:02' }
      - name: fw-2
        left: { interface: f2l, mac: '02:00:00:00:02:01' }
        right: { interface: f2r, mac: '02:00:00:00:02:02' }
chains:
  - { name: through-fw, functions: [fw] }
";

#[test]
fn a_chain_translates_into_next_hops_a_chain_table_and_the_rule() {
    let t = Config::from_yaml(GOOD).unwrap().translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let n = &t.names;
    let chain = st.chains().by_name("through-fw").unwrap();
    assert_eq!(chain.id, ChainId(0));
    assert_eq!(chain.from, Some(n.networks["red"]));
    let i = &chain.functions[0].instances[1];
    assert_eq!(i.left, Some(n.interfaces["f2l"]));
    assert_eq!(i.right_nh, n.nexthops["fw/fw-2/right"]);
    let p = st.service_port(n.interfaces["f2r"]).unwrap();
    assert_eq!((p.hop, p.instance, p.side), (0, 1, Side::Right));
    assert!(st.chains().healthy(ChainId(0), 0, 0));
    let red = st.vrf(n.networks["red"]).unwrap();
    assert!(
        red.policy
            .rules()
            .iter()
            .all(|r| r.action == PolicyAction::Chain(ChainId(0)))
    );
    // The chain table comes after the next hops and before the policies naming it.
    let at = |f: &dyn Fn(&TableOp) -> bool| t.ops.iter().position(f).unwrap();
    assert!(
        at(&|o| matches!(o, TableOp::UpsertNextHop(..)))
            < at(&|o| matches!(o, TableOp::SetChains(_)))
    );
    assert!(
        at(&|o| matches!(o, TableOp::SetChains(_)))
            < at(&|o| matches!(o, TableOp::SetPolicy { .. }))
    );
    // Round trip: what is written is what is read.
    let c = Config::from_yaml(GOOD).unwrap();
    assert_eq!(
        Config::from_yaml(&serde_yaml_ng::to_string(&c).unwrap()).unwrap(),
        c
    );
}

#[test]
fn each_mistake_is_reported_at_its_field() {
    let swap = |from: &str, to: &str| {
        assert!(GOOD.contains(from), "{from}");
        GOOD.replacen(from, to, 1)
    };
    assert_error(
        &swap("functions: [fw]", "functions: [ids]"),
        "chains[0].functions[0]",
        "no service named 'ids'",
    );
    assert_error(
        &swap("functions: [fw]", "functions: [fw, fw]"),
        "chains[0].functions[1]",
        "duplicate of chains[0].functions[0]",
    );
    assert_error(
        &swap("functions: [fw]", "functions: []"),
        "chains[0].functions",
        "at least one function",
    );
    assert_error(
        &swap("interface: f2l,", "interface: nope,"),
        "services[0].instances[1].left.interface",
        "no interface named 'nope'",
    );
    assert_error(
        &swap("interface: f2l,", "interface: f1l,"),
        "services[0].instances[1].left.interface",
        "duplicate of services[0].instances[0].left",
    );
    assert_error(
        &swap("name: fw-2", "name: fw-1"),
        "services[0].instances[1].name",
        "duplicate of services[0].instances[0]",
    );
    assert_error(
        &swap(", mac: '02:00:00:00:02:02'", ""),
        "services[0].instances[1].right.mac",
        "needs its MAC",
    );
    assert_error(
        &swap("mode: in-network", "mode: transparent"),
        "services[0].instances[0].left.mac",
        "leave it out",
    );
    assert_error(
        &swap("mode: in-network", "mode: sideways"),
        "services[0].mode",
        "unknown variant",
    );
    assert_error(
        &format!("{GOOD}  - {{ name: through-fw, functions: [fw] }}\n"),
        "chains[1].name",
        "duplicate of chains[0]",
    );
    assert_error(
        &swap(
            "chain: through-fw, dst_network: blue }",
            "chain: nowhere, dst_network: blue }",
        ),
        "networks[0].policy[1].chain",
        "no chain named 'nowhere'",
    );
    assert_error(
        &swap(
            "{ action: chain, chain: through-fw, dst_network: blue }",
            "{ action: chain, dst_network: blue }",
        ),
        "networks[0].policy[1].chain",
        "required with action chain",
    );
    assert_error(
        &swap(
            "{ action: chain, chain: through-fw, dst_network: blue }",
            "{ action: allow, chain: through-fw }",
        ),
        "networks[0].policy[1].chain",
        "only with action chain",
    );
    assert_error(
        &swap(
            "  - { name: blue }",
            "  - { name: blue, policy: [{ action: chain, chain: through-fw }] }",
        ),
        "networks[1].policy[0].chain",
        "serves one source network",
    );
    assert_error(
        &swap(
            "  - { name: f2r, network: svc }",
            "  - { name: f2r, kind: underlay, mac: '02:00:00:00:00:0a' }",
        ),
        "services[0].instances[1].right.interface",
        "has no network",
    );
}

#[test]
fn the_example_translates() {
    let c = Config::from_yaml(include_str!("../examples/service-chain.yaml")).unwrap();
    let t = c.translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    assert_eq!(st.chains().chains()[0].functions[0].instances.len(), 2);
}

#[test]
fn a_transparent_function_is_sent_frames_for_the_other_sides_gateway() {
    let yaml = GOOD
        .replace("mode: in-network", "mode: transparent")
        .replace(", mac: '02:00:00:00:01:01', address: 10.99.1.11", "")
        .replace(", mac: '02:00:00:00:01:02'", "")
        .replace(", mac: '02:00:00:00:02:01'", "")
        .replace(", mac: '02:00:00:00:02:02'", "");
    // Its ports need MACs of their own.
    assert_error(
        &yaml,
        "services[0].instances[0].left.interface",
        "needs a MAC of its own",
    );
    let yaml = yaml
        .replace(
            "{ name: f1l, network: svc }",
            "{ name: f1l, network: svc, mac: '02:00:00:00:0f:01' }",
        )
        .replace(
            "{ name: f1r, network: svc }",
            "{ name: f1r, network: svc, mac: '02:00:00:00:0f:02' }",
        )
        .replace(
            "{ name: f2l, network: svc }",
            "{ name: f2l, network: svc, mac: '02:00:00:00:0f:03' }",
        )
        .replace(
            "{ name: f2r, network: svc }",
            "{ name: f2r, network: svc, mac: '02:00:00:00:0f:04' }",
        );
    let t = Config::from_yaml(&yaml).unwrap().translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let nh = st.nexthop(t.names.nexthops["fw/fw-1/left"]).unwrap();
    assert_eq!(
        *nh,
        ovr_tables::nexthop::NextHop::Interface {
            interface: t.names.interfaces["f1l"],
            dst_mac: ovr_tables::vrf::DEFAULT_ROUTER_MAC,
        }
    );
}

#[test]
fn a_next_hop_named_like_an_instance_side_is_refused() {
    let yaml = format!("{GOOD}nexthops:\n  - {{ name: fw/fw-1/left, kind: drop }}\n");
    assert_error(
        &yaml,
        "services[0].instances[0].name",
        "which a next hop already is",
    );
}

/// fw-2 on another host: reached through a VXLAN tunnel next hop to that host.
const REMOTE: &str = "
interfaces:
  - { name: uplink, kind: underlay, mac: '02:00:00:00:00:0a', addresses: [192.0.2.1/24] }
  - { name: wa, network: red }
  - { name: f1l, network: svc }
  - { name: f1r, network: svc }
networks:
  - name: red
    policy:
      - { action: chain, chain: through-fw, dst_network: blue }
  - { name: blue }
  - { name: svc, vni: 300, gateways: [10.99.1.1/24, 10.99.2.1/24] }
tunnels:
  - { name: to-b, underlay: uplink, remote: 192.0.2.2, remote_mac: '02:00:00:00:00:0b' }
nexthops:
  - { name: b-svc, kind: tunnel, tunnel: to-b, encap: vxlan, vni: 300 }
  - { name: b-mpls, kind: tunnel, tunnel: to-b, encap: mpls_udp, label: 1000 }
services:
  - name: fw
    instances:
      - name: fw-1
        left: { interface: f1l, mac: '02:00:00:00:01:01' }
        right: { interface: f1r, mac: '02:00:00:00:01:02' }
      - name: fw-2
        left: { via: b-svc, mac: '02:00:00:00:02:01' }
        right: { via: b-svc, mac: '02:00:00:00:02:02' }
chains:
  - { name: through-fw, functions: [fw] }
";

#[test]
fn an_instance_on_another_host_is_a_tunnel_to_its_mac() {
    use ovr_tables::nexthop::{Encap, NextHop};
    let t = Config::from_yaml(REMOTE).unwrap().translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let n = &t.names;
    let chain = st.chains().by_name("through-fw").unwrap();
    let i = &chain.functions[0].instances[1];
    assert_eq!((i.left, i.right), (None, None));
    match st.nexthop(n.nexthops["fw/fw-2/left"]) {
        Some(NextHop::Tunnel(t)) => {
            assert_eq!(t.encap, Encap::Vxlan { vni: 300 });
            assert_eq!(t.inner_dst.unwrap().to_string(), "02:00:00:00:02:01");
        }
        other => panic!("{other:?}"),
    }
    // Healthy while configured: both instances take sessions.
    assert!(st.chains().healthy(ChainId(0), 0, 1));
    let picks: std::collections::BTreeSet<_> = (0..256)
        .filter_map(|h| st.chains().pick(ChainId(0), 0, Side::Left, h, None))
        .collect();
    assert_eq!(picks.len(), 2);
    assert_eq!(
        st.chains()
            .nexthop(n.nexthops["fw/fw-2/right"])
            .unwrap()
            .side,
        Side::Right
    );

    let swap = |from: &str, to: &str| {
        assert!(REMOTE.contains(from), "{from}");
        REMOTE.replacen(from, to, 1)
    };
    assert_error(
        &swap("left: { via: b-svc,", "left: { via: nope,"),
        "services[0].instances[1].left.via",
        "no next hop named 'nope'",
    );
    assert_error(
        &swap("left: { via: b-svc,", "left: { via: b-mpls,"),
        "services[0].instances[1].left.via",
        "not a VXLAN tunnel next hop",
    );
    assert_error(
        &swap("left: { via: b-svc,", "left: { via: b-svc, interface: f1l,"),
        "services[0].instances[1].left.interface",
        "not both",
    );
    assert_error(
        &swap("'02:00:00:00:02:02'", "'02:00:00:00:02:01'"),
        "services[0].instances[1].right.via",
        "duplicate of services[0].instances[1].left",
    );
    assert_error(
        &swap(
            "    instances:\n",
            "    mode: transparent\n    instances:\n",
        ),
        "services[0].instances[0].left.mac",
        "leave it out",
    );
}

/// GOOD with a probe on `fw` and addresses on every side.
fn probed(probe: &str) -> String {
    GOOD.replace(
        "    mode: in-network\n",
        &format!("    mode: in-network\n    probe: {probe}\n"),
    )
    .replace(
        "right: { interface: f1r, mac: '02:00:00:00:01:02' }",
        "right: { interface: f1r, mac: '02:00:00:00:01:02', address: 10.99.2.11 }",
    )
    .replace(
        "left: { interface: f2l, mac: '02:00:00:00:02:01' }",
        "left: { interface: f2l, mac: '02:00:00:00:02:01', address: 10.99.1.12 }",
    )
    .replace(
        "right: { interface: f2r, mac: '02:00:00:00:02:02' }",
        "right: { interface: f2r, mac: '02:00:00:00:02:02', address: 10.99.2.12 }",
    )
}

#[test]
fn a_probe_translates_with_the_gateway_of_each_sides_subnet() {
    use ovr_tables::chain::{ProbeKind, ProbeTarget};
    let t = Config::from_yaml(&probed("{ kind: arp, interval_ms: 50, failures: 4 }"))
        .unwrap()
        .translate()
        .unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let f = &st.chains().by_name("through-fw").unwrap().functions[0];
    assert_eq!(
        (f.probe.kind, f.probe.interval_ms, f.probe.failures),
        (ProbeKind::Arp, 50, 4)
    );
    let ip = |s: &str| s.parse().unwrap();
    assert_eq!(
        f.instances[1].left_probe,
        Some(ProbeTarget {
            from: ip("10.99.1.1"),
            to: ip("10.99.1.12")
        })
    );
    assert_eq!(f.instances[0].right_probe.unwrap().from, ip("10.99.2.1"));
    // Without a probe (the default: links only), no side is probed.
    let t = Config::from_yaml(GOOD).unwrap().translate().unwrap();
    let (mut w, r) = new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let f = &st.chains().by_name("through-fw").unwrap().functions[0];
    assert_eq!(f.probe.kind, ProbeKind::Link);
    assert!(f.instances.iter().all(|i| i.left_probe.is_none()));
    // The default is not written back.
    let c = Config::from_yaml(GOOD).unwrap();
    assert!(!serde_yaml_ng::to_string(&c).unwrap().contains("probe"));
}

#[test]
fn a_probe_is_checked_at_its_field() {
    assert_error(
        &probed("{ kind: ping }"),
        "services[0].probe.kind",
        "unknown variant",
    );
    assert_error(
        &probed("{ kind: icmp, interval_ms: 5 }"),
        "services[0].probe.interval_ms",
        "out of range: 10 to 60000 ms",
    );
    assert_error(
        &probed("{ kind: icmp, failures: 0 }"),
        "services[0].probe.failures",
        "out of range",
    );
    assert_error(
        &GOOD.replace(
            "    mode: in-network\n",
            "    mode: in-network\n    probe: { kind: arp }\n",
        ),
        "services[0].instances[0].right.address",
        "required with probe arp or icmp",
    );
    assert_error(
        &probed("{ kind: arp }").replace("10.99.2.12", "10.98.2.12"),
        "services[0].instances[1].right.address",
        "no gateway address in the subnet of 10.98.2.12",
    );
    assert_error(
        &probed("{ kind: arp }").replace("10.99.2.12", "'fd00::12'"),
        "services[0].instances[1].right.address",
        "IPv4 addresses only",
    );
    assert_error(
        &probed("{ kind: arp }").replace("mode: in-network", "mode: transparent"),
        "services[0].probe.kind",
        "only `link` is supported",
    );
}
