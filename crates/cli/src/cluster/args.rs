//! Intent as typed on the command line → the key and JSON value written to etcd. The
//! value is built as JSON and checked by `ovr_cluster::intent::check`, the same check
//! every agent makes, so that ovrctl refuses exactly what the agents would.

use clap::Args;
use ovr_cluster::keys::Key;
use serde_json::{Map, Value, json};

#[derive(Args, Clone, Debug)]
pub struct NetworkArgs {
    pub name: String,
    /// The VXLAN network identifier, 1 to 16777215, unique in the cluster.
    #[arg(long)]
    pub vni: u32,
    /// A subnet (PREFIX/LEN); repeat for more.
    #[arg(long = "subnet")]
    pub subnets: Vec<String>,
    /// A gateway address, ADDRESS/LEN, the same on every host; repeat for more.
    #[arg(long = "gateway")]
    pub gateways: Vec<String>,
    /// How hosts carry the network to each other.
    #[arg(long, default_value = "vxlan", value_parser = ["vxlan", "mpls_udp", "mpls_gre"])]
    pub encap: String,
    /// Do not replicate broadcast and unknown unicast to the network's other hosts.
    #[arg(long)]
    pub no_flood: bool,
    /// The most flows the network may hold on each host (default: the host's
    /// flows.network_quota).
    #[arg(long)]
    pub flow_quota: Option<u32>,
    /// Overwrite the network if it exists.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Args, Clone, Debug)]
pub struct PortArgs {
    /// The host the workload runs on.
    #[arg(long)]
    pub host: String,
    pub name: String,
    #[arg(long)]
    pub network: String,
    /// The workload's MAC.
    #[arg(long)]
    pub mac: String,
    /// A workload address; repeat for more.
    #[arg(long = "ip")]
    pub ips: Vec<String>,
    /// The host-side interface (a veth end, a TAP), or with --memif-socket the name ovr
    /// gives the memif interface.
    #[arg(long)]
    pub interface: String,
    /// A memif port: its control socket (an absolute path, or @name).
    #[arg(long)]
    pub memif_socket: Option<String>,
    /// The memif interface's id on its socket.
    #[arg(long, requires = "memif_socket", default_value_t = 0)]
    pub memif_id: u32,
    /// Whether ovr listens on the socket (server) or connects to the function's.
    #[arg(long, requires = "memif_socket", default_value = "server",
          value_parser = ["server", "client"])]
    pub memif_role: String,
    /// Who made the port, as KEY=VALUE (kept, not used); repeat for more.
    #[arg(long = "meta")]
    pub metadata: Vec<String>,
    /// Overwrite the port if it exists.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Args, Clone, Debug)]
pub struct PolicyArgs {
    pub name: String,
    /// The network the rules apply to.
    #[arg(long)]
    pub network: String,
    /// A JSON array of rules: '[{"action":"deny","protocol":"tcp","dst_ports":"23"}]'.
    #[arg(long)]
    pub rules: String,
    /// Overwrite the policy if it exists.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Args, Clone, Debug)]
pub struct ServiceArgs {
    pub name: String,
    /// How the function treats frames (only in-network in a cluster).
    #[arg(long, default_value = "in-network", value_parser = ["in-network", "transparent"])]
    pub mode: String,
    /// An instance, NAME:HOST:LEFT:RIGHT (LEFT and RIGHT: ports of HOST, towards the
    /// chain's source and its destination); repeat for more.
    #[arg(long = "instance", required = true)]
    pub instances: Vec<String>,
    /// A health probe, KIND[:INTERVAL_MS[:FAILURES]] (KIND: link, arp or icmp; default
    /// 100 ms and 3 missed), sent by each instance's host (none: the links only).
    #[arg(long)]
    pub probe: Option<String>,
    /// Overwrite the service if it exists.
    #[arg(long)]
    pub replace: bool,
}

#[derive(Args, Clone, Debug)]
pub struct ChainArgs {
    pub name: String,
    /// A service, in the order traffic from the source network crosses them; repeat for
    /// more.
    #[arg(long = "function", required = true)]
    pub functions: Vec<String>,
    /// Overwrite the chain if it exists.
    #[arg(long)]
    pub replace: bool,
}

/// A value to write: its key and JSON, not yet checked.
#[derive(Debug, PartialEq)]
pub struct Intent {
    pub key: Key,
    pub value: Value,
    pub replace: bool,
}

impl Intent {
    /// The key and the bytes to write, or why the agents would refuse them.
    #[cfg(test)]
    fn checked(&self) -> Result<(String, Vec<u8>), String> {
        let bytes = ovr_cluster::intent::check(&self.key, &self.value)?;
        Ok((self.key.to_string(), bytes))
    }
}

pub fn network(a: &NetworkArgs) -> Intent {
    let mut value = json!({
        "vni": a.vni,
        "subnets": a.subnets,
        "gateways": a.gateways,
        "encap": a.encap,
        "flood": !a.no_flood,
    });
    if let Some(flows) = a.flow_quota {
        value["quotas"] = json!({ "flows": flows });
    }
    Intent {
        key: Key::Network(a.name.clone()),
        value,
        replace: a.replace,
    }
}

/// A port; a --meta without '=' is a usage error.
pub fn port(a: &PortArgs) -> Result<Intent, String> {
    let mut metadata = Map::new();
    for m in &a.metadata {
        let (k, v) = m
            .split_once('=')
            .ok_or_else(|| format!("--meta {m}: give KEY=VALUE"))?;
        metadata.insert(k.to_string(), Value::String(v.to_string()));
    }
    let mut value = json!({
        "network": a.network,
        "mac": a.mac,
        "ips": a.ips,
        "interface": a.interface,
    });
    if !metadata.is_empty() {
        value["metadata"] = Value::Object(metadata);
    }
    if let Some(socket) = &a.memif_socket {
        value["memif"] = json!({ "socket": socket, "id": a.memif_id, "role": a.memif_role });
    }
    Ok(Intent {
        key: Key::Port {
            host: a.host.clone(),
            name: a.name.clone(),
        },
        value,
        replace: a.replace,
    })
}

/// A policy; rules that are not JSON are a usage error (rules that are JSON but not
/// rules are refused by the check, as the agents would).
pub fn policy(a: &PolicyArgs) -> Result<Intent, String> {
    let rules: Value =
        serde_json::from_str(&a.rules).map_err(|e| format!("--rules: not JSON: {e}"))?;
    Ok(Intent {
        key: Key::Policy(a.name.clone()),
        value: json!({ "network": a.network, "rules": rules }),
        replace: a.replace,
    })
}

/// A service; an --instance not of the form NAME:HOST:LEFT:RIGHT is a usage error.
pub fn service(a: &ServiceArgs) -> Result<Intent, String> {
    let instances = a
        .instances
        .iter()
        .map(|i| match i.split(':').collect::<Vec<_>>()[..] {
            [name, host, left, right] => {
                Ok(json!({ "name": name, "host": host, "left": left, "right": right }))
            }
            _ => Err(format!("--instance {i}: give NAME:HOST:LEFT:RIGHT")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut value = json!({ "mode": a.mode, "instances": instances });
    if let Some(p) = &a.probe {
        value["probe"] = probe(p)?;
    }
    Ok(Intent {
        key: Key::Service(a.name.clone()),
        value,
        replace: a.replace,
    })
}

/// A --probe KIND[:INTERVAL_MS[:FAILURES]]; its bounds are the check's.
fn probe(p: &str) -> Result<Value, String> {
    let mut parts = p.split(':');
    let mut v = json!({ "kind": parts.next().unwrap_or_default() });
    for field in ["interval_ms", "failures"] {
        if let Some(n) = parts.next() {
            let n: u32 = n
                .parse()
                .map_err(|_| format!("--probe {p}: {field} '{n}' is not a number"))?;
            v[field] = n.into();
        }
    }
    if parts.next().is_some() {
        return Err(format!("--probe {p}: give KIND[:INTERVAL_MS[:FAILURES]]"));
    }
    Ok(v)
}

pub fn chain(a: &ChainArgs) -> Intent {
    Intent {
        key: Key::Chain(a.name.clone()),
        value: json!({ "functions": a.functions }),
        replace: a.replace,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Line<T: clap::Args> {
        #[command(flatten)]
        args: T,
    }

    fn args<T: clap::Args>(line: &str) -> T {
        Line::<T>::try_parse_from(std::iter::once("t").chain(line.split_whitespace()))
            .unwrap()
            .args
    }

    #[test]
    fn service_and_chain_arguments_become_their_values_and_pass_the_agents_check() {
        let s = service(&args(
            "fw --instance fw-1:h1:fw1-l:fw1-r --instance fw-2:h2:fw2-l:fw2-r",
        ))
        .unwrap();
        assert_eq!(s.key, Key::Service("fw".into()));
        assert_eq!(
            s.value,
            json!({"mode": "in-network", "instances": [
                {"name": "fw-1", "host": "h1", "left": "fw1-l", "right": "fw1-r"},
                {"name": "fw-2", "host": "h2", "left": "fw2-l", "right": "fw2-r"}]})
        );
        s.checked().unwrap();
        let s = service(&args("fw --instance fw-1:h1:l:r --probe icmp:50:2")).unwrap();
        assert_eq!(
            s.value["probe"],
            json!({"kind": "icmp", "interval_ms": 50, "failures": 2})
        );
        s.checked().unwrap();
        let s = service(&args("fw --instance fw-1:h1:l:r --probe arp")).unwrap();
        assert_eq!(s.value["probe"], json!({"kind": "arp"}));
        let e = service(&args("fw --instance fw-1:h1:l:r --probe icmp:5"))
            .unwrap()
            .checked()
            .unwrap_err();
        assert!(e.contains("probe.interval_ms: 5 is out of range"), "{e}");
        let e = service(&args("fw --instance fw-1:h1:l:r --probe icmp:x")).unwrap_err();
        assert!(e.contains("interval_ms 'x' is not a number"), "{e}");
        let e = service(&args("fw --instance fw-1:h1:fw1-l")).unwrap_err();
        assert!(e.contains("NAME:HOST:LEFT:RIGHT"), "{e}");
        let c = chain(&args("through-fw --function fw --function ids"));
        assert_eq!(c.value, json!({"functions": ["fw", "ids"]}));
        c.checked().unwrap();
        let e = service(&args("fw --instance fw-1:h1:p:p"))
            .unwrap()
            .checked();
        assert!(e.is_err(), "left and right the same port: {e:?}");
    }

    #[test]
    fn network_arguments_become_its_value() {
        let i = network(&args(
            "red --vni 100 --subnet 10.1.0.0/24 --subnet fd00:1::/64 --gateway 10.1.0.1/24 \
             --encap mpls_udp --no-flood",
        ));
        assert_eq!(i.key, Key::Network("red".into()));
        assert_eq!(
            i.value,
            json!({"vni": 100, "subnets": ["10.1.0.0/24", "fd00:1::/64"],
                   "gateways": ["10.1.0.1/24"], "encap": "mpls_udp", "flood": false})
        );
        assert!(!i.replace);
        let (key, _) = i.checked().unwrap();
        assert_eq!(key, "/ovr/v1/networks/red");
        let i = network(&args("red --vni 100 --flow-quota 5000"));
        assert_eq!(i.value["quotas"], json!({"flows": 5000}));
        assert!(i.checked().is_ok());
        let e = network(&args("red --vni 100 --flow-quota 0"))
            .checked()
            .unwrap_err();
        assert!(e.contains("quotas.flows"), "{e}");
        // Defaults: vxlan, flooding, no quota.
        let i = network(&args("blue --vni 7 --replace"));
        assert!(i.value.get("quotas").is_none());
        assert_eq!(i.value["encap"], "vxlan");
        assert_eq!(i.value["flood"], true);
        assert!(i.replace);
        assert!(i.checked().is_ok());
    }

    #[test]
    fn values_the_agents_would_refuse_are_refused() {
        let e = network(&args("red --vni 0")).checked().unwrap_err();
        assert!(e.starts_with("/ovr/v1/networks/red: vni: 0"), "{e}");
        let e = network(&args(
            "red --vni 5 --subnet 10.0.0.0/24 --gateway 10.9.0.1/24",
        ))
        .checked()
        .unwrap_err();
        assert!(e.contains("gateways[0]"), "{e}");
        assert!(network(&args("r_d/x --vni 5")).checked().is_err());
        let p = |line: &str| port(&args(line)).unwrap().checked();
        let e = p("--host h1 p1 --network red --mac 02:00:zz:00:00:01 --interface v1").unwrap_err();
        assert!(e.contains("mac") || e.contains("MAC"), "{e}");
        assert!(p("--host h1 p1 --network red --mac 01:00:00:00:00:01 --interface v1").is_err());
        let e = policy(&args(
            r#"web --network red --rules [{"action":"deny","bogus":1}]"#,
        ))
        .unwrap()
        .checked()
        .unwrap_err();
        assert!(e.contains("bogus"), "{e}");
    }

    #[test]
    fn port_and_policy_arguments_become_their_values() {
        let i = port(&args(
            "--host h1 web-1 --network red --mac 02:00:00:00:00:01 --ip 10.1.0.5 \
             --ip fd00:1::5 --interface veth-w1 --meta pod=web --meta ns=a=b",
        ))
        .unwrap();
        assert_eq!(
            i.key,
            Key::Port {
                host: "h1".into(),
                name: "web-1".into()
            }
        );
        assert_eq!(
            i.value,
            json!({"network": "red", "mac": "02:00:00:00:00:01",
                   "ips": ["10.1.0.5", "fd00:1::5"], "interface": "veth-w1",
                   "metadata": {"pod": "web", "ns": "a=b"}})
        );
        assert!(i.checked().is_ok());
        let e = port(&args(
            "--host h1 p --network red --mac 02:00:00:00:00:01 --interface v --meta x",
        ))
        .unwrap_err();
        assert!(e.contains("KEY=VALUE"), "{e}");

        let memif = "--host h1 nf-l --network red --mac 02:00:00:00:00:02 --interface nf-l \
                     --memif-socket /run/ovr/nf.sock";
        let i = port(&args(&format!("{memif} --memif-id 3 --memif-role client"))).unwrap();
        assert_eq!(
            i.value["memif"],
            json!({"socket": "/run/ovr/nf.sock", "id": 3, "role": "client"})
        );
        assert!(i.checked().is_ok());
        assert_eq!(
            port(&args(memif)).unwrap().value["memif"],
            json!({"socket": "/run/ovr/nf.sock", "id": 0, "role": "server"})
        );
        let rel = memif.replace("/run/ovr/nf.sock", "nf.sock");
        let e = port(&args(&rel)).unwrap().checked().unwrap_err();
        assert!(e.contains("memif.socket"), "{e}");
        let i = port(&args(
            "--host h1 w --network red --mac 02:00:00:00:00:03 --interface w",
        ));
        assert!(i.unwrap().value.get("memif").is_none());

        let i = policy(&args(
            r#"no-telnet --network red --rules [{"action":"deny","protocol":"tcp","dst_ports":"23"}]"#,
        ))
        .unwrap();
        assert_eq!(i.key, Key::Policy("no-telnet".into()));
        assert_eq!(i.value["network"], "red");
        assert_eq!(i.value["rules"][0]["dst_ports"], "23");
        assert!(i.checked().is_ok());
        assert!(policy(&args("p --network red --rules [")).is_err());
    }
}
