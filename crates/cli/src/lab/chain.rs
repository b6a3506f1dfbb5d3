//! `ovrctl lab up --service-chain`: a firewall between tenant 1 and a network `ext`,
//! with an instance on hosts 1 and 2, all through the cluster's intent
//! (docs/chains.md, "In the cluster"). With `--functions N`, a chain of N such
//! firewalls, `fw`, `fw2`, ..., each with its instances on the same hosts.
//!
//! - Network `ext` (VNI 199, 10.99.0.0/24, gateway 10.99.0.1) with one workload per host,
//!   `hN-ext-w1` at 10.99.0.(10N+1), behind host interface `extw1`.
//! - Network `svc` (VNI 198) for the function's ports: 10.98.1.0/24 on the left, 10.98.2.0/24
//!   on the right, gateways .1, which ovr answers the function's ARP for.
//! - Instance `fw-hN` on hosts 1 and 2: a namespace `PREFIX-hN-fw` with ports `left`
//!   (10.98.1.(10+N)) and `right` (10.98.2.(10+N)) behind host interfaces `fwl`/`fwr`
//!   (function k > 1: `fwk-hN`, `PREFIX-hN-fwk`, 10.98.x.(10k+N), `fwkl`/`fwkr`),
//!   Linux forwarding on, routes to 10.1.0.0/24 on the left and 10.99.0.0/24 on the right,
//!   and an nftables table `inet fw` whose `forward` chain counts (rule comment `lab`).
//! - Intent: ports `hN/fw-hN-l`, `hN/fw-hN-r`, service `fw`, chain `through-fw`, and
//!   policy `t1-through-fw` (t1's traffic to ext goes through the chain).

use super::{Place, State, Workload, add_address, add_namespace, mac, run, save, veth};
use serde::{Deserialize, Serialize};

/// The network beyond the chain.
pub const EXT: &str = "ext";
const EXT_VNI: u32 = 199;
/// The network of the functions' ports.
pub const SVC: &str = "svc";
const SVC_VNI: u32 = 198;
pub const SERVICE: &str = "fw";
pub const CHAIN: &str = "through-fw";
const POLICY: &str = "t1-through-fw";

/// The name of the chain's function `f` (1-based): `fw`, `fw2`, ...
pub fn function(f: usize) -> String {
    match f {
        1 => SERVICE.into(),
        _ => format!("{SERVICE}{f}"),
    }
}

fn first_function() -> String {
    SERVICE.into()
}

/// One instance of the lab's firewall.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Instance {
    /// "fw-h1".
    pub name: String,
    /// Its function ("fw", "fw2", ...).
    #[serde(default = "first_function")]
    pub function: String,
    pub host: usize,
    pub namespace: String,
    pub left: Side,
    pub right: Side,
}

/// A side of an instance: its port's name in the intent, the host's interface, and the
/// function's MAC and address there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    pub port: String,
    pub interface: String,
    pub mac: String,
    pub address: String,
}

/// The workload of network `ext` on host `h`.
pub(super) fn add_ext_workload(p: &Place, s: &mut State, h: usize) -> Result<(), String> {
    let host_ns = format!("{}-h{h}", p.prefix);
    let name = format!("h{h}-{EXT}-w1");
    let ns = format!("{}-{name}", p.prefix);
    add_namespace(p, s, &ns)?;
    let wmac = mac(3, 0, h, 1);
    let w = Workload {
        name,
        namespace: ns.clone(),
        host: h,
        tenant: 0,
        index: 1,
        address: format!("10.99.0.{}", 10 * h + 1),
        mac: wmac.clone(),
        network: Some(EXT.into()),
    };
    veth(
        p,
        (Some(&host_ns), &w.host_interface(), ""),
        (Some(&ns), "eth0", &wmac),
    )?;
    add_address(Some(&ns), &format!("{}/24", w.address), "eth0")?;
    run(
        Some(&ns),
        &["ip", "route", "add", "default", "via", "10.99.0.1"],
    )?;
    if !s.settings.workload_offloads {
        run(Some(&ns), &["ethtool", "-K", "eth0", "tx", "off"])?;
    }
    s.workloads.push(w);
    save(p, s)
}

/// Function `f`'s instance on host `h`: its namespace, ports, routes and nftables.
pub(super) fn add_instance(p: &Place, s: &mut State, f: usize, h: usize) -> Result<(), String> {
    let host_ns = format!("{}-h{h}", p.prefix);
    let function = function(f);
    let name = format!("{function}-h{h}");
    let ns = format!("{}-h{h}-{function}", p.prefix);
    add_namespace(p, s, &ns)?;
    let side = |k: u8, what: &str, net: u8| Side {
        port: format!("{name}-{}", &what[..1]),
        interface: format!("{function}{}", &what[..1]),
        mac: mac(0xf0 + k, f - 1, h, 1),
        address: format!("10.98.{net}.{}", 10 * f + h),
    };
    let i = Instance {
        name: name.clone(),
        function: function.clone(),
        host: h,
        namespace: ns.clone(),
        left: side(1, "left", 1),
        right: side(2, "right", 2),
    };
    s.chain.get_or_insert_with(Vec::new).push(i.clone());
    save(p, s)?;
    for (what, x) in [("left", &i.left), ("right", &i.right)] {
        veth(
            p,
            (Some(&host_ns), &x.interface, ""),
            (Some(&ns), what, &x.mac),
        )?;
        add_address(Some(&ns), &format!("{}/24", x.address), what)?;
        if !s.settings.workload_offloads {
            run(Some(&ns), &["ethtool", "-K", what, "tx", "off"])?;
        }
    }
    run(Some(&ns), &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    for (dst, via, dev) in [
        ("10.1.0.0/24", "10.98.1.1", "left"),
        ("10.99.0.0/24", "10.98.2.1", "right"),
    ] {
        run(
            Some(&ns),
            &["ip", "route", "add", dst, "via", via, "dev", dev],
        )?;
    }
    for cmd in [
        "add table inet fw",
        "add chain inet fw forward { type filter hook forward priority 0 ; policy accept ; }",
        "add rule inet fw forward counter comment \"lab\"",
    ] {
        let mut args = vec!["nft"];
        args.extend(cmd.split(' '));
        run(Some(&ns), &args)?;
    }
    Ok(())
}

/// The intent of the chain: its networks, the instances' ports, the service, the chain
/// and tenant 1's policy. Keys and JSON values.
pub(super) fn intent(s: &State) -> Vec<(String, serde_json::Value)> {
    use ovr_cluster::keys::Key;
    use serde_json::json;
    let mut kvs = vec![
        (
            Key::Network(EXT.into()).to_string(),
            json!({"vni": EXT_VNI, "subnets": ["10.99.0.0/24"], "gateways": ["10.99.0.1/24"]}),
        ),
        (
            Key::Network(SVC.into()).to_string(),
            json!({"vni": SVC_VNI, "subnets": ["10.98.1.0/24", "10.98.2.0/24"],
                   "gateways": ["10.98.1.1/24", "10.98.2.1/24"]}),
        ),
    ];
    let instances = s.chain.as_deref().unwrap_or_default();
    for i in instances {
        for x in [&i.left, &i.right] {
            kvs.push((
                port_key(i, x).to_string(),
                json!({"network": SVC, "mac": x.mac, "ips": [x.address],
                       "interface": x.interface, "metadata": {"made_by": "ovrctl lab"}}),
            ));
        }
    }
    // The functions in the order their first instance was added.
    let mut functions: Vec<&str> = Vec::new();
    for i in instances {
        if !functions.contains(&i.function.as_str()) {
            functions.push(&i.function);
        }
    }
    for f in &functions {
        kvs.push((
            Key::Service((*f).into()).to_string(),
            json!({"mode": "in-network", "instances": instances.iter()
                .filter(|i| i.function == *f)
                .map(|i| json!({
                    "name": i.name, "host": format!("h{}", i.host),
                    "left": i.left.port, "right": i.right.port,
                })).collect::<Vec<_>>()}),
        ));
    }
    kvs.push((
        Key::Chain(CHAIN.into()).to_string(),
        json!({ "functions": functions }),
    ));
    kvs.push((
        Key::Policy(POLICY.into()).to_string(),
        json!({"network": "t1", "rules": [
            {"action": "chain", "chain": CHAIN, "dst_network": EXT}]}),
    ));
    kvs
}

fn port_key(i: &Instance, x: &Side) -> ovr_cluster::keys::Key {
    ovr_cluster::keys::Key::Port {
        host: format!("h{}", i.host),
        name: x.port.clone(),
    }
}

/// The endpoints the instances' ports become once up (what `up` waits for).
pub(super) fn endpoints(s: &State) -> Vec<String> {
    s.chain
        .iter()
        .flatten()
        .flat_map(|i| {
            [&i.left, &i.right].map(|x| {
                ovr_cluster::keys::Key::Endpoint {
                    host: format!("h{}", i.host),
                    name: x.port.clone(),
                }
                .to_string()
            })
        })
        .collect()
}

/// `lab status --json`'s `services`: each instance's name, function, host and namespace.
pub(super) fn status(s: &State) -> Vec<serde_json::Value> {
    s.chain
        .iter()
        .flatten()
        .map(|i| {
            serde_json::json!({
                "name": i.name,
                "function": i.function,
                "chain": CHAIN,
                "host": format!("h{}", i.host),
                "namespace": i.namespace,
                "left": {"interface": i.left.interface, "address": i.left.address, "mac": i.left.mac},
                "right": {"interface": i.right.interface, "address": i.right.address, "mac": i.right.mac},
            })
        })
        .collect()
}
