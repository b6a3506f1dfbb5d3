//! A host's part in the cluster: list `/ovr/v1/`, install what the view derives for this
//! host, publish the host (under a lease) and its endpoints that are up, then follow a
//! watch from the listed revision. Whatever breaks the session (etcd away, a compaction,
//! the watch ended) ends it; the host keeps forwarding on what it installed, and the next
//! session lists again and installs only the difference (`Sink::install` gets the whole
//! configuration; the agent under it changes only what differs), so nothing is flushed
//! that is still right and nothing is applied twice.

use crate::derive::{Derived, Local, derive};
use crate::keys::{Key, PREFIX, status_key};
use crate::model::{Endpoint, Host, HostStatus, Labels, MAX_REPORTED, Port, Value};
use crate::store::{Store, StoreError, Watch};
use crate::view::View;
use ovr_config::model::{Config, InterfaceKindConfig};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, MissedTickBehavior, interval, sleep, timeout};
use tracing::{info, warn};

/// Where the derived configuration goes, and what the host can say about its interfaces.
pub trait Sink: Send + 'static {
    /// Installs a whole configuration (only its difference to the installed one changes
    /// anything): how many table changes that made. An error says why the host refused
    /// it, and leaves the host as it was.
    fn install(&mut self, config: Config) -> Result<usize, String>;
    /// Whether an interface is there and fit to carry traffic (a port becomes an
    /// endpoint once it is; a service port whose probe fails is not, and is withdrawn).
    fn interface_up(&self, name: &str) -> bool;
}

/// Who this host is in the cluster.
#[derive(Debug, Clone)]
pub struct Settings {
    pub host: String,
    /// The host's own configuration: its underlay interface (whose MAC and first address
    /// it publishes) and flow settings.
    pub base: Config,
    /// The lease's time to live: how long after the host stops the others withdraw it.
    pub ttl_s: i64,
    pub version: String,
    /// Whether the other hosts' endpoints are installed (`Local::endpoints`).
    pub endpoints: bool,
}

impl Settings {
    /// The host record this host publishes (without labels), or why it cannot.
    fn record(&self) -> Result<Host, String> {
        let u = self
            .base
            .interfaces
            .iter()
            .find(|i| i.kind == InterfaceKindConfig::Underlay)
            .ok_or("the base configuration has no underlay interface")?;
        let mac = u.mac.ok_or("the underlay interface has no mac")?;
        let vtep = u
            .addresses
            .first()
            .ok_or("the underlay interface has no address")?
            .0
            .addr;
        Ok(Host {
            vtep,
            mac,
            underlay: u.addresses.clone(),
            labels: BTreeMap::new(),
            version: self.version.clone(),
        })
    }
}

/// How the host stands with the cluster (for the API, metrics and logs).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Status {
    /// A session with etcd is up (listed and watching).
    pub connected: bool,
    /// The revision whose state is installed.
    pub applied_revision: i64,
    /// Keys refused (on their own or for conflicting with others), with the reason.
    pub rejected: BTreeMap<String, String>,
    /// Networks installed here (those with a local port).
    pub networks: Vec<String>,
    /// Listings (1 + how many times the host listed again: after a session ended, or for
    /// a network that became its own).
    pub sessions: u64,
    /// Installs that changed the tables (a resync that finds them right adds none).
    pub installs: u64,
    /// Table changes those made.
    pub table_changes: u64,
    /// The last thing that went wrong (etcd, or the host refusing a configuration).
    pub last_error: Option<String>,
}

pub type SharedStatus = Arc<Mutex<Status>>;

/// Backoff between sessions: from 100 ms, doubling, at most 2 s; each wait is cut by a
/// random part of up to a half, so that hosts coming back together do not list together.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(2));
/// Events arriving this close together are applied as one change, for at most
/// `COALESCE_AT_MOST` (a steady stream of changes is still applied as it goes).
const COALESCE: Duration = Duration::from_millis(5);
const COALESCE_AT_MOST: Duration = Duration::from_millis(50);
/// How often the host's publications are checked again (and the report refreshed).
const RECHECK: Duration = Duration::from_secs(1);
/// How often a local port not yet up is looked at (it becomes an endpoint once it is).
const PENDING: Duration = Duration::from_millis(10);
/// How often the ports published as up are looked at (a lookup each in the sink): one
/// that goes down (a service instance's namespace removed, or its probe failing) is
/// withdrawn then, not at the next `RECHECK`, so that the other hosts move its sessions
/// sooner.
const DOWN_EVERY: Duration = Duration::from_millis(20);

pub struct Member<S: Store, K: Sink> {
    store: S,
    sink: K,
    settings: Settings,
    status: SharedStatus,
    view: View,
    derived: Derived,
    installed: Option<Config>,
    labels: BTreeMap<String, Labels>,
    lease: i64,
    /// The lease, for the background task that keeps it alive.
    shared_lease: Arc<AtomicI64>,
    /// What this session wrote and has not seen come back yet (key → value, lease).
    written: BTreeMap<String, Option<(Vec<u8>, i64)>>,
    /// A local port is not up yet.
    pending: bool,
    /// The interfaces of the local ports published as up.
    up: Vec<String>,
}

fn set<T>(s: &SharedStatus, f: impl FnOnce(&mut Status) -> T) -> T {
    f(&mut s.lock().unwrap_or_else(|p| p.into_inner()))
}

impl<S: Store, K: Sink> Member<S, K> {
    pub fn new(store: S, sink: K, settings: Settings) -> Self {
        Self::with_status(store, sink, settings, SharedStatus::default())
    }

    /// A member that reports into `status` (read by whoever holds a clone).
    pub fn with_status(store: S, sink: K, settings: Settings, status: SharedStatus) -> Self {
        Self {
            store,
            sink,
            settings,
            status,
            view: View::default(),
            derived: Derived::default(),
            installed: None,
            labels: BTreeMap::new(),
            lease: 0,
            shared_lease: Arc::default(),
            written: BTreeMap::new(),
            pending: false,
            up: Vec::new(),
        }
    }

    pub fn status(&self) -> SharedStatus {
        Arc::clone(&self.status)
    }

    /// Runs sessions until the task is dropped.
    pub async fn run(mut self) {
        let lost = mpsc::unbounded_channel();
        let _background = Background(tokio::spawn(background(
            self.store.clone(),
            self.settings.clone(),
            Arc::clone(&self.status),
            Arc::clone(&self.shared_lease),
            lost.0,
        )));
        let (mut lost, mut backoff) = (lost.1, BACKOFF.0);
        loop {
            let started = Instant::now();
            let e = self.session(&mut lost).await;
            warn!(host = %self.settings.host, error = %e, "cluster session ended; forwarding goes on with what is installed");
            set(&self.status, |s| {
                s.connected = false;
                s.last_error = Some(e.to_string());
            });
            if started.elapsed() > BACKOFF.1 {
                backoff = BACKOFF.0;
            }
            sleep(jitter(backoff)).await;
            backoff = (backoff * 2).min(BACKOFF.1);
        }
    }

    /// One session: list, install, publish, then follow the watch until something breaks.
    async fn session(&mut self, lost: &mut mpsc::UnboundedReceiver<i64>) -> StoreError {
        match self.follow(lost).await {
            Ok(never) => match never {},
            Err(e) => e,
        }
    }

    async fn follow(
        &mut self,
        lost: &mut mpsc::UnboundedReceiver<i64>,
    ) -> Result<std::convert::Infallible, StoreError> {
        let mut watch = self.resync().await?;
        let mut recheck = interval(RECHECK);
        recheck.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                r = watch.next() => {
                    let Some(events) = r? else {
                        return Err(StoreError::Unavailable("the watch ended".into()));
                    };
                    self.view.apply(&events);
                    // What follows at once is part of the same change.
                    let until = Instant::now() + COALESCE_AT_MOST;
                    while Instant::now() < until
                        && let Ok(r) = timeout(COALESCE, watch.next()).await
                    {
                        let Some(events) = r? else {
                            return Err(StoreError::Unavailable("the watch ended".into()));
                        };
                        self.view.apply(&events);
                    }
                    if self.view.stale() {
                        // A network became this host's: its endpoints are not in the view.
                        info!(host = %self.settings.host, "cluster: a network of this host's is new; listing again");
                        watch = self.resync().await?;
                        continue;
                    }
                    self.reconcile();
                    self.publish().await?;
                }
                Some(gone) = lost.recv() => {
                    if gone == self.lease {
                        warn!(host = %self.settings.host, "cluster: lease expired; publishing again under a new one");
                        self.lease = 0;
                        self.shared_lease.store(0, Ordering::Relaxed);
                        self.publish().await?;
                    }
                }
                _ = sleep(PENDING), if self.pending => self.publish().await?,
                _ = sleep(DOWN_EVERY), if !self.pending && !self.up.is_empty() => {
                    if self.up.iter().any(|i| !self.sink.interface_up(i)) {
                        self.publish().await?;
                    }
                }
                _ = recheck.tick() => {
                    // A write lost between us and the watch is made again after this.
                    self.written.clear();
                    self.publish().await?;
                }
            }
        }
    }

    /// Lists the prefix into a new view, installs and publishes what it derives, and
    /// watches from the revision listed.
    async fn resync(&mut self) -> Result<S::Watch, StoreError> {
        let snap = self.store.list(PREFIX).await?;
        self.view = View::for_host(&snap, &self.settings.host);
        self.written.clear();
        if self.labels.is_empty() {
            // Labels outlive a restart through the host's own record (peers use them).
            if let Some(Ok(Value::Host(h))) = self
                .view
                .entries
                .get(&Key::Host(self.settings.host.clone()))
                .map(|e| &e.value)
            {
                self.labels = h.labels.clone();
            }
        }
        let lists = set(&self.status, |s| {
            s.connected = true;
            s.sessions += 1;
            s.sessions
        });
        info!(host = %self.settings.host, revision = snap.revision, keys = snap.kvs.len(), kept = self.view.entries.len(), lists, "cluster: listed");
        drop(snap);
        self.reconcile();
        self.publish().await?;
        self.store.watch(PREFIX, self.view.revision + 1).await
    }

    /// Derives this host's configuration from the view and installs it if it changed.
    fn reconcile(&mut self) {
        let local = Local {
            host: &self.settings.host,
            base: &self.settings.base,
            labels: &self.labels,
            endpoints: self.settings.endpoints,
        };
        let d = derive(&self.view, &local);
        let mut rejected: BTreeMap<String, String> = self
            .view
            .refused()
            .map(|(k, r)| (k, r.to_string()))
            .collect();
        rejected.extend(d.rejected.clone());
        let before = set(&self.status, |s| std::mem::take(&mut s.rejected));
        for (k, why) in &rejected {
            if before.get(k) != Some(why) {
                warn!(key = %k, reason = %why, "cluster: key rejected");
            }
        }
        let (mut error, mut changes) = (None, 0);
        if self.installed.as_ref() != Some(&d.config) {
            match self.sink.install(d.config.clone()) {
                Ok(n) => {
                    self.installed = Some(d.config.clone());
                    changes = n as u64;
                }
                Err(e) => {
                    warn!(revision = self.view.revision, error = %e, "cluster: the host refused the derived configuration; keeping the last one");
                    error = Some(e);
                }
            }
        }
        self.labels = d.labels.clone();
        let installed = error.is_none();
        set(&self.status, |s| {
            s.rejected = rejected;
            if installed {
                s.applied_revision = self.view.revision;
                s.installs += u64::from(changes > 0);
                s.table_changes += changes;
                s.networks = d.config.networks.iter().map(|n| n.name.clone()).collect();
            } else {
                s.last_error = error;
            }
        });
        self.derived = d;
    }

    /// Puts (or deletes) `key` unless the view or an earlier write already has it so.
    async fn write(&mut self, key: String, want: Option<Vec<u8>>) -> Result<(), StoreError> {
        let lease = self.lease;
        let want = want.map(|v| (v, lease));
        if self.seen(&key) == want {
            self.written.remove(&key);
            return Ok(());
        }
        if self.written.get(&key) == Some(&want) {
            return Ok(()); // on its way back through the watch
        }
        match &want {
            Some((v, l)) => self.store.put(&key, v.clone(), *l).await?,
            None => self.store.delete(&key).await?,
        }
        self.written.insert(key, want);
        Ok(())
    }

    /// A key's value and lease in the view.
    fn seen(&self, key: &str) -> Option<(Vec<u8>, i64)> {
        let k = Key::parse(key).ok()?;
        let e = self.view.entries.get(&k)?;
        let v = match e.value.as_ref().ok()? {
            Value::Host(h) => serde_json::to_vec(h),
            Value::Endpoint(x) => serde_json::to_vec(x),
            _ => return None,
        };
        Some((v.ok()?, e.lease))
    }

    /// Publishes the host record, the endpoints that are up and the report.
    async fn publish(&mut self) -> Result<(), StoreError> {
        for attempt in 0..2 {
            match self.publish_once().await {
                Err(StoreError::LeaseGone(_)) if attempt == 0 => {
                    self.lease = 0;
                    self.shared_lease.store(0, Ordering::Relaxed);
                }
                r => return r,
            }
        }
        Ok(())
    }

    async fn publish_once(&mut self) -> Result<(), StoreError> {
        let mut host = match self.settings.record() {
            Ok(h) => h,
            Err(e) => {
                set(&self.status, |s| s.last_error = Some(e));
                return Ok(());
            }
        };
        if self.lease == 0 {
            self.lease = self.store.grant(self.settings.ttl_s).await?;
            self.shared_lease.store(self.lease, Ordering::Relaxed);
            self.written.clear();
            info!(host = %self.settings.host, lease = format!("{:x}", self.lease), "cluster: lease granted");
        }
        host.labels = self.labels.clone();
        let me = self.settings.host.clone();
        self.write(Key::Host(me.clone()).to_string(), json(&host))
            .await?;

        let up: BTreeMap<String, Endpoint> = self
            .derived
            .local_ports
            .iter()
            .filter(|(_, p)| self.sink.interface_up(&p.interface))
            .map(|(n, p): (&String, &Port)| {
                (
                    n.clone(),
                    Endpoint {
                        network: p.network.clone(),
                        mac: p.mac,
                        ips: p.ips.clone(),
                    },
                )
            })
            .collect();
        self.pending = up.len() < self.derived.local_ports.len();
        self.up = up
            .keys()
            .filter_map(|n| self.derived.local_ports.get(n))
            .map(|p| p.interface.clone())
            .collect();
        let gone: Vec<String> = self
            .view
            .entries
            .keys()
            .filter_map(|k| match k {
                Key::Endpoint { host, name } if *host == me && !up.contains_key(name) => {
                    Some(k.to_string())
                }
                _ => None,
            })
            .collect();
        for k in gone {
            self.write(k, None).await?;
        }
        for (name, e) in &up {
            let key = Key::Endpoint {
                host: me.clone(),
                name: name.clone(),
            };
            self.write(key.to_string(), json(e)).await?;
        }
        Ok(())
    }
}

/// Aborts the background task with the member.
struct Background(tokio::task::JoinHandle<()>);

impl Drop for Background {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What runs beside the sessions, so that a slow etcd (an election: requests wait up to
/// their deadline) never holds the watch up: the lease kept alive every third of its
/// TTL (a lease found gone is sent to the member, which publishes again under a new
/// one), and the host's report written when it changed, at most once a `RECHECK` (a
/// report per change would double the cluster's writes). The report is not under the
/// lease: it stays when the host goes, as the last thing known of it.
async fn background<S: Store>(
    store: S,
    settings: Settings,
    status: SharedStatus,
    lease: Arc<AtomicI64>,
    lost: mpsc::UnboundedSender<i64>,
) {
    let every = Duration::from_secs((settings.ttl_s / 3).max(1) as u64);
    let (mut kept, mut reported) = (Instant::now(), None);
    let mut tick = interval(RECHECK.min(every));
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let id = lease.load(Ordering::Relaxed);
        if id != 0 && kept.elapsed() >= every {
            match store.keep_alive(id).await {
                Ok(()) => kept = Instant::now(),
                Err(StoreError::LeaseGone(_)) => {
                    if lost.send(id).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    warn!(host = %settings.host, error = %e, "cluster: lease not renewed; trying again")
                }
            }
        }
        let r = set(&status, |s| HostStatus {
            applied_revision: s.applied_revision,
            rejected_count: s.rejected.len(),
            rejected: s
                .rejected
                .iter()
                .take(MAX_REPORTED)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            networks: s.networks.clone(),
        });
        if reported.as_ref() != Some(&r) {
            let v = serde_json::to_vec(&r).unwrap_or_default();
            if store.put(&status_key(&settings.host), v, 0).await.is_ok() {
                reported = Some(r);
            }
        }
    }
}

/// `d` less a random part of up to a half.
fn jitter(d: Duration) -> Duration {
    use std::hash::{BuildHasher, RandomState};
    let r = RandomState::new().hash_one(0u8) % 1000;
    d - d.mul_f64(r as f64 / 2000.0)
}

fn json<T: Serialize>(v: &T) -> Option<Vec<u8>> {
    serde_json::to_vec(v).ok()
}
