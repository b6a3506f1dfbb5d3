//! Every key under `/ovr/v1/` with its parsed value, or the reason it was refused, as of
//! one revision. Built from a listing and kept up by watch events; a value that does not
//! parse is kept as a refusal for its key alone, so that one bad key never stops the
//! others from being applied.

use crate::keys::Key;
use crate::model::{Value, parse};
use crate::store::{Event, Kv, Snapshot};
use std::collections::{BTreeMap, BTreeSet};

/// One key's state.
#[derive(Debug, Clone)]
pub struct Entry {
    pub value: Result<Value, String>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub lease: i64,
}

#[derive(Debug, Clone, Default)]
pub struct View {
    /// The revision the view is as of.
    pub revision: i64,
    pub entries: BTreeMap<Key, Entry>,
    /// Keys under the prefix that are not keys of the model, with the reason.
    pub strangers: BTreeMap<String, String>,
    focus: Option<Focus>,
}

/// A host's view keeps the endpoints of its own networks only (those it has a port in),
/// and of the networks of its chains' instances' ports (which it reaches through them):
/// the rest of a large cluster's endpoints would cost memory and never be installed
/// there. Its own endpoints it always keeps, whatever their network: it is the one to
/// withdraw them (its last port in a network deleted while its endpoint's put was on the
/// way would otherwise leave that endpoint published until the lease ends). A network that becomes the host's needs its endpoints: `stale` says so, and the
/// member lists again.
#[derive(Debug, Clone, Default)]
struct Focus {
    host: String,
    networks: BTreeSet<String>,
    /// The ports of the chains' instances (a change to one may change `networks`).
    instance_ports: BTreeSet<(String, String)>,
    stale: bool,
}

impl View {
    /// The view of one host (see `Focus`).
    pub fn for_host(s: &Snapshot, host: &str) -> Self {
        let mut v = View {
            revision: s.revision,
            focus: Some(Focus {
                host: host.to_string(),
                ..Focus::default()
            }),
            ..View::default()
        };
        // Everything but the endpoints first: the host's networks follow from it.
        let prefix = format!("{}endpoints/", crate::keys::PREFIX);
        let (endpoints, intent): (Vec<&Kv>, Vec<&Kv>) =
            s.kvs.iter().partition(|kv| kv.key.starts_with(&prefix));
        for kv in intent {
            v.put(kv);
        }
        v.refocus(true);
        for kv in endpoints {
            v.put(kv);
        }
        v
    }

    /// Whether a network became the host's since the view was listed (its endpoints are
    /// not in the view: list again).
    pub fn stale(&self) -> bool {
        self.focus.as_ref().is_some_and(|f| f.stale)
    }

    /// The host's networks from its ports as they are now; one gained after the listing
    /// (`listed` false) makes the view stale.
    fn refocus(&mut self, listed: bool) {
        let Some(f) = &self.focus else { return };
        let mut now: BTreeSet<String> = self
            .entries
            .iter()
            .filter_map(|(k, e)| match (k, &e.value) {
                (Key::Port { host, .. }, Ok(Value::Port(p))) if *host == f.host => {
                    Some(p.network.clone())
                }
                _ => None,
            })
            .collect();
        let own: BTreeSet<&str> = now.iter().map(String::as_str).collect();
        let instance_ports: BTreeSet<(String, String)> = crate::service::instance_ports(self, &own)
            .into_iter()
            .map(|(h, p)| (h.to_string(), p.to_string()))
            .collect();
        for (host, name) in &instance_ports {
            let key = Key::Port {
                host: host.clone(),
                name: name.clone(),
            };
            if let Some(Ok(Value::Port(p))) = self.entries.get(&key).map(|e| &e.value) {
                now.insert(p.network.clone());
            }
        }
        let gained = !now.is_subset(&f.networks);
        if let Some(f) = &mut self.focus {
            f.stale |= gained && !listed;
            f.networks = now;
            f.instance_ports = instance_ports;
        }
    }

    /// Whether the view leaves this endpoint out (another host's, not in one of the
    /// host's networks).
    fn out_of_focus(&self, key: &Key, v: &Result<Value, String>) -> bool {
        match (&self.focus, key, v) {
            (Some(f), Key::Endpoint { host, .. }, Ok(Value::Endpoint(e))) => {
                *host != f.host && !f.networks.contains(&e.network)
            }
            _ => false,
        }
    }

    pub fn of(s: &Snapshot) -> Self {
        let mut v = View {
            revision: s.revision,
            ..View::default()
        };
        for kv in &s.kvs {
            v.put(kv);
        }
        v
    }

    fn put(&mut self, kv: &Kv) {
        match Key::parse(&kv.key) {
            Ok(key) => {
                let value = parse(&key, &kv.value);
                if self.out_of_focus(&key, &value) {
                    self.entries.remove(&key);
                    return;
                }
                self.entries.insert(
                    key,
                    Entry {
                        value,
                        create_revision: kv.create_revision,
                        mod_revision: kv.mod_revision,
                        lease: kv.lease,
                    },
                );
            }
            Err(e) => {
                self.strangers.insert(kv.key.clone(), e);
            }
        }
    }

    /// Applies a batch of events; events at or below the view's revision (a watch that
    /// replays what a listing already had) are skipped, so nothing is applied twice.
    /// Returns whether anything changed.
    pub fn apply(&mut self, events: &[Event]) -> bool {
        let mut changed = false;
        for e in events {
            if e.revision() <= self.revision {
                continue;
            }
            changed = true;
            match e {
                Event::Put(kv) => self.put(kv),
                Event::Delete { key, .. } => match Key::parse(key) {
                    Ok(k) => {
                        self.entries.remove(&k);
                    }
                    Err(_) => {
                        self.strangers.remove(key);
                    }
                },
            }
            // What the host's networks follow: its own ports, the chains' intent and
            // their instances' ports.
            let refocus = self
                .focus
                .as_ref()
                .is_some_and(|f| match Key::parse(e.key()) {
                    Ok(Key::Port { host, name }) => {
                        host == f.host || f.instance_ports.contains(&(host, name))
                    }
                    Ok(Key::Policy(_) | Key::Chain(_) | Key::Service(_)) => true,
                    _ => false,
                });
            if refocus {
                self.refocus(false);
            }
        }
        if let Some(last) = events.last() {
            self.revision = self.revision.max(last.revision());
        }
        changed
    }

    /// The valid values of one kind, with their entries.
    pub fn valid(&self) -> impl Iterator<Item = (&Key, &Entry, &Value)> {
        self.entries
            .iter()
            .filter_map(|(k, e)| e.value.as_ref().ok().map(|v| (k, e, v)))
    }

    /// Keys refused on their own (unparsable values, keys outside the model).
    pub fn refused(&self) -> impl Iterator<Item = (String, &str)> {
        self.entries
            .iter()
            .filter_map(|(k, e)| e.value.as_ref().err().map(|r| (k.to_string(), r.as_str())))
            .chain(self.strangers.iter().map(|(k, r)| (k.clone(), r.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(key: &str, value: &str, rev: i64) -> Kv {
        Kv {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            create_revision: rev,
            mod_revision: rev,
            lease: 0,
        }
    }

    #[test]
    fn a_bad_value_is_refused_alone_and_old_events_are_not_applied_again() {
        let mut v = View::of(&Snapshot {
            revision: 3,
            kvs: vec![
                kv("/ovr/v1/networks/red", r#"{"vni": 100}"#, 2),
                kv("/ovr/v1/networks/blue", r#"{"vni": "x"}"#, 3),
                kv("/ovr/v1/nonsense", "1", 1),
            ],
        });
        assert_eq!(v.valid().count(), 1);
        let refused: Vec<_> = v.refused().map(|(k, _)| k).collect();
        assert_eq!(refused, ["/ovr/v1/networks/blue", "/ovr/v1/nonsense"]);
        // A replay of revision 3 changes nothing; revision 4 does.
        assert!(!v.apply(&[Event::Delete {
            key: "/ovr/v1/networks/red".into(),
            revision: 3
        }]));
        assert!(v.apply(&[Event::Put(kv(
            "/ovr/v1/networks/blue",
            r#"{"vni": 200}"#,
            4
        ))]));
        assert_eq!(v.valid().count(), 2);
        assert_eq!(v.revision, 4);
        assert!(v.apply(&[Event::Delete {
            key: "/ovr/v1/nonsense".into(),
            revision: 5
        }]));
        assert_eq!(v.refused().count(), 0);
    }

    #[test]
    fn a_host_keeps_only_its_networks_endpoints_and_lists_again_for_a_new_one() {
        let port = |net: &str| {
            format!(r#"{{"network": "{net}", "mac": "02:00:00:00:00:0a", "interface": "v"}}"#)
        };
        let ep = |net: &str| format!(r#"{{"network": "{net}", "mac": "02:00:00:00:00:0b"}}"#);
        let mut v = View::for_host(
            &Snapshot {
                revision: 4,
                kvs: vec![
                    kv("/ovr/v1/ports/h1/a", &port("red"), 1),
                    kv("/ovr/v1/endpoints/h2/b", &ep("red"), 2),
                    kv("/ovr/v1/endpoints/h2/c", &ep("blue"), 3),
                    kv("/ovr/v1/endpoints/h2/bad", "{", 4),
                ],
            },
            "h1",
        );
        let kept = |v: &View| v.entries.keys().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(
            kept(&v),
            [
                "/ovr/v1/ports/h1/a",
                "/ovr/v1/endpoints/h2/b",
                "/ovr/v1/endpoints/h2/bad"
            ]
        );
        // Another host's port, or an endpoint of blue: still not h1's network.
        v.apply(&[
            Event::Put(kv("/ovr/v1/ports/h2/z", &port("blue"), 5)),
            Event::Put(kv("/ovr/v1/endpoints/h2/d", &ep("blue"), 6)),
        ]);
        assert!(!v.stale());
        assert!(!kept(&v).contains(&"/ovr/v1/endpoints/h2/d".to_string()));
        // An endpoint that moves out of h1's networks leaves the view.
        v.apply(&[Event::Put(kv("/ovr/v1/endpoints/h2/b", &ep("blue"), 7))]);
        assert!(!kept(&v).contains(&"/ovr/v1/endpoints/h2/b".to_string()));
        // h1's own endpoints stay whatever their network: h1 withdraws them.
        v.apply(&[Event::Put(kv("/ovr/v1/endpoints/h1/gone", &ep("green"), 8))]);
        assert!(kept(&v).contains(&"/ovr/v1/endpoints/h1/gone".to_string()));
        // A port of h1's in blue: blue's endpoints are not here; list again.
        v.apply(&[Event::Put(kv("/ovr/v1/ports/h1/y", &port("blue"), 9))]);
        assert!(v.stale());
    }

    #[test]
    fn a_host_keeps_the_endpoints_of_its_chains_instances_ports() {
        let port = |net: &str| {
            format!(r#"{{"network": "{net}", "mac": "02:00:00:00:00:0a", "interface": "v"}}"#)
        };
        let ep = |net: &str| format!(r#"{{"network": "{net}", "mac": "02:00:00:00:00:0b"}}"#);
        let policy = r#"{"network": "red", "rules": [{"action": "chain", "chain": "c", "dst_network": "blue"}]}"#;
        let service =
            r#"{"instances": [{"name": "fw-h2", "host": "h2", "left": "l", "right": "r"}]}"#;
        let mut kvs = vec![
            kv("/ovr/v1/ports/h1/a", &port("red"), 1),
            kv("/ovr/v1/ports/h2/l", &port("svc"), 2),
            kv("/ovr/v1/ports/h2/r", &port("svc"), 3),
            kv("/ovr/v1/policies/p", policy, 4),
            kv("/ovr/v1/chains/c", r#"{"functions": ["fw"]}"#, 5),
            kv("/ovr/v1/endpoints/h2/l", &ep("svc"), 6),
            kv("/ovr/v1/endpoints/h2/x", &ep("green"), 7),
        ];
        let has = |v: &View, k: &str| v.entries.keys().any(|x| x.to_string() == k);
        // No service yet: svc is not h1's concern.
        let mut v = View::for_host(
            &Snapshot {
                revision: 7,
                kvs: kvs.clone(),
            },
            "h1",
        );
        assert!(!has(&v, "/ovr/v1/endpoints/h2/l"));
        // The service arrives: svc's endpoints are missing, list again.
        v.apply(&[Event::Put(kv("/ovr/v1/services/fw", service, 8))]);
        assert!(v.stale());
        kvs.push(kv("/ovr/v1/services/fw", service, 8));
        let v = View::for_host(&Snapshot { revision: 8, kvs }, "h1");
        assert!(has(&v, "/ovr/v1/endpoints/h2/l"));
        assert!(!has(&v, "/ovr/v1/endpoints/h2/x"));
    }
}
