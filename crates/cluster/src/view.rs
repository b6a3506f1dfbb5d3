//! Every key under `/ovr/v1/` with its parsed value, or the reason it was refused, as of
//! one revision. Built from a listing and kept up by watch events; a value that does not
//! parse is kept as a refusal for its key alone, so that one bad key never stops the
//! others from being applied.

use crate::keys::Key;
use crate::model::{Value, parse};
use crate::store::{Event, Kv, Snapshot};
use std::collections::BTreeMap;

/// One key's state.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: Key,
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
}

impl View {
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
                self.entries.insert(
                    key.clone(),
                    Entry {
                        key,
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
        }
        if let Some(last) = events.last() {
            self.revision = self.revision.max(last.revision());
        }
        changed
    }

    /// The valid values of one kind, with their entries.
    pub fn valid(&self) -> impl Iterator<Item = (&Entry, &Value)> {
        self.entries
            .values()
            .filter_map(|e| e.value.as_ref().ok().map(|v| (e, v)))
    }

    /// Keys refused on their own (unparsable values, keys outside the model).
    pub fn refused(&self) -> impl Iterator<Item = (String, &str)> {
        self.entries
            .values()
            .filter_map(|e| {
                e.value
                    .as_ref()
                    .err()
                    .map(|r| (e.key.to_string(), r.as_str()))
            })
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
}
