//! Writing intent (networks, policies, ports, services, chains) as every writer does it: `ovrctl cluster`,
//! any ovrd's REST API (`/api/v1/cluster/...`) and, through ovrd, the CNI plugin. A
//! value is checked as the agents check it (`model::parse`) before anything is
//! written, created only if absent (an etcd transaction) unless replacing, and listed
//! back as one object per key with the names its key holds.

use crate::etcd::Etcd;
use crate::keys::{Key, PREFIX};
use crate::model;
use crate::store::{Kv, Store, StoreError};
use serde_json::{Map, Value};

/// Why an intent request did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntentError {
    /// The key or value is one the agents would refuse: the message names the field.
    #[error("{0}")]
    Invalid(String),
    /// Create-only, and the key exists.
    #[error("{0} exists: nothing written")]
    Exists(String),
    #[error("not found: {0}")]
    NotFound(String),
    /// etcd did not answer, or refused the request.
    #[error("etcd: {0}")]
    Unavailable(String),
}

impl From<StoreError> for IntentError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(m) => IntentError::Unavailable(m),
            other => IntentError::Unavailable(other.to_string()),
        }
    }
}

/// The kinds of intent (what operators and tools write; hosts and endpoints are the
/// agents' own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Network,
    Policy,
    Port,
    Service,
    Chain,
}

impl Kind {
    /// The prefix of this kind's keys (`host` narrows ports to one host's).
    pub fn prefix(self, host: Option<&str>) -> String {
        match (self, host) {
            (Kind::Network, _) => format!("{PREFIX}networks/"),
            (Kind::Policy, _) => format!("{PREFIX}policies/"),
            (Kind::Port, None) => format!("{PREFIX}ports/"),
            (Kind::Port, Some(h)) => format!("{PREFIX}ports/{h}/"),
            (Kind::Service, _) => format!("{PREFIX}services/"),
            (Kind::Chain, _) => format!("{PREFIX}chains/"),
        }
    }

    /// The key of one object (`host` is needed for ports, ignored otherwise).
    pub fn key(self, host: &str, name: &str) -> Key {
        match self {
            Kind::Network => Key::Network(name.to_string()),
            Kind::Policy => Key::Policy(name.to_string()),
            Kind::Service => Key::Service(name.to_string()),
            Kind::Chain => Key::Chain(name.to_string()),
            Kind::Port => Key::Port {
                host: host.to_string(),
                name: name.to_string(),
            },
        }
    }
}

/// The bytes to write for `value` at `key`, or why every agent would refuse them
/// (`KEY: field: reason`).
pub fn check(key: &Key, value: &Value) -> Result<Vec<u8>, String> {
    let text = key.to_string();
    let bytes = value.to_string().into_bytes();
    Key::parse(&text)
        .and_then(|_| model::parse(key, &bytes))
        .map_err(|e| format!("{text}: {e}"))?;
    Ok(bytes)
}

/// A key and its value as one object: the names in the key ("name", and "host" for
/// ports and endpoints), the value's fields as stored, and "key" with "error" when the
/// value (or the key) is one the agents refuse.
pub fn object(kv: &Kv) -> Value {
    let mut o = Map::new();
    match serde_json::from_slice(&kv.value) {
        Ok(Value::Object(fields)) => o.extend(fields),
        // Not an object: shown as the text it is.
        _ => {
            o.insert("value".into(), String::from_utf8_lossy(&kv.value).into());
        }
    }
    let checked = Key::parse(&kv.key).and_then(|k| {
        match &k {
            Key::Network(n) | Key::Policy(n) | Key::Host(n) | Key::Service(n) | Key::Chain(n) => {
                o.insert("name".into(), n.as_str().into());
            }
            Key::Port { host, name } | Key::Endpoint { host, name } => {
                o.insert("host".into(), host.as_str().into());
                o.insert("name".into(), name.as_str().into());
            }
        }
        model::parse(&k, &kv.value)
    });
    if let Err(e) = checked {
        o.insert("key".into(), kv.key.as_str().into());
        o.insert("error".into(), e.into());
    }
    Value::Object(o)
}

/// Intent in etcd, read and written with the checks above.
#[derive(Clone)]
pub struct Intents {
    db: Etcd,
}

impl Intents {
    pub fn new(db: Etcd) -> Self {
        Self { db }
    }

    /// The etcd client underneath (for other writers on the same connection).
    pub fn etcd(&self) -> &Etcd {
        &self.db
    }

    /// Every key under `prefix` and the revision they are as of.
    pub async fn kvs(&self, prefix: &str) -> Result<(i64, Vec<Kv>), IntentError> {
        let s = self.db.list(prefix).await?;
        Ok((s.revision, s.kvs))
    }

    /// Every object of a kind (ports: of one host, or all), as [`object`]s.
    pub async fn list(&self, kind: Kind, host: Option<&str>) -> Result<Vec<Value>, IntentError> {
        let (_, kvs) = self.kvs(&kind.prefix(host)).await?;
        Ok(kvs.iter().map(object).collect())
    }

    /// One object, as [`object`].
    pub async fn get(&self, key: &Key) -> Result<Value, IntentError> {
        let k = key.to_string();
        let (_, kvs) = self.kvs(&k).await?;
        kvs.iter()
            .find(|kv| kv.key == k)
            .map(object)
            .ok_or(IntentError::NotFound(k))
    }

    /// Writes a checked value: created only if the key is absent, unless `replace`.
    /// Returns the revision written at.
    pub async fn write(&self, key: &Key, value: &Value, replace: bool) -> Result<i64, IntentError> {
        let bytes = check(key, value).map_err(IntentError::Invalid)?;
        let k = key.to_string();
        if replace {
            Ok(self.db.replace(&k, bytes).await?)
        } else {
            self.db
                .create(&k, bytes)
                .await?
                .ok_or(IntentError::Exists(k))
        }
    }

    /// Deletes a key: the revision deleted at.
    pub async fn delete(&self, key: &Key) -> Result<i64, IntentError> {
        let k = key.to_string();
        self.db.remove(&k).await?.ok_or(IntentError::NotFound(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_is_checked_as_the_agents_check_it() {
        let k = Kind::Network.key("", "red");
        assert!(check(&k, &json!({"vni": 100})).is_ok());
        let e = check(&k, &json!({"vni": 0})).unwrap_err();
        assert!(e.starts_with("/ovr/v1/networks/red: vni"), "{e}");
        let e = check(&Kind::Network.key("", "r/d"), &json!({"vni": 1})).unwrap_err();
        assert!(e.contains("not"), "{e}");
        let p = Kind::Port.key("h1", "w1");
        assert_eq!(p.to_string(), "/ovr/v1/ports/h1/w1");
        let e = check(&p, &json!({"network": "red", "mac": "02:00:00:00:00:01"})).unwrap_err();
        assert!(e.contains("interface"), "{e}");
    }

    #[test]
    fn an_object_carries_its_key_names_and_any_refusal() {
        let kv = |key: &str, value: &str| Kv {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            create_revision: 1,
            mod_revision: 1,
            lease: 0,
        };
        let o = object(&kv("/ovr/v1/networks/red", r#"{"vni":7}"#));
        assert_eq!(o, json!({"name": "red", "vni": 7}));
        let o = object(&kv(
            "/ovr/v1/ports/h1/w1",
            r#"{"network":"red","mac":"02:00:00:00:00:01","interface":"v1"}"#,
        ));
        assert_eq!((&o["host"], &o["name"]), (&json!("h1"), &json!("w1")));
        assert!(o.get("error").is_none());
        let o = object(&kv("/ovr/v1/networks/bad", "nope"));
        assert_eq!(o["value"], "nope");
        assert_eq!(o["key"], "/ovr/v1/networks/bad");
        assert!(o["error"].is_string());
        assert_eq!(Kind::Port.prefix(Some("h2")), "/ovr/v1/ports/h2/");
    }
}
