//! `Store` in memory, with the behaviour of etcd the agents depend on (revisions, watch
//! history, compaction, leases whose keys go with them) and switches a test turns: take
//! the store down, compact it, expire a lease now.

use crate::store::{Event, Kv, Snapshot, Store, StoreError, Watch};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

#[derive(Default)]
struct State {
    revision: i64,
    kvs: BTreeMap<String, Kv>,
    history: Vec<Event>,
    compacted: i64,
    leases: BTreeSet<i64>,
    next_lease: i64,
    down: bool,
}

#[derive(Clone, Default)]
pub struct Mem {
    state: Arc<Mutex<State>>,
    changed: Arc<Notify>,
}

impl Mem {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn up(&self) -> Result<MutexGuard<'_, State>, StoreError> {
        let s = self.lock();
        if s.down {
            return Err(StoreError::Unavailable("the store is down".into()));
        }
        Ok(s)
    }

    /// Takes the store down (every request and watch fails) or brings it back.
    pub fn set_down(&self, down: bool) {
        self.lock().down = down;
        self.changed.notify_waiters();
    }

    /// Forgets history up to `revision`: watches from before it fail as compacted.
    pub fn compact(&self, revision: i64) {
        let mut s = self.lock();
        s.compacted = revision;
        s.history.retain(|e| e.revision() > revision);
        drop(s);
        self.changed.notify_waiters();
    }

    /// Expires a lease now: its keys are deleted.
    pub fn expire(&self, lease: i64) {
        let mut s = self.lock();
        s.leases.remove(&lease);
        let keys: Vec<String> = s
            .kvs
            .values()
            .filter(|k| k.lease == lease)
            .map(|k| k.key.clone())
            .collect();
        for k in keys {
            remove(&mut s, &k);
        }
        drop(s);
        self.changed.notify_waiters();
    }

    pub fn revision(&self) -> i64 {
        self.lock().revision
    }

    /// The value of a key, if any.
    pub fn get(&self, key: &str) -> Option<Kv> {
        self.lock().kvs.get(key).cloned()
    }

    /// The leases that are alive.
    pub fn leases(&self) -> Vec<i64> {
        self.lock().leases.iter().copied().collect()
    }
}

fn remove(s: &mut State, key: &str) {
    if s.kvs.remove(key).is_some() {
        s.revision += 1;
        let revision = s.revision;
        s.history.push(Event::Delete {
            key: key.to_string(),
            revision,
        });
    }
}

pub struct MemWatch {
    store: Mem,
    prefix: String,
    next: i64,
}

impl Watch for MemWatch {
    async fn next(&mut self) -> Result<Option<Vec<Event>>, StoreError> {
        loop {
            let changed = self.store.changed.notified();
            {
                let s = self.store.up()?;
                if self.next <= s.compacted {
                    return Err(StoreError::Compacted {
                        compact_revision: s.compacted,
                    });
                }
                let events: Vec<Event> = s
                    .history
                    .iter()
                    .filter(|e| e.revision() >= self.next && e.key().starts_with(&self.prefix))
                    .cloned()
                    .collect();
                if !events.is_empty() {
                    self.next = s.revision + 1;
                    return Ok(Some(events));
                }
            }
            changed.await;
        }
    }
}

impl Store for Mem {
    type Watch = MemWatch;

    async fn list(&self, prefix: &str) -> Result<Snapshot, StoreError> {
        let s = self.up()?;
        Ok(Snapshot {
            revision: s.revision,
            kvs: s
                .kvs
                .range(prefix.to_string()..)
                .take_while(|(k, _)| k.starts_with(prefix))
                .map(|(_, v)| v.clone())
                .collect(),
        })
    }

    async fn watch(&self, prefix: &str, revision: i64) -> Result<MemWatch, StoreError> {
        drop(self.up()?);
        Ok(MemWatch {
            store: self.clone(),
            prefix: prefix.to_string(),
            next: revision,
        })
    }

    async fn grant(&self, _ttl_s: i64) -> Result<i64, StoreError> {
        let mut s = self.up()?;
        s.next_lease += 1;
        let id = s.next_lease;
        s.leases.insert(id);
        Ok(id)
    }

    async fn keep_alive(&self, lease: i64) -> Result<(), StoreError> {
        match self.up()?.leases.contains(&lease) {
            true => Ok(()),
            false => Err(StoreError::LeaseGone(lease)),
        }
    }

    async fn revoke(&self, lease: i64) -> Result<(), StoreError> {
        drop(self.up()?);
        self.expire(lease);
        Ok(())
    }

    async fn put(&self, key: &str, value: Vec<u8>, lease: i64) -> Result<(), StoreError> {
        let mut s = self.up()?;
        if lease != 0 && !s.leases.contains(&lease) {
            return Err(StoreError::LeaseGone(lease));
        }
        s.revision += 1;
        let revision = s.revision;
        let create_revision = s.kvs.get(key).map_or(revision, |k| k.create_revision);
        let kv = Kv {
            key: key.to_string(),
            value,
            create_revision,
            mod_revision: revision,
            lease,
        };
        s.kvs.insert(key.to_string(), kv.clone());
        s.history.push(Event::Put(kv));
        drop(s);
        self.changed.notify_waiters();
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let mut s = self.up()?;
        remove(&mut s, key);
        drop(s);
        self.changed.notify_waiters();
        Ok(())
    }
}
