//! etcd as the agents use it, behind a small trait: list a prefix, watch it from a
//! revision, put and delete keys (optionally under a lease), keep a lease alive. `etcd`
//! implements it on the etcd-client crate; `mem` in memory, for tests that need what a
//! real cluster does only at its own pace (a compaction, an outage, a lease expiring).

use std::future::Future;

/// A key and its value, with the revisions etcd gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: String,
    pub value: Vec<u8>,
    /// The revision that created the key (what decides who came first in a conflict).
    pub create_revision: i64,
    /// The revision of the last change.
    pub mod_revision: i64,
    /// The lease the key is attached to (0: none).
    pub lease: i64,
}

/// What a listed prefix held at one revision.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub revision: i64,
    pub kvs: Vec<Kv>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Put(Kv),
    Delete { key: String, revision: i64 },
}

impl Event {
    pub fn key(&self) -> &str {
        match self {
            Event::Put(kv) => &kv.key,
            Event::Delete { key, .. } => key,
        }
    }

    pub fn revision(&self) -> i64 {
        match self {
            Event::Put(kv) => kv.mod_revision,
            Event::Delete { revision, .. } => *revision,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The revision asked for is gone (compacted): list again.
    #[error("revision compacted (the oldest kept is {compact_revision})")]
    Compacted { compact_revision: i64 },
    /// The lease is gone (expired or revoked): grant a new one and publish again.
    #[error("lease {0:x} not found")]
    LeaseGone(i64),
    /// etcd cannot be reached, or the request failed: try again later.
    #[error("etcd: {0}")]
    Unavailable(String),
}

/// A watch: batches of events in revision order.
pub trait Watch: Send {
    /// The next batch; `Ok(None)` when the stream ended (the caller watches again).
    fn next(&mut self) -> impl Future<Output = Result<Option<Vec<Event>>, StoreError>> + Send;
}

pub trait Store: Clone + Send + Sync + 'static {
    type Watch: Watch + 'static;

    /// Every key under `prefix`, and the revision they are as of.
    fn list(&self, prefix: &str) -> impl Future<Output = Result<Snapshot, StoreError>> + Send;

    /// Changes under `prefix` from `revision` on (inclusive).
    fn watch(
        &self,
        prefix: &str,
        revision: i64,
    ) -> impl Future<Output = Result<Self::Watch, StoreError>> + Send;

    /// A new lease of `ttl_s` seconds.
    fn grant(&self, ttl_s: i64) -> impl Future<Output = Result<i64, StoreError>> + Send;

    /// Renews a lease once (`LeaseGone` if it expired).
    fn keep_alive(&self, lease: i64) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Gives the lease up: its keys go at once.
    fn revoke(&self, lease: i64) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Sets a key (under a lease if not 0).
    fn put(
        &self,
        key: &str,
        value: Vec<u8>,
        lease: i64,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    fn delete(&self, key: &str) -> impl Future<Output = Result<(), StoreError>> + Send;
}
