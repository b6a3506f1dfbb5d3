//! ovr as a cluster: intent (networks, policies, ports, services, chains) and what each agent publishes
//! (hosts under a lease, the endpoints that are up) live in etcd under `/ovr/v1/`; each
//! host's agent lists and watches it and derives its own configuration: tunnels to the
//! other hosts of its networks, bridge entries, host routes and flood lists
//! (docs/cluster.md).
//!
//! - `keys`, `model`: the key layout and the values, each checked on its own.
//! - `view`: every key's parsed value (or why it was refused), as of a revision.
//! - `derive`: a view and a host's base configuration → the host's configuration.
//! - `store`: etcd behind a small trait (`Store`); `etcd` is the real one, `mem` one the
//!   tests drive (compaction, outages, lease expiry on demand).
//! - `member`: an agent's part in the cluster: list, apply, watch, publish, resync.
//! - `intent`: writing and reading intent as ovrctl and ovrd's API do (checked first).

pub mod derive;
pub mod etcd;
pub mod intent;
pub mod ipam;
pub mod keys;
pub mod mem;
pub mod member;

pub mod model;
mod service;
pub mod store;
pub mod view;

#[cfg(test)]
mod service_tests;
#[cfg(test)]
mod tests;
