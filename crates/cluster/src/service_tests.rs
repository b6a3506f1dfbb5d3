//! Service chains derived from the cluster's intent: instances here and on other hosts,
//! the routes between a chain's networks, and what fails closed.

use crate::derive::{Local, derive};
use crate::model::{Value, parse};
use crate::store::{Kv, Snapshot};
use crate::view::View;
use ovr_config::model::{ActionConfig, Config};
use std::collections::BTreeMap;

const BASE: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
"#;

fn net(vni: u32, subnets: &str, gateways: &str) -> String {
    format!(r#"{{"vni": {vni}, "subnets": [{subnets}], "gateways": [{gateways}]}}"#)
}

fn port(net: &str, mac: &str, ip: &str, ifname: &str) -> String {
    format!(r#"{{"network": "{net}", "mac": "{mac}", "ips": ["{ip}"], "interface": "{ifname}"}}"#)
}

fn endpoint(net: &str, mac: &str, ip: &str) -> String {
    format!(r#"{{"network": "{net}", "mac": "{mac}", "ips": ["{ip}"]}}"#)
}

fn host(n: u8) -> String {
    format!(
        r#"{{"vtep": "192.0.2.{n}", "mac": "02:00:00:00:00:0{n}", "underlay": ["192.0.2.{n}/24"], "version": "t"}}"#
    )
}

/// The lab's chain: t1 → ext through fw, one instance on each host.
fn intent() -> Vec<(String, String)> {
    let mut kvs: Vec<(String, String)> = vec![
        ("networks/t1".into(), net(101, r#""10.1.0.0/24""#, r#""10.1.0.1/24""#)),
        ("networks/ext".into(), net(199, r#""10.99.0.0/24""#, r#""10.99.0.1/24""#)),
        (
            "networks/svc".into(),
            net(
                198,
                r#""10.98.1.0/24", "10.98.2.0/24""#,
                r#""10.98.1.1/24", "10.98.2.1/24""#,
            ),
        ),
        ("hosts/h2".into(), host(2)),
        (
            "services/fw".into(),
            r#"{"instances": [
                {"name": "fw-h1", "host": "h1", "left": "fw-l", "right": "fw-r"},
                {"name": "fw-h2", "host": "h2", "left": "fw-l", "right": "fw-r"}]}"#
                .into(),
        ),
        ("chains/through-fw".into(), r#"{"functions": ["fw"]}"#.into()),
        (
            "policies/t1-to-ext".into(),
            r#"{"network": "t1", "rules": [{"action": "chain", "chain": "through-fw", "dst_network": "ext"}]}"#.into(),
        ),
    ];
    for (h, n) in [("h1", 1), ("h2", 2)] {
        let ports = [
            (
                "a",
                "t1",
                format!("02:00:00:01:00:0{n}"),
                format!("10.1.0.1{n}"),
                "t1w1",
            ),
            (
                "x",
                "ext",
                format!("02:00:00:99:00:0{n}"),
                format!("10.99.0.1{n}"),
                "extw1",
            ),
            (
                "fw-l",
                "svc",
                format!("02:00:00:f0:01:0{n}"),
                format!("10.98.1.1{n}"),
                "fwl",
            ),
            (
                "fw-r",
                "svc",
                format!("02:00:00:f0:02:0{n}"),
                format!("10.98.2.1{n}"),
                "fwr",
            ),
        ];
        for (name, network, mac, ip, ifname) in ports {
            kvs.push((
                format!("ports/{h}/{name}"),
                port(network, &mac, &ip, ifname),
            ));
            if h == "h2" {
                kvs.push((
                    format!("endpoints/{h}/{name}"),
                    endpoint(network, &mac, &ip),
                ));
            }
        }
    }
    kvs
}

fn view(kvs: &[(String, String)]) -> View {
    View::of(&Snapshot {
        revision: kvs.len() as i64,
        kvs: kvs
            .iter()
            .enumerate()
            .map(|(i, (k, v))| Kv {
                key: format!("/ovr/v1/{k}"),
                value: v.clone().into_bytes(),
                create_revision: i as i64 + 1,
                mod_revision: i as i64 + 1,
                lease: 0,
            })
            .collect(),
    })
}

fn derive_h1(kvs: &[(String, String)]) -> crate::derive::Derived {
    let base = Config::from_yaml(BASE).unwrap();
    let labels = BTreeMap::new();
    let v = view(kvs);
    assert_eq!(
        v.refused().count(),
        0,
        "{:?}",
        v.refused().collect::<Vec<_>>()
    );
    derive(
        &v,
        &Local {
            host: "h1",
            base: &base,
            labels: &labels,
            endpoints: true,
        },
    )
}

#[test]
fn a_chain_reaches_its_instance_on_another_host_through_the_overlay() {
    let d = derive_h1(&intent());
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let c = &d.config;
    assert_eq!(c.chains.len(), 1);
    let fw = &c.services[0];
    let here = &fw.instances[0];
    assert_eq!(
        (here.name.as_str(), here.left.interface.as_str()),
        ("fw-h1", "fwl")
    );
    let there = &fw.instances[1];
    assert_eq!(there.name, "fw-h2");
    assert_eq!(there.left.via.as_deref(), Some("h2:svc"));
    assert_eq!(there.right.mac.unwrap().to_string(), "02:00:00:f0:02:02");
    assert!(there.left.interface.is_empty());
    // t1 routes ext's endpoints (here and on h2), ext routes t1's.
    let route = |n: &str, p: &str| {
        c.routes
            .iter()
            .find(|r| r.network == n && r.prefix.to_string() == p)
            .map(|r| r.nexthop.clone())
    };
    assert_eq!(route("t1", "10.99.0.12/32").as_deref(), Some("h2:ext"));
    assert_eq!(route("t1", "10.99.0.11/32").as_deref(), Some("extw1"));
    // Both ways in ext's VNI: the reply arrives where the reverse of the pair out of
    // the instance waits for it, in ext.
    assert_eq!(route("ext", "10.1.0.12/32").as_deref(), Some("h2:ext"));
    assert_eq!(route("ext", "10.1.0.11/32").as_deref(), Some("t1w1"));
    // The whole host configuration installs.
    let t = c.translate().unwrap();
    assert!(t.names.nexthops.contains_key("fw/fw-h2/left"));
}

#[test]
fn an_instance_whose_port_is_not_up_on_its_host_is_left_out() {
    let kvs: Vec<_> = intent()
        .into_iter()
        .filter(|(k, _)| k != "endpoints/h2/fw-r")
        .collect();
    let d = derive_h1(&kvs);
    let fw = &d.config.services[0];
    assert_eq!(fw.instances.len(), 1);
    assert_eq!(fw.instances[0].name, "fw-h1");
    // Its host gone: the same.
    let kvs: Vec<_> = intent()
        .into_iter()
        .filter(|(k, _)| k != "hosts/h2")
        .collect();
    assert_eq!(derive_h1(&kvs).config.services[0].instances.len(), 1);
}

#[test]
fn a_rule_naming_a_missing_or_taken_chain_denies_and_is_reported() {
    let kvs: Vec<_> = intent()
        .into_iter()
        .filter(|(k, _)| k != "chains/through-fw")
        .collect();
    let d = derive_h1(&kvs);
    assert!(d.config.chains.is_empty() && d.config.services.is_empty());
    let t1 = d.config.networks.iter().find(|n| n.name == "t1").unwrap();
    let rule = &t1.policy.as_ref().unwrap()[0];
    assert_eq!(
        (rule.action, rule.chain.as_deref()),
        (ActionConfig::Deny, None)
    );
    let why = &d.rejected["/ovr/v1/policies/t1-to-ext"];
    assert!(why.contains("no chain 'through-fw'"), "{why}");
    d.config.translate().unwrap();

    // A second network steering into the same chain: the first by name keeps it.
    let mut kvs = intent();
    kvs.push((
        "policies/ext-back".into(),
        r#"{"network": "ext", "rules": [{"action": "chain", "chain": "through-fw", "dst_network": "t1"}]}"#.into(),
    ));
    let d = derive_h1(&kvs);
    let why = &d.rejected["/ovr/v1/policies/t1-to-ext"];
    assert!(why.contains("already used from network 'ext'"), "{why}");
    d.config.translate().unwrap();
}

#[test]
fn bad_services_chains_and_chain_rules_are_refused_at_their_field() {
    let key = |k: &str| crate::keys::Key::parse(&format!("/ovr/v1/{k}")).unwrap();
    let refused = |k: &str, v: &str| parse(&key(k), v.as_bytes()).unwrap_err();
    let inst = |host: &str, left: &str, right: &str| {
        format!(
            r#"{{"name": "i-{left}-{right}", "host": "{host}", "left": "{left}", "right": "{right}"}}"#
        )
    };
    let e = refused(
        "services/fw",
        &format!(
            r#"{{"instances": [{}, {}]}}"#,
            inst("h1", "l", "r"),
            inst("h1", "r", "x")
        ),
    );
    assert!(
        e.starts_with("instances[1].left: port h1/r is already instances[0]'s"),
        "{e}"
    );
    let e = refused(
        "services/fw",
        &format!(r#"{{"instances": [{}]}}"#, inst("h1", "l", "l")),
    );
    assert!(e.starts_with("instances[0].right:"), "{e}");
    let e = refused(
        "services/fw",
        &format!(r#"{{"instances": [{}]}}"#, inst("h/1", "l", "r")),
    );
    assert!(e.starts_with("instances[0].host:"), "{e}");
    let e = refused(
        "services/fw",
        r#"{"mode": "transparent", "probe": {"kind": "icmp"}, "instances": []}"#,
    );
    assert!(e.starts_with("probe.kind: a transparent function"), "{e}");
    let e = refused("chains/c", r#"{"functions": []}"#);
    assert!(e.starts_with("functions:"), "{e}");
    let e = refused("chains/c", r#"{"functions": ["fw", "fw"]}"#);
    assert!(e.starts_with("functions[1]:"), "{e}");
    let e = refused(
        "policies/p",
        r#"{"network": "t1", "rules": [{"action": "chain", "chain": "c"}]}"#,
    );
    assert!(e.starts_with("rules[0].dst_network:"), "{e}");
    let e = refused(
        "policies/p",
        r#"{"network": "t1", "rules": [{"action": "chain", "dst_network": "ext"}]}"#,
    );
    assert!(e.starts_with("rules[0].chain: required"), "{e}");
    let ok = parse(
        &key("policies/p"),
        br#"{"network": "t1", "rules": [{"action": "chain", "chain": "c", "dst_network": "ext"}]}"#,
    );
    assert!(matches!(ok, Ok(Value::Policy(_))), "{ok:?}");
}

#[test]
fn a_host_with_no_port_in_the_instances_network_still_reaches_an_instance_elsewhere() {
    // The only instance is on h2; h1 has no port in svc.
    let kvs: Vec<_> = intent()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("ports/h1/fw-"))
        .map(|(k, v)| match k.as_str() {
            "services/fw" => (
                k,
                r#"{"instances": [{"name": "fw-h2", "host": "h2", "left": "fw-l", "right": "fw-r"}]}"#
                    .to_string(),
            ),
            _ => (k, v),
        })
        .collect();
    let d = derive_h1(&kvs);
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let c = &d.config;
    let fw = &c.services[0];
    assert_eq!(fw.instances.len(), 1);
    assert_eq!(fw.instances[0].left.via.as_deref(), Some("h2:svc"));
    // svc is no network of this host: the next hops to h2 in it, no routes or bridge
    // entries there.
    assert!(c.networks.iter().all(|n| n.name != "svc"));
    assert!(c.routes.iter().all(|r| r.network != "svc"));
    assert!(c.bridge.iter().all(|b| b.network != "svc"));
    let t = c.translate().unwrap();
    assert!(t.names.nexthops.contains_key("fw/fw-h2/left"));
}

/// The lab's intent with `fw` probed (`probe` is the JSON of the service's field).
fn probed(probe: &str) -> Vec<(String, String)> {
    intent()
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "services/fw" => (k, v.replacen('{', &format!(r#"{{"probe": {probe}, "#), 1)),
            _ => (k, v),
        })
        .collect()
}

#[test]
fn a_probe_goes_to_every_host_which_probes_its_own_instances_only() {
    use ovr_config::model::ProbeKindConfig;
    use ovr_tables::chain::{ProbeKind, ProbeTarget};
    let d = derive_h1(&probed(
        r#"{"kind": "icmp", "interval_ms": 50, "failures": 2}"#,
    ));
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let fw = &d.config.services[0];
    assert_eq!(
        (fw.probe.kind, fw.probe.interval_ms, fw.probe.failures),
        (ProbeKindConfig::Icmp, 50, 2)
    );
    let ip = |s: &str| s.parse::<core::net::Ipv4Addr>().unwrap();
    assert_eq!(fw.instances[0].left.address, Some(ip("10.98.1.11").into()));
    // The whole host configuration installs; h1 probes its own instance, from svc's
    // gateway in each side's subnet, and not the one on h2 (its host's word counts).
    let t = d.config.translate().unwrap();
    let (mut w, r) = ovr_tables::state::new_tables();
    t.apply(&mut w).unwrap();
    let st = r.enter().unwrap();
    let f = &st.chains().by_name("through-fw").unwrap().functions[0];
    assert_eq!(
        (f.probe.kind, f.probe.interval_ms, f.probe.failures),
        (ProbeKind::Icmp, 50, 2)
    );
    assert_eq!(
        f.instances[0].left_probe,
        Some(ProbeTarget {
            from: ip("10.98.1.1"),
            to: ip("10.98.1.11")
        })
    );
    assert_eq!(f.instances[0].right_probe.unwrap().from, ip("10.98.2.1"));
    assert!(f.instances[1].left_probe.is_none() && f.instances[1].right_probe.is_none());

    // Without a probe: links only, and the default is not written into the intent.
    let d = derive_h1(&intent());
    assert_eq!(d.config.services[0].probe.kind, ProbeKindConfig::Link);
    let key = crate::keys::Key::parse("/ovr/v1/services/fw").unwrap();
    let (_, fw) = intent()
        .into_iter()
        .find(|(k, _)| k == "services/fw")
        .unwrap();
    let Ok(Value::Service(s)) = parse(&key, fw.as_bytes()) else {
        panic!("services/fw");
    };
    assert!(!serde_json::to_string(&s).unwrap().contains("probe"));
}

#[test]
fn a_bad_probe_is_refused_at_its_field_and_an_instance_it_cannot_probe_is_left_out() {
    let key = crate::keys::Key::parse("/ovr/v1/services/fw").unwrap();
    let refused = |probe: &str| {
        let v = format!(r#"{{"probe": {probe}, "instances": []}}"#);
        parse(&key, v.as_bytes()).unwrap_err()
    };
    let e = refused(r#"{"kind": "icmp", "interval_ms": 5}"#);
    assert_eq!(e, "probe.interval_ms: 5 is out of range: 10 to 60000 ms");
    let e = refused(r#"{"kind": "arp", "failures": 0}"#);
    assert!(e.starts_with("probe.failures: 0 is out of range"), "{e}");
    let e = refused(r#"{"kind": "ping"}"#);
    assert!(e.contains("unknown variant `ping`"), "{e}");
    let e = refused(r#"{"kind": "icmp", "timeout_ms": 10}"#);
    assert!(e.contains("unknown field `timeout_ms`"), "{e}");

    // h2's left port has no IPv4 address: that instance cannot be probed, and is left
    // out (the same on every host), reported for the service; h1's stays.
    let kvs: Vec<_> = probed(r#"{"kind": "arp"}"#)
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "ports/h2/fw-l" => (k, port("svc", "02:00:00:f0:01:02", "fd00::12", "fwl")),
            "networks/svc" => (
                k,
                net(
                    198,
                    r#""10.98.1.0/24", "10.98.2.0/24", "fd00::/64""#,
                    r#""10.98.1.1/24", "10.98.2.1/24""#,
                ),
            ),
            _ => (k, v),
        })
        .collect();
    let d = derive_h1(&kvs);
    let fw = &d.config.services[0];
    assert_eq!(fw.instances.len(), 1);
    assert_eq!(fw.instances[0].name, "fw-h1");
    let why = &d.rejected["/ovr/v1/services/fw"];
    assert_eq!(
        why,
        "instances[1].left: port h2/fw-l: no IPv4 address to send the arp probe to (probes are IPv4 only)"
    );
    d.config.translate().unwrap();

    // No gateway of svc in the subnet of h1's right side: refused on h1 too, where the
    // host's configuration would otherwise not install.
    let kvs: Vec<_> = probed(r#"{"kind": "icmp"}"#)
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "networks/svc" => (
                k,
                net(
                    198,
                    r#""10.98.1.0/24", "10.98.2.0/24""#,
                    r#""10.98.1.1/24""#,
                ),
            ),
            _ => (k, v),
        })
        .collect();
    let d = derive_h1(&kvs);
    assert!(d.config.services[0].instances.is_empty());
    let why = &d.rejected["/ovr/v1/services/fw"];
    assert!(
        why.ends_with(
            ".right: port h2/fw-r: network 'svc' has no gateway address in the subnet of 10.98.2.12 to send the icmp probe from"
        ),
        "{why}"
    );
    d.config.translate().unwrap();
}

#[test]
fn a_transparent_function_is_used_by_its_own_host_only_from_its_ports_macs() {
    let mut kvs = intent();
    for (k, v) in kvs.iter_mut() {
        if k == "services/fw" {
            *v = v.replace(
                "{\"instances\"",
                "{\"mode\": \"transparent\", \"instances\"",
            );
        }
    }
    let d = derive_h1(&kvs);
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let c = &d.config;
    let fw = &c.services[0];
    assert_eq!(fw.mode, ovr_config::model::ServiceModeConfig::Transparent);
    // h1's own instance only: h2's has no MAC h1 could bridge a frame to.
    assert_eq!(fw.instances.len(), 1);
    let here = &fw.instances[0];
    assert_eq!(
        (
            here.name.as_str(),
            here.left.interface.as_str(),
            here.right.interface.as_str()
        ),
        ("fw-h1", "fwl", "fwr")
    );
    assert!(here.left.mac.is_none() && here.left.via.is_none() && here.left.address.is_none());
    // Its ports send from their own MACs, with no workload behind them.
    let side = |name: &str| c.interfaces.iter().find(|i| i.name == name).unwrap();
    assert_eq!(side("fwl").mac.unwrap().to_string(), "02:00:00:f0:01:01");
    assert_eq!(side("fwr").mac.unwrap().to_string(), "02:00:00:f0:02:01");
    assert!(side("fwl").peer_mac.is_none() && side("fwl").peer_addresses.is_empty());
    // A workload port keeps its peer.
    assert!(side("t1w1").peer_mac.is_some());
    c.translate().expect("the host's configuration installs");
}
