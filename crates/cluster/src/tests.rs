//! The derivation and the member's session, driven through the in-memory store.

use crate::derive::{FIRST_LABEL, Local, derive};
use crate::keys::status_key;
use crate::mem::Mem;
use crate::member::{Member, Settings, SharedStatus, Sink};
use crate::model::Labels;
use crate::store::{Kv, Snapshot, Store};
use crate::view::View;
use ovr_config::model::{Config, InterfaceKindConfig, MemifRoleConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BASE: &str = r#"
interfaces:
  - { name: uplink, kind: underlay, mac: "02:00:00:00:00:01", addresses: [192.0.2.1/24] }
"#;

fn base() -> Config {
    Config::from_yaml(BASE).unwrap()
}

fn network(vni: u32, encap: &str) -> String {
    format!(
        r#"{{"vni": {vni}, "subnets": ["10.1.0.0/24"], "gateways": ["10.1.0.1/24"], "encap": "{encap}"}}"#
    )
}

fn port(net: &str, mac: &str, ip: &str, ifname: &str) -> String {
    format!(r#"{{"network": "{net}", "mac": "{mac}", "ips": ["{ip}"], "interface": "{ifname}"}}"#)
}

fn host(n: u8, labels: &str) -> String {
    format!(
        r#"{{"vtep": "192.0.2.{n}", "mac": "02:00:00:00:00:0{n}", "underlay": ["192.0.2.{n}/24"], "labels": {labels}, "version": "t"}}"#
    )
}

fn endpoint(net: &str, mac: &str, ip: &str) -> String {
    format!(r#"{{"network": "{net}", "mac": "{mac}", "ips": ["{ip}"]}}"#)
}

/// A view of these keys and values, created in this order (revision = position + 1).
fn view(kvs: &[(&str, String)]) -> View {
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

fn derive_for(h: &str, v: &View) -> crate::derive::Derived {
    derive_with(h, v, true)
}

fn derive_with(h: &str, v: &View, endpoints: bool) -> crate::derive::Derived {
    let b = base();
    let labels = BTreeMap::new();
    derive(
        v,
        &Local {
            host: h,
            base: &b,
            labels: &labels,
            endpoints,
        },
    )
}

fn two_hosts(encap: &str) -> Vec<(&'static str, String)> {
    let labels = if encap == "vxlan" {
        "{}".to_string()
    } else {
        r#"{"red": {"l2": 2000, "l3": 2001}}"#.to_string()
    };
    vec![
        ("networks/red", network(100, encap)),
        ("networks/blue", network(200, "vxlan")),
        (
            "ports/h1/a",
            port("red", "02:00:00:00:01:0a", "10.1.0.10", "veth-a"),
        ),
        (
            "ports/h2/b",
            port("red", "02:00:00:00:01:0b", "10.1.0.11", "veth-b"),
        ),
        (
            "ports/h2/z",
            port("blue", "02:00:00:00:02:0b", "10.1.0.11", "veth-z"),
        ),
        ("hosts/h2", host(2, &labels)),
        (
            "endpoints/h2/b",
            endpoint("red", "02:00:00:00:01:0b", "10.1.0.11"),
        ),
        (
            "endpoints/h2/z",
            endpoint("blue", "02:00:00:00:02:0b", "10.1.0.11"),
        ),
        (
            "endpoints/h3/c",
            endpoint("red", "02:00:00:00:01:0c", "10.1.0.12"),
        ),
    ]
}

#[test]
fn a_host_gets_its_ports_and_the_peers_of_its_networks_only() {
    let d = derive_for("h1", &view(&two_hosts("vxlan")));
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let c = &d.config;
    let names = |v: Vec<&str>| v.into_iter().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        names(c.interfaces.iter().map(|i| i.name.as_str()).collect()),
        ["uplink", "veth-a"]
    );
    let a = &c.interfaces[1];
    assert_eq!(
        (a.network.as_deref(), a.peer_mac.unwrap().to_string()),
        (Some("red"), "02:00:00:00:01:0a".into())
    );
    // blue has no port here: not installed, nor its endpoints; h3 has no host record
    // (dead): its endpoint is left out.
    assert_eq!(
        names(c.networks.iter().map(|n| n.name.as_str()).collect()),
        ["red"]
    );
    assert_eq!(c.networks[0].flood, ["h2:red"]);
    assert_eq!(c.tunnels.len(), 1);
    assert_eq!(
        (c.tunnels[0].name.as_str(), c.tunnels[0].remote.to_string()),
        ("to-h2", "192.0.2.2".into())
    );
    assert_eq!(c.tunnels[0].remote_mac.to_string(), "02:00:00:00:00:02");
    assert_eq!(c.nexthops.len(), 1);
    assert_eq!(
        (c.nexthops[0].name.as_str(), c.nexthops[0].vni),
        ("h2:red", Some(100))
    );
    assert_eq!(c.bridge.len(), 1);
    assert_eq!(c.bridge[0].mac.to_string(), "02:00:00:00:01:0b");
    assert_eq!(c.routes.len(), 1);
    assert_eq!(c.routes[0].prefix.to_string(), "10.1.0.11/32");
    // The tables take it.
    c.translate().expect("the derived configuration translates");
    assert_eq!(d.local_ports.keys().collect::<Vec<_>>(), ["a"]);
}

#[test]
fn without_endpoints_a_host_has_its_intent_and_no_remote_reachability() {
    // `--reach evpn`: what the other hosts are comes from BGP; etcd gives intent only.
    let d = derive_with("h1", &view(&two_hosts("vxlan")), false);
    let c = &d.config;
    assert_eq!(c.interfaces.len(), 2);
    assert_eq!(c.networks.len(), 1);
    assert!(c.networks[0].flood.is_empty());
    assert!(c.tunnels.is_empty() && c.nexthops.is_empty());
    assert!(c.bridge.is_empty() && c.routes.is_empty());
}

#[test]
fn a_networks_flow_quota_reaches_the_hosts_configuration() {
    let mut kvs = two_hosts("vxlan");
    kvs[0].1 = r#"{"vni": 100, "quotas": {"flows": 5000}}"#.into();
    assert!(kvs[0].0.starts_with("networks/red"), "{}", kvs[0].0);
    let d = derive_for("h1", &view(&kvs));
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    assert_eq!(d.config.networks[0].flow_quota, Some(5000));
    d.config
        .translate()
        .expect("the derived configuration translates");
    // No quota of its own: the host's default applies.
    let d = derive_for("h1", &view(&two_hosts("vxlan")));
    assert_eq!(d.config.networks[0].flow_quota, None);
    // A quota of 0 is refused for the network's key, naming the field.
    kvs[0].1 = r#"{"vni": 100, "quotas": {"flows": 0}}"#.into();
    let v = view(&kvs);
    let refused: BTreeMap<String, &str> = v.refused().collect();
    let why = refused["/ovr/v1/networks/red"];
    assert!(why.starts_with("quotas.flows: 0"), "{why}");
}

#[test]
fn a_networks_route_targets_reach_the_hosts_configuration() {
    let mut kvs = two_hosts("vxlan");
    kvs[0].1 = r#"{"vni": 100, "route_targets": {"import": ["65000:4242", "auto"]}}"#.into();
    let d = derive_for("h1", &view(&kvs));
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let rt = d.config.networks[0].route_targets.as_ref().unwrap();
    assert_eq!(
        (rt.import.len(), rt.export.clone()),
        (2, vec![ovr_config::model::RouteTarget::Auto])
    );
    d.config
        .translate()
        .expect("the derived configuration translates");
    // Refused for the network's key at the field, as a host's configuration would be.
    kvs[0].1 = r#"{"vni": 100, "route_targets": {"export": []}}"#.into();
    let v = view(&kvs);
    let refused: BTreeMap<String, &str> = v.refused().collect();
    let why = refused["/ovr/v1/networks/red"];
    assert!(
        why.starts_with("route_targets.export: at least one"),
        "{why}"
    );
}

#[test]
fn mpls_networks_use_the_labels_each_host_allocated() {
    let d = derive_for("h1", &view(&two_hosts("mpls_udp")));
    let c = &d.config;
    let nh: BTreeMap<&str, Option<u32>> = c
        .nexthops
        .iter()
        .map(|n| (n.name.as_str(), n.label))
        .collect();
    assert_eq!(nh["h2:red"], Some(2000));
    assert_eq!(nh["h2:red:ip"], Some(2001));
    assert_eq!(c.bridge[0].nexthop, "h2:red");
    assert_eq!(c.routes[0].nexthop, "h2:red:ip");
    // This host's own labels: the first pair, to its network's two lookups.
    assert_eq!(
        d.labels["red"],
        Labels {
            l2: FIRST_LABEL,
            l3: FIRST_LABEL + 1
        }
    );
    let labels: Vec<(u32, &str)> = c
        .labels
        .iter()
        .map(|l| (l.label, l.nexthop.as_str()))
        .collect();
    assert_eq!(
        labels,
        [
            (FIRST_LABEL, "local:red:l2"),
            (FIRST_LABEL + 1, "local:red:l3")
        ]
    );
    c.translate().expect("the derived configuration translates");
    // A host without labels for the network is reported, not half-installed.
    let mut kvs = two_hosts("mpls_udp");
    kvs[5].1 = host(2, "{}");
    let d = derive_for("h1", &view(&kvs));
    assert!(d.config.tunnels.is_empty() && d.config.bridge.is_empty());
    assert_eq!(
        d.rejected["/ovr/v1/hosts/h2"],
        "no MPLS labels for network 'red'"
    );
}

#[test]
fn conflicting_intent_is_refused_for_the_later_key_alone() {
    let mut kvs = two_hosts("vxlan");
    kvs.extend([
        // The same MAC as h1/a in red, on another host: the later one loses.
        (
            "ports/h2/dup-mac",
            port("red", "02:00:00:00:01:0a", "10.1.0.20", "veth-d"),
        ),
        // The same address as h2/b in red.
        (
            "ports/h1/dup-ip",
            port("red", "02:00:00:00:01:0e", "10.1.0.11", "veth-e"),
        ),
        (
            "ports/h1/nowhere",
            port("green", "02:00:00:00:01:0f", "10.1.0.30", "veth-f"),
        ),
        (
            "ports/h1/gw",
            port("red", "02:00:00:00:01:10", "10.1.0.1", "veth-g"),
        ),
        (
            "ports/h1/outside",
            port("red", "02:00:00:00:01:11", "10.9.0.1", "veth-h"),
        ),
        (
            "ports/h1/same-if",
            port("red", "02:00:00:00:01:12", "10.1.0.40", "veth-a"),
        ),
        ("networks/red-again", network(100, "vxlan")),
        (
            "ports/h1/bad",
            r#"{"network": "red", "mac": "ff:ff:ff:ff:ff:ff", "interface": "x"}"#.into(),
        ),
    ]);
    let v = view(&kvs);
    let d = derive_for("h1", &v);
    let why = |k: &str| {
        d.rejected
            .get(&format!("/ovr/v1/{k}"))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        why("ports/h2/dup-mac").contains("mac 02:00:00:00:01:0a is already"),
        "{d:?}"
    );
    assert!(why("ports/h1/dup-ip").contains("10.1.0.11 is already"));
    assert!(why("ports/h1/nowhere").contains("network 'green' does not exist"));
    assert!(why("ports/h1/gw").contains("gateway"));
    assert!(why("ports/h1/outside").contains("none of the network's subnets"));
    assert!(why("ports/h1/same-if").contains("interface veth-a is already"));
    assert!(why("networks/red-again").contains("vni 100 is already network 'red'"));
    // Refused on its own value: in the view's refusals, not the derivation's.
    assert!(
        v.refused()
            .any(|(k, r)| k.ends_with("ports/h1/bad") && r.contains("unicast"))
    );
    // Everything else stands.
    assert_eq!(d.local_ports.keys().collect::<Vec<_>>(), ["a"]);
    d.config.translate().expect("the rest translates");
}

#[test]
fn a_memif_port_is_a_memif_interface_of_its_host_one_per_id_on_a_socket() {
    let memif = |mac: &str, ip: &str, ifname: &str, m: &str| {
        format!(
            r#"{{"network": "red", "mac": "{mac}", "ips": ["{ip}"], "interface": "{ifname}", "memif": {m}}}"#
        )
    };
    let mut kvs = two_hosts("vxlan");
    kvs.extend([
        (
            "ports/h1/nf-l",
            memif(
                "02:00:00:00:01:20",
                "10.1.0.20",
                "nf-l",
                r#"{"socket": "/run/ovr/nf.sock"}"#,
            ),
        ),
        (
            "ports/h1/nf-r",
            memif(
                "02:00:00:00:01:21",
                "10.1.0.21",
                "nf-r",
                r#"{"socket": "/run/ovr/nf.sock", "id": 1, "role": "client", "ring_size": 12}"#,
            ),
        ),
        // The same socket and id on h1: the later port loses; on h2 it is another socket.
        (
            "ports/h1/nf-dup",
            memif(
                "02:00:00:00:01:22",
                "10.1.0.22",
                "nf-dup",
                r#"{"socket": "/run/ovr/nf.sock"}"#,
            ),
        ),
        (
            "ports/h2/nf",
            memif(
                "02:00:00:00:01:23",
                "10.1.0.23",
                "nf",
                r#"{"socket": "/run/ovr/nf.sock"}"#,
            ),
        ),
        // Refused on its own value, as the host's configuration would refuse it.
        (
            "ports/h1/nf-rel",
            memif(
                "02:00:00:00:01:24",
                "10.1.0.24",
                "nf-rel",
                r#"{"socket": "nf.sock"}"#,
            ),
        ),
        (
            "ports/h1/nf-ring",
            memif(
                "02:00:00:00:01:25",
                "10.1.0.25",
                "nf-ring",
                r#"{"socket": "/run/ovr/x.sock", "ring_size": 15}"#,
            ),
        ),
    ]);
    let v = view(&kvs);
    let refused: BTreeMap<String, String> = v
        .refused()
        .map(|(k, r)| (k.to_string(), r.to_string()))
        .collect();
    assert!(
        refused["/ovr/v1/ports/h1/nf-rel"].contains("memif.socket"),
        "{refused:?}"
    );
    assert!(
        refused["/ovr/v1/ports/h1/nf-ring"].contains("memif.ring_size"),
        "{refused:?}"
    );
    assert!(
        !refused["/ovr/v1/ports/h1/nf-ring"].contains("interfaces[0]"),
        "{refused:?}"
    );
    let d = derive_for("h1", &v);
    assert_eq!(
        d.rejected
            .get("/ovr/v1/ports/h1/nf-dup")
            .map(String::as_str),
        Some("memif id 0 on socket /run/ovr/nf.sock is already a port's on host h1"),
        "{:?}",
        d.rejected
    );
    assert_eq!(d.rejected.len(), 1, "{:?}", d.rejected);
    let c = &d.config;
    let nf = |name: &str| c.interfaces.iter().find(|i| i.name == name).unwrap();
    let (l, r) = (nf("nf-l"), nf("nf-r"));
    assert_eq!(l.kind, InterfaceKindConfig::Memif);
    assert_eq!(l.network.as_deref(), Some("red"));
    assert_eq!(
        l.peer_mac.map(|m| m.to_string()).as_deref(),
        Some("02:00:00:00:01:20")
    );
    let (lm, rm) = (l.memif.as_ref().unwrap(), r.memif.as_ref().unwrap());
    assert_eq!(
        (lm.socket.as_str(), lm.id, lm.role),
        ("/run/ovr/nf.sock", 0, MemifRoleConfig::Server)
    );
    assert_eq!(
        (rm.id, rm.role, rm.ring_size),
        (1, MemifRoleConfig::Client, 12)
    );
    // A kernel port stays a workload interface without memif.
    assert_eq!(nf("veth-a").kind, InterfaceKindConfig::Workload);
    assert!(nf("veth-a").memif.is_none());
    c.translate().expect("the host's configuration translates");
    // h2's memif port uses the same path on its own host; every host refuses the same.
    let d2 = derive_for("h2", &v);
    assert_eq!(d2.rejected, d.rejected);
    assert_eq!(
        d2.config
            .interfaces
            .iter()
            .filter(|i| i.memif.is_some())
            .count(),
        1
    );
}

#[test]
fn a_moved_mac_follows_the_newest_endpoint() {
    let mut kvs = two_hosts("vxlan");
    kvs.extend([
        ("hosts/h3", host(3, "{}")),
        (
            "endpoints/h3/b",
            endpoint("red", "02:00:00:00:01:0b", "10.1.0.11"),
        ),
    ]);
    let d = derive_for("h1", &view(&kvs));
    // h3 is alive now: its own endpoint c, and b, which moved there after h2 had it.
    let bridge: Vec<(String, &str)> = d
        .config
        .bridge
        .iter()
        .map(|b| (b.mac.to_string(), b.nexthop.as_str()))
        .collect();
    assert_eq!(
        bridge,
        [
            ("02:00:00:00:01:0b".to_string(), "h3:red"),
            ("02:00:00:00:01:0c".to_string(), "h3:red")
        ]
    );
    let routes: Vec<&str> = d.config.routes.iter().map(|r| r.nexthop.as_str()).collect();
    assert_eq!(routes, ["h3:red", "h3:red"]);
    d.config.translate().unwrap();
}

#[test]
fn policies_apply_to_their_network_and_leave_out_rules_about_networks_not_here() {
    let mut kvs = two_hosts("vxlan");
    kvs.extend([
        (
            "policies/a-web",
            r#"{"network": "red", "rules": [{"action": "deny", "protocol": "tcp", "dst_ports": "23"}]}"#
                .to_string(),
        ),
        (
            "policies/b-cross",
            r#"{"network": "red", "rules": [
                {"action": "allow", "src_network": "red", "dst_network": "blue"},
                {"action": "allow", "src_network": "red", "dst_network": "red", "protocol": "udp"}]}"#
                .to_string(),
        ),
        (
            "policies/c-blue",
            r#"{"network": "blue", "rules": [{"action": "deny"}]}"#.to_string(),
        ),
    ]);
    let d = derive_for("h1", &view(&kvs));
    let red = &d.config.networks[0];
    let rules = red.policy.as_ref().expect("red has a policy");
    // Key order; the rule about blue (not on this host) is left out; blue's own policy
    // is not installed (no blue here).
    assert_eq!(rules.len(), 2, "{rules:?}");
    assert_eq!(rules[0].dst_ports.unwrap().to_string(), "23");
    assert_eq!(rules[1].dst_network.as_deref(), Some("red"));
    d.config.translate().expect("translates");
}

#[test]
fn a_policy_the_tables_would_refuse_is_refused_for_its_key() {
    let v = view(&[
        (
            "policies/bad",
            r#"{"network": "red", "rules": [{"action": "deny", "dst_ports": "23"}]}"#.into(),
        ),
        (
            "policies/good",
            r#"{"network": "red", "rules": [{"action": "deny", "protocol": "tcp", "dst_ports": "23"}]}"#.into(),
        ),
        ("networks/red", network(100, "vxlan")),
    ]);
    let refused: BTreeMap<String, &str> = v.refused().collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let why = refused["/ovr/v1/policies/bad"];
    assert!(why.contains("port ranges need protocol tcp"), "{why}");
}

// The member, against the in-memory store.

#[derive(Clone, Default)]
struct Recorder {
    installs: Arc<Mutex<Vec<Config>>>,
    up: Arc<Mutex<BTreeSet<String>>>,
}

impl Sink for Recorder {
    fn install(&mut self, config: Config) -> Result<usize, String> {
        let ops = config.translate().map_err(|e| e.to_string())?.ops.len();
        self.installs.lock().unwrap().push(config);
        Ok(ops)
    }

    fn interface_up(&self, name: &str) -> bool {
        self.up.lock().unwrap().contains(name)
    }
}

impl Recorder {
    fn count(&self) -> usize {
        self.installs.lock().unwrap().len()
    }

    fn last(&self) -> Config {
        self.installs
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    }
}

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not within 5 s: {what}");
}

async fn put(m: &Mem, k: &str, v: &str) {
    m.put(&format!("/ovr/v1/{k}"), v.as_bytes().to_vec(), 0)
        .await
        .unwrap();
}

fn start(m: &Mem, h: &str) -> (Recorder, SharedStatus, tokio::task::JoinHandle<()>) {
    let r = Recorder::default();
    let base = Config::from_yaml(
        &BASE
            .replace("0:01", &format!("0:0{}", &h[1..]))
            .replace("192.0.2.1/", &format!("192.0.2.{}/", &h[1..])),
    )
    .unwrap();
    let member = Member::new(
        m.clone(),
        r.clone(),
        Settings {
            host: h.into(),
            base,
            ttl_s: 3,
            version: "t".into(),
            endpoints: true,
        },
    );
    let status = member.status();
    (r, status, tokio::spawn(member.run()))
}

#[tokio::test]
async fn members_publish_their_ports_and_learn_each_other() {
    let m = Mem::default();
    put(&m, "networks/red", &network(100, "vxlan")).await;
    put(
        &m,
        "ports/h1/a",
        &port("red", "02:00:00:00:01:0a", "10.1.0.10", "veth-a"),
    )
    .await;
    put(
        &m,
        "ports/h2/b",
        &port("red", "02:00:00:00:01:0b", "10.1.0.11", "veth-b"),
    )
    .await;
    let (r1, s1, t1) = start(&m, "h1");
    let (r2, _s2, t2) = start(&m, "h2");
    // Hosts are published under a lease; ports become endpoints once their interface is.
    until("hosts published", || {
        m.get("/ovr/v1/hosts/h1").is_some() && m.get("/ovr/v1/hosts/h2").is_some()
    })
    .await;
    assert_ne!(m.get("/ovr/v1/hosts/h1").unwrap().lease, 0);
    assert!(m.get("/ovr/v1/endpoints/h1/a").is_none());
    r1.up.lock().unwrap().insert("veth-a".into());
    r2.up.lock().unwrap().insert("veth-b".into());
    until("h1 learns h2's endpoint", || r1.last().bridge.len() == 1).await;
    until("h2 learns h1's endpoint", || r2.last().bridge.len() == 1).await;
    assert_eq!(r1.last().bridge[0].nexthop, "h2:red");
    until("h1 reports", || m.get(&status_key("h1")).is_some()).await;

    // A compaction ends the watch: the member lists again and installs nothing new,
    // since nothing changed (no flush, nothing applied twice).
    let installs = r1.count();
    let sessions = s1.lock().unwrap().sessions;
    m.compact(m.revision());
    put(&m, "networks/blue", &network(200, "vxlan")).await;
    m.compact(m.revision());
    until("h1 lists again", || s1.lock().unwrap().sessions > sessions).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        r1.count(),
        installs,
        "a relist of an unchanged view installs nothing"
    );

    // etcd away: forwarding keeps the last state; changes made meanwhile arrive after.
    m.set_down(true);
    until("h1 sees etcd gone", || !s1.lock().unwrap().connected).await;
    m.set_down(false);
    put(
        &m,
        "ports/h2/c",
        &port("red", "02:00:00:00:01:0c", "10.1.0.12", "veth-c"),
    )
    .await;
    r2.up.lock().unwrap().insert("veth-c".into());
    until("h1 learns h2's new port after the outage", || {
        r1.last().bridge.len() == 2
    })
    .await;

    // A port of h1's in blue, a network it did not have: it lists again and learns
    // h2's blue endpoint (which its view had left out until then).
    put(&m, "networks/blue", &network(200, "vxlan")).await;
    put(
        &m,
        "ports/h2/z",
        &port("blue", "02:00:00:00:02:0b", "10.1.0.11", "veth-z"),
    )
    .await;
    r2.up.lock().unwrap().insert("veth-z".into());
    until("h2 publishes z", || {
        m.get("/ovr/v1/endpoints/h2/z").is_some()
    })
    .await;
    let lists = s1.lock().unwrap().sessions;
    put(
        &m,
        "ports/h1/y",
        &port("blue", "02:00:00:00:02:0a", "10.1.0.10", "veth-y"),
    )
    .await;
    until("h1 learns z", || {
        r1.last()
            .bridge
            .iter()
            .any(|b| b.network == "blue" && b.nexthop == "h2:blue")
    })
    .await;
    assert_eq!(s1.lock().unwrap().sessions, lists + 1);

    // h2 dies: its lease expires, its host and endpoints go, h1 withdraws it.
    t2.abort();
    let lease = m.get("/ovr/v1/hosts/h2").unwrap().lease;
    m.expire(lease);
    until("h1 withdraws h2", || {
        r1.last().bridge.is_empty() && r1.last().tunnels.is_empty()
    })
    .await;
    assert!(m.get("/ovr/v1/endpoints/h2/b").is_none());

    // A bad key is reported, the rest applied.
    put(&m, "ports/h1/bad", r#"{"network": "red"}"#).await;
    put(
        &m,
        "ports/h1/d",
        &port("red", "02:00:00:00:01:0d", "10.1.0.13", "veth-d"),
    )
    .await;
    until("h1 installs d", || {
        r1.last().interfaces.iter().any(|i| i.name == "veth-d")
    })
    .await;
    assert!(
        s1.lock()
            .unwrap()
            .rejected
            .contains_key("/ovr/v1/ports/h1/bad")
    );

    // h1's lease lost (a long outage): it publishes again under a new one.
    let old = m.get("/ovr/v1/hosts/h1").unwrap().lease;
    m.expire(old);
    until("h1 back under a new lease", || {
        m.get("/ovr/v1/hosts/h1").is_some_and(|k| k.lease != old)
    })
    .await;
    until("and its endpoint", || {
        m.get("/ovr/v1/endpoints/h1/a").is_some()
    })
    .await;
    t1.abort();
}

/// A port that goes down (its interface let go) is withdrawn within a few of the
/// member's looks at the ports published as up, not at the next full recheck (1 s):
/// the other hosts move a service instance's sessions sooner.
#[tokio::test]
async fn a_port_that_goes_down_is_withdrawn_at_once() {
    let m = Mem::default();
    put(&m, "networks/red", &network(100, "vxlan")).await;
    put(
        &m,
        "ports/h1/a",
        &port("red", "02:00:00:00:01:0a", "10.1.0.10", "veth-a"),
    )
    .await;
    let (r1, _s1, t1) = start(&m, "h1");
    for round in 0..3 {
        r1.up.lock().unwrap().insert("veth-a".into());
        until("a published", || m.get("/ovr/v1/endpoints/h1/a").is_some()).await;
        // At some point of the recheck's period.
        tokio::time::sleep(Duration::from_millis(100 + 250 * round)).await;
        r1.up.lock().unwrap().remove("veth-a");
        let gone = tokio::time::Instant::now();
        until("a withdrawn", || m.get("/ovr/v1/endpoints/h1/a").is_none()).await;
        let took = gone.elapsed();
        assert!(took < Duration::from_millis(300), "round {round}: {took:?}");
    }
    t1.abort();
}
