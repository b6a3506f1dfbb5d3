//! The desired configuration as the agent keeps it: the `ovr_config` document plus an
//! index of the table-entry sections (routes, bridge entries, labels) by key, so that a
//! change to one entry costs the same with ten routes or a million.
//!
//! Entry sections keep creation order, except that deleting an entry moves the
//! section's last entry into its place (a swap, not a shift of every later entry).
//! Every change records how to undo it, so that a batch applied in place can be taken
//! back whole when a later step refuses it.

use crate::change::{Change, Key, Object, Placed};
use crate::error::ApiError;
use crate::refs::referrer;
use ovr_config::model::*;
use ovr_tables::fasthash::FastMap;
use std::hash::Hash;

/// The positions of a section's entries by network and key, looked up with the
/// network's name as `&str`: a `(String, K)` key would make a String for every lookup,
/// and the incremental path looks up each entry of every batch (a withdrawn EVPN route's
/// bridge entry among them). Labels have no network: theirs is "".
#[derive(Debug, Clone)]
struct Positions<K>(FastMap<String, FastMap<K, usize>>);

impl<K> Default for Positions<K> {
    fn default() -> Self {
        Self(FastMap::default())
    }
}

impl<K: Hash + Eq> Positions<K> {
    fn get(&self, net: &str, k: &K) -> Option<usize> {
        self.0.get(net)?.get(k).copied()
    }

    fn insert(&mut self, net: &str, k: K, i: usize) {
        match self.0.get_mut(net) {
            Some(m) => {
                m.insert(k, i);
            }
            None => {
                let mut m = FastMap::default();
                m.insert(k, i);
                self.0.insert(net.to_string(), m);
            }
        }
    }

    fn remove(&mut self, net: &str, k: &K) {
        if let Some(m) = self.0.get_mut(net) {
            m.remove(k);
            if m.is_empty() {
                self.0.remove(net);
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.values().map(FastMap::len).sum()
    }
}

/// The configuration and the position of every entry by key (hashed with the fast
/// hasher: the incremental path reads these for every entry a batch changes).
#[derive(Debug, Clone, Default)]
pub struct Model {
    config: Config,
    routes: Positions<Prefix>,
    bridge: Positions<Mac>,
    labels: Positions<u32>,
}

/// How to take one applied change back.
#[derive(Debug)]
pub enum Undo {
    /// A created object: the last of its section.
    Pop(&'static str),
    /// A replaced object: put the old one back.
    Put(Object, usize),
    /// A deleted object, from this position.
    Restore(Object, usize),
    /// A network's policy before.
    Policy(usize, Option<Vec<RuleConfig>>),
}

fn index<K: Hash + Eq, T>(v: &[T], key: fn(&T) -> (&str, K)) -> Positions<K> {
    let mut p = Positions::default();
    for (i, x) in v.iter().enumerate() {
        let (net, k) = key(x);
        p.insert(net, k, i);
    }
    p
}

fn route_key(r: &RouteConfig) -> (&str, Prefix) {
    (&r.network, r.prefix)
}

fn bridge_key(b: &BridgeConfig) -> (&str, Mac) {
    (&b.network, b.mac)
}

fn label_key(l: &LabelConfig) -> (&str, u32) {
    ("", l.label)
}

/// An indexed section: its entries and where each key is.
struct Indexed<'a, K, T> {
    v: &'a mut Vec<T>,
    at: &'a mut Positions<K>,
    key: fn(&T) -> (&str, K),
}

impl<K: Hash + Eq, T> Indexed<'_, K, T> {
    fn push(&mut self, x: T) {
        let (net, k) = (self.key)(&x);
        self.at.insert(net, k, self.v.len());
        self.v.push(x);
    }

    fn put(&mut self, i: usize, x: T) -> T {
        core::mem::replace(&mut self.v[i], x)
    }

    fn pop(&mut self) -> Option<T> {
        let x = self.v.pop()?;
        let (net, k) = (self.key)(&x);
        self.at.remove(net, &k);
        Some(x)
    }

    /// Removes entry `i`; the last entry takes its place.
    fn take(&mut self, i: usize) -> T {
        let x = self.v.swap_remove(i);
        let (net, k) = (self.key)(&x);
        self.at.remove(net, &k);
        if let Some(moved) = self.v.get(i) {
            let (net, k) = (self.key)(moved);
            self.at.insert(net, k, i);
        }
        x
    }

    /// Puts a taken entry back at `i` (the entry that took its place goes back last).
    fn restore(&mut self, i: usize, x: T) {
        self.push(x);
        let last = self.v.len() - 1;
        if i < last {
            self.v.swap(i, last);
            for j in [i, last] {
                let (net, k) = (self.key)(&self.v[j]);
                self.at.insert(net, k, j);
            }
        }
    }
}

impl Model {
    pub fn new(config: Config) -> Self {
        Self {
            routes: index(&config.routes, route_key),
            bridge: index(&config.bridge, bridge_key),
            labels: index(&config.labels, label_key),
            config,
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn into_config(self) -> Config {
        self.config
    }

    /// Where the object with this key is in its section.
    pub fn find(&self, key: &Key) -> Option<usize> {
        match key {
            Key::Route { network, prefix } => self.routes.get(network, prefix),
            Key::Bridge { network, mac } => self.bridge.get(network, mac),
            Key::Label { label } => self.labels.get("", label),
            _ => key.find(&self.config),
        }
    }

    /// Where a route, bridge entry or label is in its section, and its next hop (a
    /// borrow: the incremental path reads it for every entry it changes).
    pub fn entry_nexthop(&self, key: &Key) -> Option<(usize, &str)> {
        let i = self.find(key)?;
        let c = &self.config;
        let nh = match key {
            Key::Route { .. } => &c.routes[i].nexthop,
            Key::Bridge { .. } => &c.bridge[i].nexthop,
            Key::Label { .. } => &c.labels[i].nexthop,
            _ => return None,
        };
        Some((i, nh))
    }

    /// The object with this key, if any.
    pub fn get(&self, key: &Key) -> Option<Object> {
        let i = self.find(key)?;
        let c = &self.config;
        Some(match key {
            Key::Interface { .. } => Object::Interface(c.interfaces[i].clone()),
            Key::Network { .. } => Object::Network(c.networks[i].clone()),
            Key::Tunnel { .. } => Object::Tunnel(c.tunnels[i].clone()),
            Key::Nexthop { .. } => Object::Nexthop(c.nexthops[i].clone()),
            Key::Route { .. } => Object::Route(c.routes[i].clone()),
            Key::Bridge { .. } => Object::Bridge(c.bridge[i].clone()),
            Key::Label { .. } => Object::Label(c.labels[i].clone()),
        })
    }

    fn routes(&mut self) -> Indexed<'_, Prefix, RouteConfig> {
        Indexed {
            v: &mut self.config.routes,
            at: &mut self.routes,
            key: route_key,
        }
    }

    fn bridges(&mut self) -> Indexed<'_, Mac, BridgeConfig> {
        Indexed {
            v: &mut self.config.bridge,
            at: &mut self.bridge,
            key: bridge_key,
        }
    }

    fn labels(&mut self) -> Indexed<'_, u32, LabelConfig> {
        Indexed {
            v: &mut self.config.labels,
            at: &mut self.labels,
            key: label_key,
        }
    }

    /// Appends an object to its section.
    fn push(&mut self, o: Object) {
        let c = &mut self.config;
        match o {
            Object::Interface(x) => c.interfaces.push(x),
            Object::Network(x) => c.networks.push(x),
            Object::Tunnel(x) => c.tunnels.push(x),
            Object::Nexthop(x) => c.nexthops.push(x),
            Object::Route(x) => self.routes().push(x),
            Object::Bridge(x) => self.bridges().push(x),
            Object::Label(x) => self.labels().push(x),
        }
    }

    /// Puts an object (of the key found at `i`) in place; returns the one it replaces.
    fn put(&mut self, i: usize, o: Object) -> Object {
        let c = &mut self.config;
        match o {
            Object::Interface(x) => Object::Interface(core::mem::replace(&mut c.interfaces[i], x)),
            Object::Network(x) => Object::Network(core::mem::replace(&mut c.networks[i], x)),
            Object::Tunnel(x) => Object::Tunnel(core::mem::replace(&mut c.tunnels[i], x)),
            Object::Nexthop(x) => Object::Nexthop(core::mem::replace(&mut c.nexthops[i], x)),
            Object::Route(x) => Object::Route(self.routes().put(i, x)),
            Object::Bridge(x) => Object::Bridge(self.bridges().put(i, x)),
            Object::Label(x) => Object::Label(self.labels().put(i, x)),
        }
    }

    /// Removes the object at `i` of the key's section.
    fn take(&mut self, key: &Key, i: usize) -> Object {
        let c = &mut self.config;
        match key {
            Key::Interface { .. } => Object::Interface(c.interfaces.remove(i)),
            Key::Network { .. } => Object::Network(c.networks.remove(i)),
            Key::Tunnel { .. } => Object::Tunnel(c.tunnels.remove(i)),
            Key::Nexthop { .. } => Object::Nexthop(c.nexthops.remove(i)),
            Key::Route { .. } => Object::Route(self.routes().take(i)),
            Key::Bridge { .. } => Object::Bridge(self.bridges().take(i)),
            Key::Label { .. } => Object::Label(self.labels().take(i)),
        }
    }

    fn len(&self, section: &str) -> usize {
        let c = &self.config;
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

    /// Applies one change, recording how to undo it in `log`. Errors name fields
    /// relative to the change; a refused change changes nothing.
    pub fn apply(&mut self, change: Change, log: &mut Vec<Undo>) -> Result<Placed, ApiError> {
        match change {
            Change::Create(o) => {
                let key = o.key();
                if self.find(&key).is_some() {
                    return Err(ApiError::Conflict {
                        message: format!("{key} exists already"),
                        field: Some(o.key_field().to_string()),
                    });
                }
                let section = key.section();
                self.push(o);
                log.push(Undo::Pop(section));
                Ok(Some((section, self.len(section) - 1)))
            }
            Change::Replace(o) => {
                let key = o.key();
                let Some(at) = self.find(&key) else {
                    return Err(ApiError::NotFound(format!("no {key}")));
                };
                let old = self.put(at, o);
                log.push(Undo::Put(old, at));
                Ok(Some((key.section(), at)))
            }
            Change::Delete(key) => {
                let Some(at) = self.find(&key) else {
                    return Err(ApiError::NotFound(format!("no {key}")));
                };
                if let Some(by) = referrer(&self.config, &key) {
                    return Err(ApiError::Conflict {
                        message: format!("{key} is in use by {by}"),
                        field: None,
                    });
                }
                let old = self.take(&key, at);
                log.push(Undo::Restore(old, at));
                Ok(None)
            }
            Change::SetPolicy(p) => {
                let key = Key::Network { name: p.network };
                let Some(at) = self.find(&key) else {
                    return Err(ApiError::NotFound(format!("no {key}")));
                };
                let old = core::mem::replace(&mut self.config.networks[at].policy, p.rules);
                log.push(Undo::Policy(at, old));
                Ok(Some(("networks", at)))
            }
        }
    }

    /// Takes back the changes `log` recorded, last first.
    pub fn undo(&mut self, log: Vec<Undo>) {
        for u in log.into_iter().rev() {
            match u {
                Undo::Pop(section) => {
                    let c = &mut self.config;
                    match section {
                        "interfaces" => drop(c.interfaces.pop()),
                        "networks" => drop(c.networks.pop()),
                        "tunnels" => drop(c.tunnels.pop()),
                        "nexthops" => drop(c.nexthops.pop()),
                        "routes" => drop(self.routes().pop()),
                        "bridge" => drop(self.bridges().pop()),
                        _ => drop(self.labels().pop()),
                    }
                }
                Undo::Put(o, at) => drop(self.put(at, o)),
                Undo::Restore(o, at) => {
                    let c = &mut self.config;
                    match o {
                        Object::Interface(x) => c.interfaces.insert(at, x),
                        Object::Network(x) => c.networks.insert(at, x),
                        Object::Tunnel(x) => c.tunnels.insert(at, x),
                        Object::Nexthop(x) => c.nexthops.insert(at, x),
                        Object::Route(x) => self.routes().restore(at, x),
                        Object::Bridge(x) => self.bridges().restore(at, x),
                        Object::Label(x) => self.labels().restore(at, x),
                    }
                }
                Undo::Policy(at, old) => self.config.networks[at].policy = old,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(p: &str, nh: &str) -> Object {
        Object::Route(RouteConfig {
            network: "red".into(),
            prefix: p.parse().unwrap(),
            nexthop: nh.into(),
        })
    }

    fn key(p: &str) -> Key {
        Key::Route {
            network: "red".into(),
            prefix: p.parse().unwrap(),
        }
    }

    #[test]
    fn an_entrys_place_and_next_hop_are_read_without_a_copy() {
        let mut m = Model::default();
        let mut log = Vec::new();
        for (p, nh) in [("10.0.0.0/24", "a"), ("10.0.1.0/24", "b")] {
            m.apply(Change::Create(route(p, nh)), &mut log).unwrap();
        }
        assert_eq!(m.entry_nexthop(&key("10.0.1.0/24")), Some((1, "b")));
        assert_eq!(m.entry_nexthop(&key("10.0.9.0/24")), None);
        m.apply(Change::Delete(key("10.0.0.0/24")), &mut log)
            .unwrap();
        assert_eq!(m.entry_nexthop(&key("10.0.1.0/24")), Some((0, "b")));
        // Not an entry: no next hop of its own.
        let net = Key::Network { name: "red".into() };
        assert_eq!(m.entry_nexthop(&net), None);
    }

    #[test]
    fn a_delete_moves_the_last_entry_and_undo_puts_everything_back() {
        let mut m = Model::default();
        let mut log = Vec::new();
        for p in ["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"] {
            m.apply(Change::Create(route(p, "a")), &mut log).unwrap();
        }
        let before = m.config().clone();
        let mut log = Vec::new();
        m.apply(Change::Delete(key("10.0.0.0/24")), &mut log)
            .unwrap();
        assert_eq!(m.config().routes[0].prefix.to_string(), "10.0.2.0/24");
        assert_eq!(m.find(&key("10.0.2.0/24")), Some(0));
        assert_eq!(m.find(&key("10.0.0.0/24")), None);
        m.apply(Change::Replace(route("10.0.1.0/24", "b")), &mut log)
            .unwrap();
        m.apply(Change::Create(route("10.0.9.0/24", "b")), &mut log)
            .unwrap();
        m.apply(Change::Delete(key("10.0.2.0/24")), &mut log)
            .unwrap();
        // Refused: changes nothing, records nothing.
        let n = log.len();
        assert!(
            m.apply(Change::Delete(key("10.0.0.0/24")), &mut log)
                .is_err()
        );
        assert!(
            m.apply(Change::Create(route("10.0.1.0/24", "c")), &mut log)
                .is_err()
        );
        assert_eq!(log.len(), n);
        m.undo(log);
        assert_eq!(m.config(), &before);
        for (i, r) in before.routes.iter().enumerate() {
            assert_eq!(m.find(&key(&r.prefix.to_string())), Some(i));
        }
        assert_eq!(m.routes.len(), 3);
    }
}
