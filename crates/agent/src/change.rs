//! Changes to the desired configuration, as the API receives them (`crate::model`
//! applies them to the model; the tables are the agent's business).

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
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
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

/// Where an applied change put its object: (section, index), so that an error the
/// translation finds there can be reported against the request.
pub type Placed = Option<(&'static str, usize)>;
