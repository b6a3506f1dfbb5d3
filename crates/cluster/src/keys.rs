//! The key layout under `/ovr/v1/` (docs/cluster.md): a key names its object, so that a
//! value never has to repeat its own name and two objects can never claim one name.
//!
//! ```text
//! /ovr/v1/networks/NAME          intent: a network
//! /ovr/v1/policies/NAME          intent: rules for a network
//! /ovr/v1/ports/HOST/NAME        intent: a workload's port on a host
//! /ovr/v1/services/NAME          intent: a network function and its instances
//! /ovr/v1/chains/NAME            intent: an ordered list of functions
//! /ovr/v1/hosts/NAME             published by the host's agent (leased)
//! /ovr/v1/endpoints/HOST/NAME    published by the host's agent (leased): ports up
//! /ovr/status/v1/NAME            the agent's report (leased; not watched by agents)
//! ```

use std::fmt;

/// Everything agents watch.
pub const PREFIX: &str = "/ovr/v1/";
/// Agents' reports (outside `PREFIX`: a report must not wake every agent).
pub const STATUS_PREFIX: &str = "/ovr/status/v1/";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Network(String),
    Policy(String),
    Port { host: String, name: String },
    Service(String),
    Chain(String),
    Host(String),
    Endpoint { host: String, name: String },
}

/// A name in a key: 1 to 63 of a-z, A-Z, 0-9, '-', '_', '.' (what a DNS label, a
/// Kubernetes name or a container id fits in; no '/', which separates key parts).
pub fn check_name(n: &str) -> Result<(), String> {
    if n.is_empty()
        || n.len() > 63
        || !n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(format!(
            "'{n}' is not a name (1 to 63 of a-z, A-Z, 0-9, '-', '_', '.')"
        ));
    }
    Ok(())
}

impl Key {
    /// The key of an etcd key under `PREFIX`, or why it is not one.
    pub fn parse(key: &str) -> Result<Key, String> {
        let rest = key
            .strip_prefix(PREFIX)
            .ok_or_else(|| format!("not under {PREFIX}"))?;
        let parts: Vec<&str> = rest.split('/').collect();
        let k = match parts.as_slice() {
            ["networks", n] => Key::Network(n.to_string()),
            ["policies", n] => Key::Policy(n.to_string()),
            ["hosts", n] => Key::Host(n.to_string()),
            ["services", n] => Key::Service(n.to_string()),
            ["chains", n] => Key::Chain(n.to_string()),
            ["ports", h, n] => Key::Port {
                host: h.to_string(),
                name: n.to_string(),
            },
            ["endpoints", h, n] => Key::Endpoint {
                host: h.to_string(),
                name: n.to_string(),
            },
            _ => {
                return Err(
                    "not a key of the model (networks/N, policies/N, ports/H/N, services/N, chains/N, hosts/N, endpoints/H/N)"
                        .into(),
                );
            }
        };
        for n in k.names() {
            check_name(n)?;
        }
        Ok(k)
    }

    fn names(&self) -> Vec<&str> {
        match self {
            Key::Network(n) | Key::Policy(n) | Key::Host(n) | Key::Service(n) | Key::Chain(n) => {
                vec![n]
            }
            Key::Port { host, name } | Key::Endpoint { host, name } => vec![host, name],
        }
    }

    /// The host a port or endpoint is on.
    pub fn host(&self) -> Option<&str> {
        match self {
            Key::Port { host, .. } | Key::Endpoint { host, .. } | Key::Host(host) => Some(host),
            _ => None,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Network(n) => write!(f, "{PREFIX}networks/{n}"),
            Key::Policy(n) => write!(f, "{PREFIX}policies/{n}"),
            Key::Host(n) => write!(f, "{PREFIX}hosts/{n}"),
            Key::Service(n) => write!(f, "{PREFIX}services/{n}"),
            Key::Chain(n) => write!(f, "{PREFIX}chains/{n}"),
            Key::Port { host, name } => write!(f, "{PREFIX}ports/{host}/{name}"),
            Key::Endpoint { host, name } => write!(f, "{PREFIX}endpoints/{host}/{name}"),
        }
    }
}

/// The key of a host's report.
pub fn status_key(host: &str) -> String {
    format!("{STATUS_PREFIX}{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_strangers_are_refused() {
        for k in [
            Key::Network("red".into()),
            Key::Policy("web".into()),
            Key::Host("h1".into()),
            Key::Service("fw".into()),
            Key::Chain("through-fw".into()),
            Key::Port {
                host: "h1".into(),
                name: "c0ffee".into(),
            },
            Key::Endpoint {
                host: "h2".into(),
                name: "p.1".into(),
            },
        ] {
            assert_eq!(Key::parse(&k.to_string()), Ok(k));
        }
        for bad in [
            "/ovr/v2/networks/red",
            "/ovr/v1/networks/",
            "/ovr/v1/networks/red/x",
            "/ovr/v1/ports/h1",
            "/ovr/v1/routers/r1",
            "/ovr/v1/networks/r d",
        ] {
            assert!(Key::parse(bad).is_err(), "{bad}");
        }
    }
}
