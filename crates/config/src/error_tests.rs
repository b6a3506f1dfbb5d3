//! Each mistake is reported at its field.

use crate::Config;
use ovr_tables::state::new_tables;

/// The error for `yaml`, as text.
pub(crate) fn error(yaml: &str) -> String {
    match Config::from_yaml(yaml).and_then(|c| {
        let t = c.translate()?;
        let (mut w, _r) = new_tables();
        t.apply(&mut w)
    }) {
        Ok(()) => panic!("accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

/// That `yaml` is refused at `path`, with `words` in the message.
pub(crate) fn assert_error(yaml: &str, path: &str, words: &str) {
    let e = error(yaml);
    assert!(
        e.starts_with(&format!("{path}: ")),
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
        "interfaces[0].colour",
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
        "labels[0].label",
        "reserved",
    );
    assert_error(
        "networks: [{ name: red, vni: 16777216 }]",
        "networks[0].vni",
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
fn parse_errors_give_the_line_and_column() {
    let e = error("networks:\n  - name: red\n    vni: 100\n    router_mac: 'nope'\n");
    assert!(
        e.starts_with("networks[0].router_mac: 'nope' is not a MAC address"),
        "{e}"
    );
    assert!(e.contains("line 4 column"), "{e}");
    let e = error("networks:\n  - name: red\n    colour: blue\n");
    assert!(
        e.starts_with("networks[0].colour: unknown field `colour`"),
        "{e}"
    );
    assert!(e.contains("line 3 column"), "{e}");
    let e = error("networks: [\n");
    assert!(e.contains("line"), "{e}");
}

#[test]
fn references_and_kinds_are_checked() {
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: t, kind: tunnel, tunnel: to-b, encap: mpls_udp, label: 1000, vni: 5 }}]"
        ),
        "nexthops[0].vni",
        "does not apply to encap mpls_udp",
    );
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: t, kind: tunnel, tunnel: to-c, encap: vxlan, vni: 5 }}]"
        ),
        "nexthops[0].tunnel",
        "no tunnel named 'to-c'",
    );
    assert_error(
        &format!("{BASE}nexthops: [{{ name: d, kind: drop }}, {{ name: d, kind: receive }}]"),
        "nexthops[1].name",
        "'d' is used twice",
    );
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: d, kind: drop }}, {{ name: e, kind: ecmp, members: [d, d] }}]"
        ),
        "nexthops[1].members[1]",
        "listed twice",
    );
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: d, kind: drop }}, {{ name: e, kind: ecmp, members: [d] }}, {{ name: f, kind: ecmp, members: [e] }}]"
        ),
        "nexthops[2].members[0]",
        "do not nest",
    );
    assert_error(
        &format!(
            "{BASE}  - {{ name: x, underlay: vm, remote: 192.0.2.3, remote_mac: '02:00:00:00:00:0c' }}"
        ),
        "tunnels[1].underlay",
        "no interface named 'vm'",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red }]\ntunnels: [{ name: t, underlay: vm, remote: 192.0.2.3, remote_mac: '02:00:00:00:00:0c' }]",
        "tunnels[0].underlay",
        "'vm' is not an underlay interface",
    );
    assert_error(
        "interfaces: [{ name: u, kind: underlay, mac: '02:00:00:00:00:01', addresses: [192.0.2.1/24] }]\ntunnels: [{ name: t, underlay: u, remote: 'fd00::2', remote_mac: '02:00:00:00:00:0c' }]",
        "tunnels[0]",
        "no address of the remote's family",
    );
    assert_error(
        "networks: [{ name: red, flood: [x] }]",
        "networks[0].flood[0]",
        "no next hop named 'x'",
    );
    assert_error(
        "networks: [{ name: red, policy: [{ action: allow, dst_network: blue }] }]",
        "networks[0].policy[0].dst_network",
        "no network named 'blue'",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red }, { name: vm, network: red }]",
        "interfaces[1].name",
        "used twice",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm }]",
        "interfaces[0]",
        "a workload interface needs 'network'",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red, peer_addresses: [10.0.0.1] }]",
        "interfaces[0].peer_addresses",
        "need 'peer_mac'",
    );
    assert_error(
        "networks: [{ name: red }]\nnexthops: [{ name: v, kind: vrf, network: red }]",
        "nexthops[0]",
        "needs 'inner'",
    );
}

#[test]
fn values_are_checked_where_they_are_written() {
    assert_error(
        "networks: [{ name: red, policy: [{ action: allow, src: 10.1.0.1/16 }] }]",
        "networks[0].policy[0].src",
        "did you mean 10.1.0.0/16",
    );
    assert_error(
        "networks: [{ name: red, policy: [{ action: allow, protocol: sctp }] }]",
        "networks[0].policy[0].protocol",
        "not a protocol",
    );
    assert_error(
        "networks: [{ name: red, policy: [{ action: allow, protocol: tcp, dst_ports: 70000 }] }]",
        "networks[0].policy[0].dst_ports",
        "above 65535",
    );
    assert_error(
        "networks: [{ name: red, policy: [{ action: maybe }] }]",
        "networks[0].policy[0].action",
        "unknown variant `maybe`",
    );
    assert_error(
        "interfaces: [{ name: u, kind: underlay, mac: '02:00:00:00:00:01', addresses: [192.0.2.1/33] }]",
        "interfaces[0].addresses[0]",
        "not a prefix length (0-32)",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red, peer_mac: '02:00:00:00:00:05', peer_addresses: [10.0.0.300] }]",
        "interfaces[0].peer_addresses[0]",
        "invalid IP address",
    );
    assert_error(
        &format!("{BASE}nexthops: [{{ kind: drop }}]"),
        "nexthops[0]",
        "missing field `name`",
    );
    assert_error(
        &format!("{BASE}bridge: [{{ network: red, mac: '01:00:5e:00:00:01', nexthop: x }}]"),
        "bridge[0].nexthop",
        "no next hop named 'x'",
    );
}

#[test]
fn what_the_tables_refuse_is_traced_to_its_field() {
    assert_error(
        "networks: [{ name: red, vni: 7 }, { name: blue, vni: 7 }]",
        "networks[1].vni",
        "VNI 7 is already used",
    );
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: d, kind: drop }}]\nbridge: [{{ network: red, mac: '01:00:5e:00:00:01', nexthop: d }}]"
        ),
        "bridge[0].mac",
        "group address",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red, mtu: 60 }]",
        "interfaces[0].mtu",
        "MTU 60",
    );
}

/// `BASE` with a next hop `d` to point entries at.
fn base_with_d() -> String {
    format!("{BASE}nexthops: [{{ name: d, kind: drop }}, {{ name: e, kind: drop }}]\n")
}

#[test]
fn a_key_written_twice_is_refused_naming_both_places() {
    let b = base_with_d();
    // The same (network, prefix) twice, even to different next hops.
    let e = error(&format!(
        "{b}routes:\n  - {{ network: red, prefix: 10.0.0.0/24, nexthop: d }}\n  - {{ network: red, prefix: 10.0.1.0/24, nexthop: d }}\n  - {{ network: red, prefix: 10.0.0.0/24, nexthop: e }}\n"
    ));
    assert_eq!(
        e,
        "routes[2]: duplicate of routes[0] (network red, prefix 10.0.0.0/24)"
    );
    assert_error(
        &format!(
            "{b}bridge: [{{ network: red, mac: '02:00:00:00:01:06', nexthop: d }}, {{ network: red, mac: '02:00:00:00:01:06', nexthop: d }}]"
        ),
        "bridge[1]",
        "duplicate of bridge[0] (network red, mac 02:00:00:00:01:06)",
    );
    assert_error(
        &format!("{b}labels: [{{ label: 500, nexthop: d }}, {{ label: 500, nexthop: e }}]"),
        "labels[1]",
        "duplicate of labels[0] (label 500)",
    );
    assert_error(
        "networks: [{ name: red }, { name: red }]",
        "networks[1].name",
        "duplicate of networks[0]",
    );
    assert_error(
        &format!(
            "{BASE}  - {{ name: to-b, underlay: uplink, remote: 192.0.2.3, remote_mac: '02:00:00:00:00:0c' }}"
        ),
        "tunnels[1].name",
        "duplicate of tunnels[0]",
    );
    assert_error(
        &format!(
            "{BASE}nexthops: [{{ name: d, kind: drop }}, {{ name: e, kind: drop }}, {{ name: d, kind: receive }}]"
        ),
        "nexthops[2].name",
        "duplicate of nexthops[0]",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red }, { name: vm, network: red }]",
        "interfaces[1].name",
        "duplicate of interfaces[0]",
    );
    assert_error(
        "networks: [{ name: red, flood: [d, e, d] }]\nnexthops: [{ name: d, kind: drop }, { name: e, kind: drop }]",
        "networks[0].flood[2]",
        "duplicate of networks[0].flood[0] (next hop 'd')",
    );
    // Workloads' peers make entries too: the same address or MAC twice in a network.
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red, peer_mac: '02:00:00:00:00:05', peer_addresses: [10.0.0.5, 10.0.0.5] }]",
        "interfaces[0].peer_addresses[1]",
        "duplicate of interfaces[0].peer_addresses[0] (network red, peer address 10.0.0.5)",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: a, network: red, peer_mac: '02:00:00:00:00:05' }, { name: b, network: red, peer_mac: '02:00:00:00:00:05' }]",
        "interfaces[1].peer_mac",
        "duplicate of interfaces[0].peer_mac (network red, peer mac 02:00:00:00:00:05)",
    );
    // The same key in two networks is two keys.
    let ok = "networks: [{ name: red }, { name: blue }]\nnexthops: [{ name: d, kind: drop }]\nroutes: [{ network: red, prefix: 10.0.0.0/24, nexthop: d }, { network: blue, prefix: 10.0.0.0/24, nexthop: d }]\nlabels: [{ label: 500, nexthop: d }, { label: 501, nexthop: d }]";
    Config::from_yaml(ok).unwrap().translate().unwrap();
}

#[test]
fn a_duplicate_is_told_apart_from_other_mistakes() {
    let c = Config::from_yaml(&format!(
        "{}labels: [{{ label: 500, nexthop: d }}, {{ label: 500, nexthop: d }}]",
        base_with_d()
    ))
    .unwrap();
    assert!(matches!(
        c.translate(),
        Err(crate::ConfigError::Duplicate { .. })
    ));
}

/// The error for `yaml` read as the file `cfg.yaml`, as text: parsed, translated and
/// applied as `load_tables` does.
fn file_error(yaml: &str) -> String {
    let f = crate::ConfigFile::new("cfg.yaml", yaml);
    match f.parse().and_then(|c| {
        let t = c.translate().map_err(|e| f.locate(e))?;
        let (mut w, _r) = new_tables();
        t.apply(&mut w).map_err(|e| f.locate(e))
    }) {
        Ok(()) => panic!("accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

/// The 1-based line of the `n`th (from 0) line of `text` that contains `what`.
fn line_with(text: &str, what: &str, n: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(what))
        .nth(n)
        .map(|(i, _)| i + 1)
        .unwrap_or_else(|| panic!("no {what} in the text"))
}

const EXAMPLE: &str = include_str!("../examples/two-networks.yaml");

#[test]
fn errors_in_a_file_name_the_file_the_line_and_the_field() {
    // The example with its first route listed twice, at the end of the routes.
    let first = "  - { network: red, prefix: 10.2.0.0/24, nexthop: b-red }\n";
    let twice = EXAMPLE.replace("\n\nbridge:", &format!("\n{first}\nbridge:"));
    let line = line_with(&twice, "10.2.0.0/24", 1);
    assert_eq!(
        file_error(&twice),
        format!(
            "cfg.yaml:{line}: routes[2]: duplicate of routes[0] (network red, prefix 10.2.0.0/24)"
        )
    );
    // A value that does not parse: the line, the field, the column.
    let bad = EXAMPLE.replace("10.3.0.0/24", "10.3.0.1/24");
    let line = line_with(&bad, "10.3.0.1/24", 0);
    let e = file_error(&bad);
    assert!(
        e.starts_with(&format!("cfg.yaml:{line}: routes[1].prefix: ")),
        "{e}"
    );
    assert!(e.contains("(column "), "{e}");
    // A reference translation refuses, in block style.
    let bad = EXAMPLE.replace("flood: [b-blue]", "flood:\n      - b-blue\n      - nowhere");
    let line = line_with(&bad, "nowhere", 0);
    assert_eq!(
        file_error(&bad),
        format!("cfg.yaml:{line}: networks[1].flood[1]: no next hop named 'nowhere'")
    );
    // What the tables refuse.
    let bad = EXAMPLE.replace("label: 501", "label: 3");
    let line = line_with(&bad, "label: 3", 0);
    let e = file_error(&bad);
    assert!(
        e.starts_with(&format!("cfg.yaml:{line}: labels[1].label: ")),
        "{e}"
    );
    // A field left out: the line of its object.
    let bad = EXAMPLE.replace("    mac: \"02:00:00:00:00:0a\"\n", "");
    let line = line_with(&bad, "name: uplink", 0);
    assert_eq!(
        file_error(&bad),
        format!("cfg.yaml:{line}: interfaces[0].mac: an underlay interface needs its MAC")
    );
    // A field of a mapping written in block style.
    let bad = EXAMPLE.replace("    mtu: 1500", "    mtu: 20");
    let line = line_with(&bad, "mtu: 20", 0);
    let e = file_error(&bad);
    assert!(
        e.starts_with(&format!("cfg.yaml:{line}: interfaces[0].mtu: ")),
        "{e}"
    );
}

#[test]
fn an_unclosed_bracket_or_quote_is_reported_where_it_opens() {
    let e = file_error("networks:\n  - { name: red, vni: 100\n  - { name: blue }\nroutes: []\n");
    assert!(
        e.starts_with("cfg.yaml:2: ") && e.contains("the '{' at line 2 column 5 is not closed"),
        "{e}"
    );
    let e = file_error("networks: [{ name: red },\n\n  { name: blue }\n");
    assert!(
        e.starts_with("cfg.yaml:1: ") && e.contains("the '[' at line 1 column 11 is not closed"),
        "{e}"
    );
    let e = file_error("networks:\n  - name: 'red\n  - name: blue\n");
    assert!(
        e.starts_with("cfg.yaml:2: ") && e.contains("quote at line 2 column 11 is not closed"),
        "{e}"
    );
}

#[test]
fn an_empty_document_is_an_error() {
    for text in ["", "\n\n", "# nothing yet\n", "---\n", "~\n"] {
        let e = file_error(text);
        assert!(
            e.starts_with("cfg.yaml: (document): no configuration"),
            "{text:?}: {e}"
        );
    }
    // An explicitly empty configuration is one.
    assert_eq!(Config::from_yaml("{}").unwrap(), Config::default());
}

#[test]
fn aliases_may_not_blow_the_document_up() {
    // Billion laughs: 9 levels of 9 aliases each.
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    for i in 1..9 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    let e = file_error(&bomb);
    assert!(e.starts_with("cfg.yaml:"), "{e}");
    assert!(e.contains("expand") || e.contains("repetition"), "{e}");
    // Wide: one big anchor repeated, within what the YAML crate allows.
    let mut wide = String::from("networks: [{ name: red, gateways: &g [");
    wide.push_str(&vec!["10.0.0.1/24"; 2000].join(", "));
    wide.push_str("] }");
    for i in 0..300 {
        wide.push_str(&format!(", {{ name: n{i}, gateways: *g }}"));
    }
    wide.push_str("]\n");
    let e = file_error(&wide);
    assert!(
        e.contains("its aliases expand the document to more than"),
        "{e}"
    );
    // An alias repeating an entry makes a duplicate (200,001 bridge entries were).
    let mut many = format!(
        "{}bridge:\n  - &b {{ network: red, mac: '02:00:00:00:01:06', nexthop: d }}\n",
        base_with_d()
    );
    for _ in 0..1000 {
        many.push_str("  - *b\n");
    }
    // (A value reached through an alias is where its anchor is written.)
    let line = line_with(&many, "- &b", 0);
    assert_eq!(
        file_error(&many),
        format!(
            "cfg.yaml:{line}: bridge[1]: duplicate of bridge[0] (network red, mac 02:00:00:00:01:06)"
        )
    );
    // Aliases used with measure are fine.
    let ok = "networks:\n  - { name: red, policy: &p [{ action: allow, protocol: tcp, dst_ports: 80 }, { action: deny }] }\n  - { name: blue, policy: *p }\n";
    let c = Config::from_yaml(ok).unwrap();
    assert_eq!(c.networks[1].policy, c.networks[0].policy);
}

#[test]
fn files_are_read_within_limits() {
    let dir = std::env::temp_dir().join(format!("ovr-config-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.yaml");
    // Sparse: refused by its size, without being read.
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(crate::MAX_FILE_BYTES + 1).unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.starts_with(&path.display().to_string())
            && e.contains("over the 67108864 bytes (64 MiB)"),
        "{e}"
    );
    std::fs::write(&path, "\n  \n").unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(
        e.ends_with(": the file is empty (write {} for a configuration with nothing in it)"),
        "{e}"
    );
    std::fs::write(&path, b"routes: [\xff]").unwrap();
    let e = Config::load(&path).unwrap_err().to_string();
    assert!(e.contains("not UTF-8 text (byte 9)"), "{e}");
    let e = Config::load(&dir).unwrap_err().to_string();
    assert!(e.contains("is a directory"), "{e}");
    std::fs::write(&path, "networks: [{ name: red }, { name: red }]\n").unwrap();
    let e = crate::load_tables(&path).err().unwrap().to_string();
    assert_eq!(
        e,
        format!(
            "{}:1: networks[1].name: duplicate of networks[0] ('red' is used twice)",
            path.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_policer_is_checked_at_its_field() {
    let i = |police: &str| {
        format!(
            "networks: [{{ name: red }}]\ninterfaces: [{{ name: a, network: red, police: {police} }}]"
        )
    };
    assert_error(
        &i("{ packets_per_second: 0 }"),
        "interfaces[0].police.packets_per_second",
        "at least 1",
    );
    assert_error(
        &i("{ packets_per_second: 10, burst: 0 }"),
        "interfaces[0].police.burst",
        "at least 1",
    );
    assert_error(
        &i("{ pps: 10 }"),
        "interfaces[0].police.pps",
        "unknown field",
    );
}

#[test]
fn memif_settings_are_checked_at_their_field() {
    let m = |memif: &str| {
        format!(
            "networks: [{{ name: red }}]\ninterfaces: [{{ name: nf, kind: memif, network: red, {memif} }}]"
        )
    };
    assert_error(
        &m("mtu: 1500"),
        "interfaces[0].memif",
        "needs its connection",
    );
    assert_error(
        "networks: [{ name: red }]\ninterfaces: [{ name: vm, network: red, memif: { socket: /x } }]",
        "interfaces[0].memif",
        "only an interface of kind memif or underlay",
    );
    assert_error(
        &m("memif: { socket: rel.sock }"),
        "interfaces[0].memif.socket",
        "absolute path",
    );
    assert_error(
        &m("memif: { socket: '@' }"),
        "interfaces[0].memif.socket",
        "abstract name",
    );
    assert_error(
        &m("memif: { socket: /s, secret: '0123456789012345678901234' }"),
        "interfaces[0].memif.secret",
        "24 bytes",
    );
    assert_error(
        &m("memif: { socket: /s, ring_size: 15 }"),
        "interfaces[0].memif.ring_size",
        "1 to 14",
    );
    assert_error(
        &m("memif: { socket: /s, ring_size: 0 }"),
        "interfaces[0].memif.ring_size",
        "1 to 14",
    );
    assert_error(
        &m("memif: { socket: /s, buffer_size: 100 }"),
        "interfaces[0].memif.buffer_size",
        "multiple of 64",
    );
    assert_error(
        &m("memif: { socket: /s, queues: 0 }"),
        "interfaces[0].memif.queues",
        "1 to 16",
    );
    assert_error(
        &m("memif: { socket: /s, role: master }"),
        "interfaces[0].memif.role",
        "",
    );
    assert_error(
        &m("memif: { socket: /s, mode: punt }"),
        "interfaces[0].memif.mode",
        "",
    );
    assert_error(
        &m("memif: { socket: /s, colour: red }"),
        "interfaces[0].memif.colour",
        "",
    );
    // A good one passes.
    let ok = m("memif: { socket: '@nf', role: client, id: 7, secret: s, mode: ip }");
    let c = Config::from_yaml(&ok).unwrap();
    c.translate().unwrap();
}

#[test]
fn route_targets_are_checked_at_their_field() {
    let n = |rt: &str| format!("networks: [{{ name: red, vni: 100, route_targets: {rt} }}]");
    assert_error(
        &n("{ import: ['65536:1'] }"),
        "networks[0].route_targets.import[0]",
        "not a route target",
    );
    assert_error(
        &n("{ export: ['1.2.3.4:1'] }"),
        "networks[0].route_targets.export[0]",
        "ASN:NUMBER",
    );
    assert_error(
        &n("{ export: [] }"),
        "networks[0].route_targets.export",
        "at least one route target",
    );
    assert_error(
        &n("{ import: [auto, '65000:7', auto] }"),
        "networks[0].route_targets.import[2]",
        "auto is listed twice",
    );
    assert_error(
        &n("{ import: ['65000:7'], bogus: 1 }"),
        "networks[0].route_targets.bogus",
        "unknown field",
    );
    assert_error(
        "networks: [{ name: red, route_targets: { import: ['65000:7'] } }]",
        "networks[0].route_targets",
        "without a vni",
    );
    assert_error(
        "networks: [{ name: red, vni: 1, route_targets: { import: ['65000:7'] } },\
                    { name: blue, vni: 2, route_targets: { import: [auto, '65000:7'] } }]",
        "networks[1].route_targets.import[1]",
        "65000:7 is imported by network 'red' already",
    );
    // Both directions default to auto; written back as given.
    let c = Config::from_yaml(&n("{ import: ['65000:7', auto] }")).unwrap();
    let rt = c.networks[0].route_targets.as_ref().unwrap();
    assert_eq!(
        (rt.import.len(), rt.export.clone()),
        (2, vec![crate::model::RouteTarget::Auto])
    );
    let yaml = serde_yaml_ng::to_string(&c.networks[0]).unwrap();
    assert!(
        yaml.contains("import:\n  - 65000:7\n  - auto\n  export:\n  - auto"),
        "{yaml}"
    );
    c.translate().unwrap();
}
