//! What a call is: the command and its `CNI_*` variables, and the network configuration
//! on stdin, turned into one checked [`Call`] before anything is changed.

use crate::error::{self, CniError, code};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The versions of the specification this plugin speaks.
pub const SUPPORTED: &[&str] = &["0.4.0", "1.0.0", "1.1.0"];

/// The socket of ovrd's API when the configuration gives none.
pub const DEFAULT_SOCKET: &str = "/run/ovr/ovrd.sock";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

impl Command {
    pub fn parse(s: &str) -> Result<Self, CniError> {
        Ok(match s {
            "ADD" => Command::Add,
            "DEL" => Command::Del,
            "CHECK" => Command::Check,
            "STATUS" => Command::Status,
            "GC" => Command::Gc,
            "VERSION" => Command::Version,
            other => {
                return Err(error::env(format!(
                    "CNI_COMMAND: unknown command '{other}' (ADD, DEL, CHECK, STATUS, GC, VERSION)"
                )));
            }
        })
    }

    /// The lowest configuration version that has the command.
    fn since(self) -> &'static str {
        match self {
            Command::Check => "0.4.0",
            Command::Status | Command::Gc => "1.1.0",
            _ => "0.1.0",
        }
    }
}

/// A version as numbers, for comparison; `None` if it does not parse.
pub fn version(v: &str) -> Option<(u32, u32, u32)> {
    let mut p = v.split('.').map(|n| n.parse::<u32>().ok());
    let r = (p.next()??, p.next()??, p.next()??);
    p.next().is_none().then_some(r)
}

/// `runtimeConfig`: what the runtime asks for through the capabilities we declare.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RuntimeConfig {
    /// Capability `mac`.
    #[serde(default)]
    pub mac: Option<String>,
    /// Capability `ips`: addresses with or without a prefix length.
    #[serde(default)]
    pub ips: Vec<String>,
}

/// `police`: `{"packetsPerSecond": N, "burst": B}` (burst optional).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Police {
    pub packets_per_second: u32,
    #[serde(default)]
    pub burst: Option<u32>,
}

/// One attachment GC must keep.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Attachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

/// The network configuration (one plugin's part of a conflist, with `name` and
/// `cniVersion` from the list). Unknown fields are allowed, as the spec wants.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    pub cni_version: String,
    pub name: String,
    /// The ovr network to join.
    #[serde(default)]
    pub network: String,
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// The container interface's MTU (default: what the underlay leaves after
    /// encapsulation).
    #[serde(default)]
    pub mtu: Option<u32>,
    #[serde(default)]
    pub ipam: Option<Value>,
    #[serde(default)]
    pub prev_result: Option<Value>,
    #[serde(default)]
    pub runtime_config: RuntimeConfig,
    /// A packet-rate policer on every container interface of this network (the port's
    /// `police`): frames the container sends over the rate are dropped by ovr.
    #[serde(default)]
    pub police: Option<Police>,
    /// GC: what to keep.
    #[serde(default, rename = "cni.dev/valid-attachments")]
    pub valid_attachments: Option<Vec<Attachment>>,
}

fn default_socket() -> PathBuf {
    DEFAULT_SOCKET.into()
}

impl NetConf {
    /// The IPAM plugin's type, if any.
    pub fn ipam_type(&self) -> Option<&str> {
        self.ipam.as_ref()?.get("type")?.as_str()
    }
}

/// One call: the command, its environment and configuration, checked.
#[derive(Debug, Clone)]
pub struct Call {
    pub command: Command,
    pub container_id: String,
    pub netns: Option<PathBuf>,
    pub ifname: String,
    /// CNI_ARGS as pairs.
    pub args: BTreeMap<String, String>,
    pub path: Vec<PathBuf>,
    pub conf: NetConf,
    /// The configuration as it came (what delegated IPAM plugins read).
    pub raw: Vec<u8>,
}

/// Parses `CNI_ARGS` (`K=V;K=V`). Pairs other than the ones we know are refused unless
/// `IgnoreUnknown` is true, as the spec's conventions say.
pub fn parse_args(s: &str) -> Result<BTreeMap<String, String>, CniError> {
    const KNOWN: &[&str] = &[
        "IgnoreUnknown",
        "K8S_POD_NAMESPACE",
        "K8S_POD_NAME",
        "K8S_POD_INFRA_CONTAINER_ID",
        "K8S_POD_UID",
    ];
    let mut m = BTreeMap::new();
    for pair in s.split(';').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| error::env(format!("CNI_ARGS: '{pair}' is not KEY=VALUE")))?;
        m.insert(k.to_string(), v.to_string());
    }
    let ignore = m
        .get("IgnoreUnknown")
        .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "1" | "true"));
    if !ignore && let Some(k) = m.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(error::env(format!(
            "CNI_ARGS: unknown argument '{k}' (give IgnoreUnknown=1 to ignore it)"
        )));
    }
    Ok(m)
}

/// A container id as the spec allows it: not empty, letters, digits, `_ . -`.
fn check_container_id(id: &str) -> Result<(), CniError> {
    let ok = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(error::env(format!(
            "CNI_CONTAINERID: '{id}' is not a container id (letters, digits, '_', '.', '-')"
        )))
    }
}

/// An interface name the kernel takes: 1 to 15 bytes, not `.` or `..`, no `/`, `:` or
/// white space.
pub fn check_ifname(n: &str) -> Result<(), CniError> {
    let ok = !n.is_empty()
        && n.len() <= 15
        && n != "."
        && n != ".."
        && !n.chars().any(|c| c == '/' || c == ':' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(error::env(format!(
            "CNI_IFNAME: '{n}' is not an interface name (1 to 15 characters, no '/', ':' or spaces)"
        )))
    }
}

/// Parses the configuration and checks that its version allows the command.
pub fn netconf(command: Command, raw: &[u8]) -> Result<NetConf, CniError> {
    let v: Value = serde_json::from_slice(raw).map_err(|e| {
        CniError::new(
            code::DECODING_FAILURE,
            format!("the network configuration is not JSON: {e}"),
        )
    })?;
    let conf: NetConf = serde_json::from_value(v)
        .map_err(|e| error::config(format!("network configuration: {e}")))?;
    let Some(want) = version(&conf.cni_version) else {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!("cniVersion '{}' is not a version", conf.cni_version),
        ));
    };
    if !SUPPORTED.contains(&conf.cni_version.as_str()) {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "cniVersion {} is not supported (this plugin speaks {})",
                conf.cni_version,
                SUPPORTED.join(", ")
            ),
        ));
    }
    if version(command.since()).is_some_and(|s| want < s) {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "{command:?} needs cniVersion {} or later (the configuration has {})",
                command.since(),
                conf.cni_version
            ),
        ));
    }
    if conf.name.is_empty() {
        return Err(error::config("name: a network configuration needs a name"));
    }
    if command != Command::Version && conf.network.is_empty() {
        return Err(error::config(
            "network: the ovr network to join is missing (\"network\": \"NAME\")",
        ));
    }
    if !conf.network.is_empty() && !valid_name(&conf.network) {
        return Err(error::config(format!(
            "network: '{}' is not an ovr network name (1 to 63 of A-Z a-z 0-9 . _ -)",
            conf.network
        )));
    }
    if let Some(m) = conf.mtu
        && !(68..=65535).contains(&m)
    {
        return Err(error::config(format!(
            "mtu: {m} is not an MTU (68 to 65535)"
        )));
    }
    if let Some(p) = conf.police
        && (p.packets_per_second == 0 || p.burst == Some(0))
    {
        return Err(error::config(
            "police: packetsPerSecond and burst are at least 1 (leave \"police\" out for no limit)",
        ));
    }
    if let Some(ipam) = &conf.ipam
        && ipam.get("type").and_then(Value::as_str).is_none()
    {
        return Err(error::config("ipam: needs a \"type\""));
    }
    Ok(conf)
}

/// A name of the cluster (network, port): 1 to 63 of `A-Za-z0-9._-`.
pub fn valid_name(n: &str) -> bool {
    (1..=63).contains(&n.len())
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The whole call from the environment (`get`) and stdin. VERSION needs neither the
/// environment nor the configuration; STATUS and GC only the configuration.
pub fn call(
    get: &dyn Fn(&str) -> Option<String>,
    command: Command,
    raw: Vec<u8>,
) -> Result<Call, CniError> {
    let conf = netconf(command, &raw)?;
    let need = |k: &str| {
        get(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| error::env(format!("{k} is missing")))
    };
    let per_container = matches!(command, Command::Add | Command::Del | Command::Check);
    let (container_id, ifname) = if per_container {
        let id = need("CNI_CONTAINERID")?;
        check_container_id(&id)?;
        let ifname = need("CNI_IFNAME")?;
        check_ifname(&ifname)?;
        (id, ifname)
    } else {
        (String::new(), String::new())
    };
    // DEL may come with no namespace (it is gone): only the rest is cleaned up.
    let netns = match command {
        Command::Add | Command::Check => Some(PathBuf::from(need("CNI_NETNS")?)),
        Command::Del => get("CNI_NETNS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
        _ => None,
    };
    let args = parse_args(&get("CNI_ARGS").unwrap_or_default())?;
    let path = get("CNI_PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect();
    Ok(Call {
        command,
        container_id,
        netns,
        ifname,
        args,
        path,
        conf,
        raw,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    const CONF: &str = r#"{"cniVersion":"1.0.0","name":"red-net","type":"ovr-cni","network":"red",
        "mtu":1400,"ipam":{"type":"ovr"},"dns":{},"runtimeConfig":{"mac":"02:00:00:00:00:09","ips":["10.1.0.9/24"]}}"#;

    #[test]
    fn a_configuration_parses_with_defaults_and_unknown_fields() {
        let c = netconf(Command::Add, CONF.as_bytes()).unwrap();
        assert_eq!((c.network.as_str(), c.mtu), ("red", Some(1400)));
        assert_eq!(c.socket, PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(c.ipam_type(), Some("ovr"));
        assert_eq!(c.runtime_config.mac.as_deref(), Some("02:00:00:00:00:09"));
        assert_eq!(c.runtime_config.ips, ["10.1.0.9/24"]);
        assert_eq!(c.police, None);
        let policed = CONF.replace(
            r#""mtu":1400,"#,
            r#""mtu":1400,"police":{"packetsPerSecond":20000},"#,
        );
        let c = netconf(Command::Add, policed.as_bytes()).unwrap();
        assert_eq!(
            c.police,
            Some(Police {
                packets_per_second: 20000,
                burst: None
            })
        );
        let gc = r#"{"cniVersion":"1.1.0","name":"n","type":"ovr-cni","network":"red",
            "cni.dev/valid-attachments":[{"containerID":"c1","ifname":"eth0"}]}"#;
        let c = netconf(Command::Gc, gc.as_bytes()).unwrap();
        assert_eq!(
            c.valid_attachments.unwrap(),
            [Attachment {
                container_id: "c1".into(),
                ifname: "eth0".into()
            }]
        );
    }

    #[test]
    fn bad_configurations_get_the_specs_codes() {
        let code_of = |cmd, s: &str| netconf(cmd, s.as_bytes()).unwrap_err().code;
        assert_eq!(code_of(Command::Add, "{nope"), code::DECODING_FAILURE);
        let base = r#"{"cniVersion":"1.0.0","name":"n","type":"ovr-cni""#;
        assert_eq!(
            code_of(Command::Add, &format!("{base}}}")),
            code::INVALID_CONFIG
        );
        assert_eq!(
            code_of(Command::Add, &format!(r#"{base},"network":"a/b"}}"#)),
            code::INVALID_CONFIG
        );
        assert_eq!(
            code_of(Command::Add, &format!(r#"{base},"network":"r","mtu":20}}"#)),
            code::INVALID_CONFIG
        );
        assert_eq!(
            code_of(
                Command::Add,
                &format!(r#"{base},"network":"r","ipam":{{}}}}"#)
            ),
            code::INVALID_CONFIG
        );
        for police in [
            r#"{"packetsPerSecond":0}"#,
            r#"{"packetsPerSecond":10,"burst":0}"#,
            r#"{"pps":10}"#,
        ] {
            assert_eq!(
                code_of(
                    Command::Add,
                    &format!(r#"{base},"network":"r","police":{police}}}"#)
                ),
                code::INVALID_CONFIG,
                "{police}"
            );
        }
        assert_eq!(
            code_of(
                Command::Add,
                r#"{"name":"n","type":"ovr-cni","network":"r"}"#
            ),
            code::INVALID_CONFIG
        );
        let v = |ver: &str| {
            format!(r#"{{"cniVersion":"{ver}","name":"n","type":"ovr-cni","network":"r"}}"#)
        };
        assert_eq!(
            code_of(Command::Add, &v("2.0.0")),
            code::INCOMPATIBLE_VERSION
        );
        assert_eq!(
            code_of(Command::Add, &v("0.3.1")),
            code::INCOMPATIBLE_VERSION
        );
        // GC and STATUS came with 1.1.0.
        assert_eq!(
            code_of(Command::Gc, &v("1.0.0")),
            code::INCOMPATIBLE_VERSION
        );
        assert_eq!(
            code_of(Command::Status, &v("1.0.0")),
            code::INCOMPATIBLE_VERSION
        );
        assert!(netconf(Command::Check, v("0.4.0").as_bytes()).is_ok());
    }

    #[test]
    fn the_environment_is_checked_before_anything() {
        let ok = [
            ("CNI_CONTAINERID", "abc123"),
            ("CNI_NETNS", "/var/run/netns/x"),
            ("CNI_IFNAME", "eth0"),
            (
                "CNI_ARGS",
                "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;FOO=bar",
            ),
            ("CNI_PATH", "/usr/lib/cni:/opt/cni/bin"),
        ];
        let c = call(&env(&ok), Command::Add, CONF.as_bytes().to_vec()).unwrap();
        assert_eq!(c.args["K8S_POD_NAME"], "p");
        assert_eq!(c.path.len(), 2);
        let without = |k: &str| {
            let e: Vec<_> = ok.iter().copied().filter(|(n, _)| *n != k).collect();
            call(&env(&e), Command::Add, CONF.as_bytes().to_vec()).unwrap_err()
        };
        for k in ["CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"] {
            let e = without(k);
            assert_eq!(e.code, code::INVALID_ENVIRONMENT, "{k}");
            assert!(e.msg.contains(k), "{e}");
        }
        // DEL without a namespace is fine (it may be gone).
        let e: Vec<_> = ok
            .iter()
            .copied()
            .filter(|(n, _)| *n != "CNI_NETNS")
            .collect();
        assert!(
            call(&env(&e), Command::Del, CONF.as_bytes().to_vec())
                .unwrap()
                .netns
                .is_none()
        );
        let mut bad = ok;
        bad[2] = ("CNI_IFNAME", "a-name-far-too-long");
        let e = call(&env(&bad), Command::Add, CONF.as_bytes().to_vec()).unwrap_err();
        assert_eq!(e.code, code::INVALID_ENVIRONMENT);
        bad = ok;
        bad[0] = ("CNI_CONTAINERID", "a/b");
        assert!(call(&env(&bad), Command::Add, CONF.as_bytes().to_vec()).is_err());
        // Unknown CNI_ARGS without IgnoreUnknown.
        assert_eq!(
            parse_args("FOO=1").unwrap_err().code,
            code::INVALID_ENVIRONMENT
        );
        assert!(parse_args("IgnoreUnknown=true;FOO=1").is_ok());
        assert!(parse_args("K8S_POD_NAME=x").is_ok());
        assert!(parse_args("novalue").is_err());
        assert_eq!(
            Command::parse("REMOVE").unwrap_err().code,
            code::INVALID_ENVIRONMENT
        );
    }
}
