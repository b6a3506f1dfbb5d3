//! ovrctl's commands over ovrd's API: the configuration objects (list, show, add, set,
//! del), policies, flows, counters and drop statistics, the packet trace and captures;
//! human tables by default, `--json` for scripts.

mod chains;
mod diagnose;
pub mod show;

use ovr_client as http;
use ovr_client::seg;

pub use chains::chains;
pub use diagnose::{Capture, Trace, capture, trace};

use clap::{Args, Subcommand};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// Where ovrd's API is, and how to print.
#[derive(Args, Clone)]
pub struct Conn {
    /// ovrd's API socket.
    #[arg(long, global = true, default_value = "/run/ovr/ovrd.sock")]
    socket: PathBuf,
    /// ovrd's TCP listener instead of the socket (`ovrd --api-listen`): http://ADDR:PORT.
    /// Plain HTTP: across hosts, put TLS in front (docs/agent.md).
    #[arg(long, global = true, value_parser = parse_url)]
    url: Option<String>,
    /// The bearer token for --url (the file `ovrd --api-token-file` reads).
    #[arg(long, global = true, requires = "url")]
    token_file: Option<PathBuf>,
    /// Print the API's JSON (for scripts) instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Subcommand, Clone)]
pub enum Objects {
    /// All of them (the default).
    List,
    /// One, by its key: a name; routes: NETWORK PREFIX; bridge: NETWORK MAC; labels: LABEL.
    Show { key: Vec<String> },
    /// Create one from field=value pairs (lists comma-separated), or one JSON object:
    /// `ovrctl routes add network=red prefix=10.2.0.0/24 nexthop=to-b`.
    Add { fields: Vec<String> },
    /// Replace one, same syntax as add (the whole object).
    Set { fields: Vec<String> },
    /// Delete one, by its key.
    Del { key: Vec<String> },
}

#[derive(Subcommand, Clone)]
pub enum Policies {
    List,
    Show {
        network: String,
    },
    /// Set a network's rules from a JSON array: policies set red '[{"action":"deny","protocol":"tcp","dst_ports":23}]'.
    Set {
        network: String,
        rules: String,
    },
    /// Back to the default (allow within the network, deny between networks).
    Del {
        network: String,
    },
}

#[derive(Args, Clone)]
pub struct FlowArgs {
    /// Only flows of this network.
    #[arg(long)]
    network: Option<String>,
    /// Only flows of this VRF id.
    #[arg(long)]
    vrf: Option<u32>,
    /// Only flows from or to this address.
    #[arg(long)]
    addr: Option<String>,
    /// Only flows from or to this port.
    #[arg(long)]
    port: Option<u16>,
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    /// Remove the matching flows instead of listing them.
    #[arg(long)]
    delete: bool,
}

/// A kind of configuration object: its API path and how its key is written.
pub struct Kind {
    pub path: &'static str,
    /// Fields of the key, in the order they appear in the URL.
    key: &'static [&'static str],
    /// Columns of the table (other set fields go to "details").
    pub columns: &'static [&'static str],
}

pub const INTERFACES: Kind = Kind {
    path: "interfaces",
    key: &["name"],
    columns: &[
        "id",
        "name",
        "kind",
        "network",
        "mac",
        "addresses",
        "mtu",
        "peer_mac",
        "peer_addresses",
        "link",
    ],
};
pub const NETWORKS: Kind = Kind {
    path: "networks",
    key: &["name"],
    columns: &["id", "name", "vni", "gateways", "flood"],
};
pub const TUNNELS: Kind = Kind {
    path: "tunnels",
    key: &["name"],
    columns: &["name", "underlay", "remote", "remote_mac", "local"],
};
pub const NEXTHOPS: Kind = Kind {
    path: "nexthops",
    key: &["name"],
    columns: &["id", "name", "kind"],
};
pub const ROUTES: Kind = Kind {
    path: "routes",
    key: &["network", "prefix"],
    columns: &["network", "prefix", "nexthop"],
};
pub const BRIDGE: Kind = Kind {
    path: "bridge",
    key: &["network", "mac"],
    columns: &["network", "mac", "nexthop"],
};
pub const LABELS: Kind = Kind {
    path: "labels",
    key: &["label"],
    columns: &["label", "nexthop"],
};

/// Fields given as comma-separated lists, and those that are numbers or booleans.
const LISTS: &[&str] = &[
    "addresses",
    "peer_addresses",
    "gateways",
    "flood",
    "members",
];
const NUMBERS: &[&str] = &["vni", "label", "mtu"];
const BOOLS: &[&str] = &["policy", "admin_up"];

/// The URL of one object from its key as typed.
fn object_path(k: &Kind, key: &[String]) -> Result<String, String> {
    if key.len() != k.key.len() {
        return Err(format!(
            "{} are named by {}",
            k.path,
            k.key.join(" ").to_uppercase()
        ));
    }
    let mut p = format!("/api/v1/{}", k.path);
    for (field, v) in k.key.iter().zip(key) {
        if *field == "prefix" {
            let (a, l) = v
                .split_once('/')
                .ok_or_else(|| format!("'{v}' is not a prefix (like 10.1.0.0/16)"))?;
            p += &format!("/{}/{}", seg(a), seg(l));
        } else {
            p += &format!("/{}", seg(v));
        }
    }
    Ok(p)
}

/// field=value pairs (or one JSON object) as a JSON object.
fn object(fields: &[String]) -> Result<Value, String> {
    if let [one] = fields
        && one.trim_start().starts_with('{')
    {
        return serde_json::from_str(one).map_err(|e| format!("not a JSON object: {e}"));
    }
    let mut m = Map::new();
    for f in fields {
        let (k, v) = f
            .split_once('=')
            .ok_or_else(|| format!("'{f}': give field=value"))?;
        let value = if LISTS.contains(&k) {
            Value::Array(
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| Value::String(s.into()))
                    .collect(),
            )
        } else if NUMBERS.contains(&k) || BOOLS.contains(&k) {
            serde_json::from_str(v).map_err(|_| {
                format!(
                    "{k}: '{v}' is not a {}",
                    if NUMBERS.contains(&k) {
                        "number"
                    } else {
                        "boolean"
                    }
                )
            })?
        } else if v.starts_with('[') || v.starts_with('{') {
            serde_json::from_str(v).map_err(|e| format!("{k}: {e}"))?
        } else {
            Value::String(v.into())
        };
        m.insert(k.to_string(), value);
    }
    Ok(Value::Object(m))
}

/// Exit statuses, one per kind of failure (clap's usage errors exit with 2).
pub mod exit {
    /// Anything else: a refused request (its message and field printed), a file that
    /// cannot be read, a --socket that is not a socket.
    pub const FAILED: u8 = 1;
    /// The command line cannot be what was meant: clap's parse errors, and arguments
    /// checked by hand (a key of the wrong shape, field=value without '=', rules that
    /// are not JSON, options that exclude each other).
    pub const USAGE: u8 = 2;
    /// Nothing listens on the API socket.
    pub const NOT_RUNNING: u8 = 3;
    /// The API socket is not accessible to this user.
    pub const PERMISSION_DENIED: u8 = 4;
    /// The object does not exist (the API answered 404).
    pub const NOT_FOUND: u8 = 5;
    /// ovrd is running but its forwarding worker did not answer (503).
    pub const UNAVAILABLE: u8 = 6;
    /// The command did what it was asked and found something wrong: `cluster status`
    /// with keys that hosts rejected or that no agent would accept.
    pub const UNHEALTHY: u8 = 7;
}

/// Why a command failed: a one-line message and the exit status that says which kind.
#[derive(Debug)]
pub struct Failure {
    pub status: u8,
    pub message: String,
}

impl Failure {
    /// A usage error (exit status 2).
    pub fn usage(message: String) -> Self {
        Failure {
            status: exit::USAGE,
            message,
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure {
            status: exit::FAILED,
            message,
        }
    }
}

/// `http://ADDR:PORT` (a trailing `/` allowed) to `ADDR:PORT`.
fn parse_url(u: &str) -> Result<String, String> {
    let rest = u.strip_prefix("http://").ok_or_else(|| {
        "give http://ADDR:PORT (ovrctl speaks plain HTTP; for TLS, go through the proxy in front of ovrd from its host)".to_string()
    })?;
    let addr = rest.strip_suffix('/').unwrap_or(rest);
    if addr.is_empty() || addr.contains('/') || !addr.contains(':') {
        return Err("give http://ADDR:PORT, with no path".into());
    }
    Ok(addr.to_string())
}

impl Conn {
    fn endpoint(&self) -> Result<http::Endpoint, Failure> {
        let Some(addr) = &self.url else {
            return Ok(http::Endpoint::Unix(self.socket.clone()));
        };
        let token = self
            .token_file
            .as_ref()
            .map(|f| {
                std::fs::read_to_string(f)
                    .map(|t| t.trim().to_string())
                    .map_err(|e| Failure {
                        status: exit::PERMISSION_DENIED,
                        message: format!("{}: {e}", f.display()),
                    })
            })
            .transpose()?;
        Ok(http::Endpoint::Tcp {
            addr: addr.clone(),
            token,
        })
    }
}

/// Sends a request; an API error becomes the message ovrctl prints.
fn call(c: &Conn, method: &str, path: &str, body: Option<&Value>) -> Result<Value, Failure> {
    let bytes = body.map(|b| b.to_string().into_bytes());
    let r =
        http::request_to(&c.endpoint()?, method, path, bytes.as_deref()).map_err(|e| Failure {
            status: match e {
                http::ClientError::NotRunning(_) => exit::NOT_RUNNING,
                http::ClientError::Denied(_) => exit::PERMISSION_DENIED,
                _ => exit::FAILED,
            },
            message: e.to_string(),
        })?;
    http::answer(r).map_err(|f| Failure {
        status: match f.status {
            404 => exit::NOT_FOUND,
            401 => exit::PERMISSION_DENIED,
            503 => exit::UNAVAILABLE,
            _ => exit::FAILED,
        },
        message: f.to_string(),
    })
}

fn print(c: &Conn, v: &Value, human: impl FnOnce(&Value)) {
    print_as(c.json, v, human);
}

/// An answer on stdout: pretty JSON for scripts, or `human` for people.
pub fn print_as(json: bool, v: &Value, human: impl FnOnce(&Value)) {
    if json {
        outln!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
    } else {
        human(v);
    }
}

/// Adds the table id to objects of kinds that have one (shown in the tables).
fn with_ids<'a>(
    c: &Conn,
    k: &Kind,
    objects: impl Iterator<Item = &'a mut Value>,
) -> Result<(), Failure> {
    if !k.columns.contains(&"id") {
        return Ok(());
    }
    let ids = call(c, "GET", "/api/v1/ids", None)?;
    for o in objects {
        let id = o["name"]
            .as_str()
            .map(|n| ids[k.path][n].clone())
            .unwrap_or(Value::Null);
        if let Some(m) = o.as_object_mut() {
            m.insert("id".into(), id);
        }
    }
    Ok(())
}

/// Adds the link's state to interfaces that have a peer of their own (memif): "up
/// (peer name, its interface)" or "down (why)". An ovrd without links says nothing.
fn with_links<'a>(c: &Conn, objects: impl Iterator<Item = &'a mut Value>) {
    let Ok(links) = call(c, "GET", "/api/v1/links", None) else {
        return;
    };
    let links = links.as_array().cloned().unwrap_or_default();
    for o in objects {
        let Some(l) = links.iter().find(|l| l["name"] == o["name"]) else {
            continue;
        };
        let state = l["state"].as_str().unwrap_or("?");
        let text = if state == "up" {
            format!(
                "up ({} {}, memif {})",
                l["peer_name"].as_str().unwrap_or(""),
                l["peer_interface"].as_str().unwrap_or(""),
                l["version"].as_str().unwrap_or("")
            )
        } else {
            match l["last_reason"].as_str() {
                Some(r) if !r.is_empty() => format!("{state} ({r})"),
                _ => state.to_string(),
            }
        };
        if let Some(m) = o.as_object_mut() {
            m.insert("link".into(), Value::String(text));
        }
    }
}

pub fn objects(k: &Kind, action: Option<Objects>, c: &Conn) -> Result<(), Failure> {
    let base = format!("/api/v1/{}", k.path);
    match action.unwrap_or(Objects::List) {
        Objects::List => {
            let mut v = call(c, "GET", &base, None)?;
            if !c.json {
                with_ids(c, k, v.as_array_mut().into_iter().flatten())?;
                if k.path == INTERFACES.path {
                    with_links(c, v.as_array_mut().into_iter().flatten());
                }
            }
            print(c, &v, |v| show::table(k.columns, v));
        }
        Objects::Show { key } => {
            let mut v = call(
                c,
                "GET",
                &object_path(k, &key).map_err(Failure::usage)?,
                None,
            )?;
            if !c.json {
                with_ids(c, k, std::iter::once(&mut v))?;
            }
            print(c, &v, show::object);
        }
        Objects::Add { fields } => {
            let body = object(&fields).map_err(Failure::usage)?;
            let v = call(c, "POST", &base, Some(&body))?;
            print(c, &v, show::applied);
        }
        Objects::Set { fields } => {
            let o = object(&fields).map_err(Failure::usage)?;
            let key: Vec<String> = k
                .key
                .iter()
                .map(|f| match &o[*f] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    other => other.to_string(),
                })
                .collect();
            let path = object_path(k, &key).map_err(Failure::usage)?;
            let v = call(c, "PUT", &path, Some(&o))?;
            print(c, &v, show::applied);
        }
        Objects::Del { key } => {
            let path = object_path(k, &key).map_err(Failure::usage)?;
            let v = call(c, "DELETE", &path, None)?;
            print(c, &v, show::applied);
        }
    }
    Ok(())
}

pub fn policies(action: Option<Policies>, c: &Conn) -> Result<(), Failure> {
    match action.unwrap_or(Policies::List) {
        Policies::List => {
            let v = call(c, "GET", "/api/v1/policies", None)?;
            print(c, &v, show::policies);
        }
        Policies::Show { network } => {
            let v = call(
                c,
                "GET",
                &format!("/api/v1/policies/{}", seg(&network)),
                None,
            )?;
            print(c, &v, |v| show::policies(&Value::Array(vec![v.clone()])));
        }
        Policies::Set { network, rules } => {
            let rules: Value = serde_json::from_str(&rules)
                .map_err(|e| Failure::usage(format!("rules: not JSON: {e}")))?;
            let body = serde_json::json!({ "rules": rules });
            let v = call(
                c,
                "PUT",
                &format!("/api/v1/policies/{}", seg(&network)),
                Some(&body),
            )?;
            print(c, &v, show::applied);
        }
        Policies::Del { network } => {
            let v = call(
                c,
                "DELETE",
                &format!("/api/v1/policies/{}", seg(&network)),
                None,
            )?;
            print(c, &v, show::applied);
        }
    }
    Ok(())
}

pub fn flows(f: &FlowArgs, c: &Conn) -> Result<(), Failure> {
    let mut q = Vec::new();
    if let Some(n) = &f.network {
        q.push(format!("network={}", seg(n)));
    }
    if let Some(v) = f.vrf {
        q.push(format!("vrf={v}"));
    }
    if let Some(a) = &f.addr {
        q.push(format!("addr={}", seg(a)));
    }
    if let Some(p) = f.port {
        q.push(format!("port={p}"));
    }
    if f.delete {
        let path = format!("/api/v1/flows?{}", q.join("&"));
        let v = call(c, "DELETE", &path, None)?;
        print(c, &v, |v| outln!("{} flow entries removed", v["removed"]));
        return Ok(());
    }
    q.push(format!("limit={}", f.limit));
    let v = call(c, "GET", &format!("/api/v1/flows?{}", q.join("&")), None)?;
    print(c, &v, show::flows);
    Ok(())
}

pub fn counters(c: &Conn) -> Result<(), Failure> {
    let v = call(c, "GET", "/api/v1/counters", None)?;
    print(c, &v, show::counters);
    Ok(())
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum Bgp {
    /// The speaker's neighbors: session state, routes received and advertised.
    Neighbors,
    /// EVPN routes: out (this host's) and in (learnt; refused ones with the reason).
    Routes,
    /// What of the learnt routes is installed: the remote VTEPs and their underlay MACs
    /// (unresolved ones with the reason), with --json also entries, skips and refusals.
    Installed,
    /// The bridge entries and host routes learnt (EVPN type 2), each with its next hop
    /// and whether it is installed (a configured entry with the same key wins).
    Learnt,
}

pub fn bgp(what: Bgp, c: &Conn) -> Result<(), Failure> {
    let (path, columns): (&str, &[&str]) = match what {
        Bgp::Installed => {
            let v = call(c, "GET", "/api/v1/bgp/installed", None)?;
            print(c, &v, |v| {
                outln!("source: {}", v["source"].as_str().unwrap_or("?"));
                show::table(&["vtep", "state", "mac", "reason"], &v["vteps"]);
            });
            return Ok(());
        }
        Bgp::Learnt => {
            let v = call(c, "GET", "/api/v1/bgp/learnt", None)?;
            print(c, &v, |v| {
                show::table(&["network", "mac", "nexthop", "installed"], &v["bridge"]);
                show::table(&["network", "prefix", "nexthop", "installed"], &v["routes"]);
            });
            return Ok(());
        }
        Bgp::Neighbors => (
            "/api/v1/bgp/neighbors",
            &["address", "asn", "state", "received", "advertised"],
        ),
        Bgp::Routes => (
            "/api/v1/bgp/routes",
            &[
                "direction",
                "neighbor",
                "type",
                "rd",
                "mac",
                "ip",
                "prefix",
                "label",
                "next_hop",
                "route_targets",
                "refused",
            ],
        ),
    };
    let v = call(c, "GET", path, None)?;
    print(c, &v, |v| show::table(columns, v));
    Ok(())
}

pub fn dropstats(c: &Conn) -> Result<(), Failure> {
    let v = call(c, "GET", "/api/v1/counters/drops", None)?;
    print(c, &v, show::drops);
    Ok(())
}

/// Applies a file of changes ({"changes": [...]}) all-or-nothing. The file is read as
/// configuration files are (at most 64 MiB, not empty).
pub fn batch(file: &std::path::Path, c: &Conn) -> Result<(), Failure> {
    let text =
        ovr_config::read_text(file, Some(ovr_config::MAX_FILE_BYTES)).map_err(|e| e.to_string())?;
    let body: Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    let v = call(c, "POST", "/api/v1/batch", Some(&body))?;
    print(c, &v, show::applied);
    Ok(())
}

/// The whole desired configuration.
pub fn config(c: &Conn) -> Result<(), Failure> {
    let v = call(c, "GET", "/api/v1/config", None)?;
    outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    Ok(())
}

/// Which table id each name has.
pub fn ids(c: &Conn) -> Result<(), Failure> {
    let v = call(c, "GET", "/api/v1/ids", None)?;
    outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_become_paths() {
        let k = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            object_path(&ROUTES, &k(&["red", "10.2.0.0/24"])).unwrap(),
            "/api/v1/routes/red/10.2.0.0/24"
        );
        assert_eq!(
            object_path(&NETWORKS, &k(&["a b"])).unwrap(),
            "/api/v1/networks/a%20b"
        );
        assert!(object_path(&ROUTES, &k(&["red"])).is_err());
        assert!(object_path(&ROUTES, &k(&["red", "10.2.0.0"])).is_err());
    }

    #[test]
    fn fields_become_json() {
        let f = |v: &[&str]| object(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let o = f(&[
            "name=b",
            "kind=ecmp",
            "members=x,y",
            "vni=7",
            "admin_up=false",
        ])
        .unwrap();
        assert_eq!(
            o,
            serde_json::json!({"name":"b","kind":"ecmp","members":["x","y"],"vni":7,"admin_up":false})
        );
        assert!(f(&["vni=seven"]).is_err());
        assert!(f(&["novalue"]).is_err());
        assert_eq!(f(&[r#"{"label":5}"#]).unwrap()["label"], 5);
    }
}
