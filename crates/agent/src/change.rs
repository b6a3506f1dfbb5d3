//! Changes to the desired configuration, as the API receives them, applied to the model
//! (`ovr_config::Config`) alone: the tables are the agent's business once the whole new
//! model translates.

use crate::error::ApiError;
use crate::refs::referrer;
use ovr_config::model::*;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// An object of the configuration, tagged with its kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Object {
    Interface(InterfaceConfig),
    Network(NetworkConfig),
    Tunnel(TunnelConfig),
    Nexthop(NextHopConfig),
    Route(RouteConfig),
    Bridge(BridgeConfig),
    Label(LabelConfig),
}

/// What names an object: its name, or for table entries what the table is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Key {
    Interface { name: String },
    Network { name: String },
    Tunnel { name: String },
    Nexthop { name: String },
    Route { network: String, prefix: Prefix },
    Bridge { network: String, mac: Mac },
    Label { label: u32 },
}

/// One change. A batch applies a list of them all-or-nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Adds an object; 409 if one with its key exists.
    Create(Object),
    /// Replaces the object with the same key; 404 if there is none.
    Replace(Object),
    /// Removes an object; 404 if absent, 409 if something still refers to it.
    Delete(Key),
    /// Sets (or with `rules: null`, resets to the default) a network's policy.
    SetPolicy(PolicyChange),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyChange {
    pub network: String,
    /// Ordered rules; null: the default (allow within the network, deny between).
    pub rules: Option<Vec<RuleConfig>>,
}

impl Object {
    pub fn key(&self) -> Key {
        match self {
            Object::Interface(o) => Key::Interface {
                name: o.name.clone(),
            },
            Object::Network(o) => Key::Network {
                name: o.name.clone(),
            },
            Object::Tunnel(o) => Key::Tunnel {
                name: o.name.clone(),
            },
            Object::Nexthop(o) => Key::Nexthop {
                name: o.name.clone(),
            },
            Object::Route(o) => Key::Route {
                network: o.network.clone(),
                prefix: o.prefix,
            },
            Object::Bridge(o) => Key::Bridge {
                network: o.network.clone(),
                mac: o.mac,
            },
            Object::Label(o) => Key::Label { label: o.label },
        }
    }

    /// The field of the body that carries (the first part of) the key.
    pub fn key_field(&self) -> &'static str {
        match self {
            Object::Route(_) | Object::Bridge(_) => "network",
            Object::Label(_) => "label",
            _ => "name",
        }
    }
}

impl Key {
    /// The configuration section objects of this kind live in.
    pub fn section(&self) -> &'static str {
        match self {
            Key::Interface { .. } => "interfaces",
            Key::Network { .. } => "networks",
            Key::Tunnel { .. } => "tunnels",
            Key::Nexthop { .. } => "nexthops",
            Key::Route { .. } => "routes",
            Key::Bridge { .. } => "bridge",
            Key::Label { .. } => "labels",
        }
    }

    /// Where the object is in its section, if it exists.
    pub fn find(&self, c: &Config) -> Option<usize> {
        match self {
            Key::Interface { name } => c.interfaces.iter().position(|o| &o.name == name),
            Key::Network { name } => c.networks.iter().position(|o| &o.name == name),
            Key::Tunnel { name } => c.tunnels.iter().position(|o| &o.name == name),
            Key::Nexthop { name } => c.nexthops.iter().position(|o| &o.name == name),
            Key::Route { network, prefix } => c
                .routes
                .iter()
                .position(|o| &o.network == network && o.prefix == *prefix),
            Key::Bridge { network, mac } => c
                .bridge
                .iter()
                .position(|o| &o.network == network && o.mac == *mac),
            Key::Label { label } => c.labels.iter().position(|o| o.label == *label),
        }
    }
}

impl core::fmt::Display for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Key::Interface { name } => write!(f, "interface '{name}'"),
            Key::Network { name } => write!(f, "network '{name}'"),
            Key::Tunnel { name } => write!(f, "tunnel '{name}'"),
            Key::Nexthop { name } => write!(f, "next hop '{name}'"),
            Key::Route { network, prefix } => write!(f, "route {prefix} in network '{network}'"),
            Key::Bridge { network, mac } => {
                write!(f, "bridge entry {mac} in network '{network}'")
            }
            Key::Label { label } => write!(f, "label {label}"),
        }
    }
}

/// Puts `o` at index `at` of its section (or appends it).
fn put(c: &mut Config, o: Object, at: Option<usize>) {
    fn set<T>(v: &mut Vec<T>, x: T, at: Option<usize>) {
        match at.and_then(|i| v.get_mut(i)) {
            Some(slot) => *slot = x,
            None => v.push(x),
        }
    }
    match o {
        Object::Interface(x) => set(&mut c.interfaces, x, at),
        Object::Network(x) => set(&mut c.networks, x, at),
        Object::Tunnel(x) => set(&mut c.tunnels, x, at),
        Object::Nexthop(x) => set(&mut c.nexthops, x, at),
        Object::Route(x) => set(&mut c.routes, x, at),
        Object::Bridge(x) => set(&mut c.bridge, x, at),
        Object::Label(x) => set(&mut c.labels, x, at),
    }
}

fn remove(c: &mut Config, key: &Key, at: usize) {
    match key {
        Key::Interface { .. } => drop(c.interfaces.remove(at)),
        Key::Network { .. } => drop(c.networks.remove(at)),
        Key::Tunnel { .. } => drop(c.tunnels.remove(at)),
        Key::Nexthop { .. } => drop(c.nexthops.remove(at)),
        Key::Route { .. } => drop(c.routes.remove(at)),
        Key::Bridge { .. } => drop(c.bridge.remove(at)),
        Key::Label { .. } => drop(c.labels.remove(at)),
    }
}

/// Where an applied change put its object: (section, index), so that an error the
/// translation finds there can be reported against the request.
pub type Placed = Option<(&'static str, usize)>;

/// Applies one change to the model. Errors name fields relative to the change.
pub fn apply(c: &mut Config, change: Change) -> Result<Placed, ApiError> {
    match change {
        Change::Create(o) => {
            let key = o.key();
            if key.find(c).is_some() {
                return Err(ApiError::Conflict {
                    message: format!("{key} exists already"),
                    field: Some(o.key_field().to_string()),
                });
            }
            let section = key.section();
            put(c, o, None);
            Ok(Some((section, count(c, section) - 1)))
        }
        Change::Replace(o) => {
            let key = o.key();
            let Some(at) = key.find(c) else {
                return Err(ApiError::NotFound(format!("no {key}")));
            };
            put(c, o, Some(at));
            Ok(Some((key.section(), at)))
        }
        Change::Delete(key) => {
            let Some(at) = key.find(c) else {
                return Err(ApiError::NotFound(format!("no {key}")));
            };
            if let Some(by) = referrer(c, &key) {
                return Err(ApiError::Conflict {
                    message: format!("{key} is in use by {by}"),
                    field: None,
                });
            }
            remove(c, &key, at);
            Ok(None)
        }
        Change::SetPolicy(p) => {
            let key = Key::Network { name: p.network };
            let Some(at) = key.find(c) else {
                return Err(ApiError::NotFound(format!("no {key}")));
            };
            c.networks[at].policy = p.rules;
            Ok(Some(("networks", at)))
        }
    }
}

fn count(c: &Config, section: &str) -> usize {
    match section {
        "interfaces" => c.interfaces.len(),
        "networks" => c.networks.len(),
        "tunnels" => c.tunnels.len(),
        "nexthops" => c.nexthops.len(),
        "routes" => c.routes.len(),
        "bridge" => c.bridge.len(),
        _ => c.labels.len(),
    }
}
