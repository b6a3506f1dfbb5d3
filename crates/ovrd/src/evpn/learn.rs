//! What ovrd learns through its gobgpd, installed: the speaker's changes as its
//! WatchEvent stream brings them, a batch at a time, go through `ovr_bgp::sync`, which
//! turns a batch of type 2 routes into the changes to the bridge entries and host routes
//! it touches, applied as one batch through the agent (entry by entry, no copy of the
//! configuration); what it cannot do that way (the first routes of a VTEP, type 3 and 5,
//! a VTEP resolved, a new intent) installs the host's whole configuration — its intent
//! with the reachability learnt (`ovr_bgp::install::layer`) — and the agent applies the
//! difference. The VTEPs' underlay MACs are resolved with ARP (`arp`). The speaker's table
//! is listed whenever the watch starts (again), and every `RELIST_EVERY` or less often for
//! a large table once the watch is quiet (`relist_due`), so that anything the watch missed
//! (a withdrawal, a lost neighbor's paths) goes too.
//! A listing runs beside the watch, whose changes are installed meanwhile; the routes
//! they touched are left out of the listing's resync (`ovr_bgp::sync::Newer`).
//!
//! The intent is the cluster's derived configuration (`--etcd`: the member hands each one
//! to `Learning::install_intent`) or, without a cluster, the installed configuration
//! without what this layer added (`install::strip`), taken again whenever the
//! configuration changed through the API (the agent's generation), so that such changes
//! keep what is learnt.

use super::arp::{self, Neighbours, Underlay};
use ovr_agent::Applied;
use ovr_agent::api::AppState;
use ovr_agent::error::ApiError;
use ovr_bgp::evpn::RouteTarget;
use ovr_bgp::gobgp::{BgpError, GoBgp, Learnt};
use ovr_bgp::install;
use ovr_bgp::sync::{Context, Install, Installer, Newer};
use ovr_config::Config;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tracing::{debug, info, warn};

/// The speaker's table is listed again this often, or less for a large table
/// ([`super::listing_period`]): a safety net, the watch brings every change.
const RELIST_EVERY: Duration = Duration::from_secs(5);
/// A periodic listing waits until no change came for this long: while gobgpd gathers a
/// large table for a listing, the updates it takes in wait (about 0.1 s at 20,000
/// routes), and so would the routes arriving.
const QUIET: Duration = Duration::from_secs(1);
/// ... but not longer than this past its time, however busy the watch.
const MAX_DEFER: Duration = Duration::from_secs(60);

/// A listing's time per path when no listing of a sizeable table was timed yet: about
/// 0.5 s for 22,000 paths on the 2-vCPU VM of bench/RESULTS.md (gobgpd gathering and
/// encoding them, ovrd decoding them).
const LISTING_PER_PATH: Duration = Duration::from_micros(20);

/// The last listing: when it was answered, how long it took and how many paths it had.
#[derive(Debug, Clone, Copy)]
struct Listed {
    at: Instant,
    took: Duration,
    paths: usize,
}

impl Listed {
    /// What listing a table of `paths` is expected to take: a listing grows with the
    /// table, so one of an empty table (at the start) says nothing of the table a burst
    /// of routes left, whose listing would come at once and take seconds.
    fn expected(&self, paths: usize) -> Duration {
        let per_path = match u32::try_from(self.paths) {
            Ok(n) if n >= 1000 => self.took / n,
            _ => LISTING_PER_PATH,
        };
        let paths = u32::try_from(paths).unwrap_or(u32::MAX);
        self.took.max(per_path.saturating_mul(paths))
    }
}

/// Whether the periodic listing is due at `now`, with `paths` learnt: listed last as
/// `l`, the watch's latest change at `last_change`. Listings are spaced by what the
/// table's listing is expected to take now (`listing_period`).
fn relist_due(l: Listed, paths: usize, last_change: Option<Instant>, now: Instant) -> bool {
    let every = super::listing_period(RELIST_EVERY, l.expected(paths));
    let since = now.saturating_duration_since(l.at);
    let quiet = last_change.is_none_or(|c| now.saturating_duration_since(c) >= QUIET);
    since >= every && (quiet || since >= every + MAX_DEFER)
}

/// How often the VTEPs waiting for a MAC are looked at.
const TICK: Duration = Duration::from_millis(100);

/// Where a host's remote reachability comes from (`ovrd --reach`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Only BGP EVPN (etcd, if any, gives intent only).
    Evpn,
    /// The cluster's endpoints and BGP EVPN; an endpoint both know is installed once.
    Both,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Evpn => "evpn",
            Source::Both => "both",
        }
    }
}

/// What is learnt and what it made of the intent: shared by the learning task, the
/// cluster's member (which hands it each derived configuration) and the API.
pub struct Learning {
    state: AppState,
    source: Source,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The cluster's derived configuration (None without a cluster, or before the first).
    intent: Option<Config>,
    /// The AS route targets are made with, once learning started.
    asn: Option<u16>,
    installer: Installer,
    latency: Latency,
    /// Without a cluster: the agent's generation when this last installed (None: the
    /// intent is to be taken from the installed configuration again).
    seen: Option<u64>,
    vteps: Vec<Value>,
}

impl Learning {
    pub fn new(state: &AppState, source: Source) -> Arc<Self> {
        Arc::new(Self {
            state: state.clone(),
            source,
            inner: Mutex::default(),
        })
    }

    /// Installs the cluster's derived configuration with what is learnt.
    pub fn install_intent(&self, config: Config) -> Result<Applied, ApiError> {
        let mut g = lock(&self.inner);
        g.intent = Some(config.clone());
        let Some(ctx) = g.asn.and_then(|asn| context(&config, asn)) else {
            return self.state.install(config);
        };
        g.installer.set_intent(config.clone(), ctx);
        match g.installer.take() {
            Install::Whole(l) => {
                let r = self.state.install_layered(l.config, l.learnt);
                if r.is_err() {
                    g.installer.again();
                }
                r
            }
            // Not reached: a new intent goes the whole way.
            Install::Changes(_) | Install::Nothing => self.state.install(config),
        }
    }

    /// Installs what the installer has to install: on the cluster's intent, or (without
    /// a cluster) on the installed configuration, taking it again as the intent if it
    /// changed through the API since this last installed. False if it could not.
    fn follow(&self, g: &mut Inner, cluster: bool) -> bool {
        if cluster {
            let r = match g.installer.take() {
                Install::Nothing => return true,
                Install::Whole(l) => self.state.install_layered(l.config, l.learnt),
                Install::Changes(cs) => self
                    .state
                    .with_agent(|a| a.apply_learnt(cs))
                    .and_then(|r| r),
            };
            return match r {
                Ok(a) => {
                    report(&g.installer, &a);
                    true
                }
                Err(e) => {
                    warn!(error = %e, "bgp: what is learnt could not be installed");
                    g.installer.again();
                    false
                }
            };
        }
        let r = self.state.with_agent(|a| {
            let r = g.installer.take().apply(a);
            (r, a.generation())
        });
        match r {
            Ok((Ok(applied), generation)) => {
                g.seen = Some(generation);
                if let Some(a) = applied {
                    report(&g.installer, &a);
                }
                true
            }
            Ok((Err(e), _)) | Err(e) => {
                warn!(error = %e, "bgp: what is learnt could not be installed");
                g.seen = None;
                false
            }
        }
    }

    /// The intent's underlay and the VTEPs it has tunnels to; a new intent (or one not
    /// given to the installer yet) goes to the installer. Nothing without an intent or
    /// an underlay.
    fn refresh_intent(
        &self,
        g: &mut Inner,
        cluster: bool,
        asn: u16,
    ) -> Option<(Underlay, BTreeSet<IpAddr>)> {
        if cluster {
            // `install_intent` gives each new one; the first may have come before `asn`.
            if g.installer.intent().is_none() {
                let intent = g.intent.clone()?;
                let ctx = context(&intent, asn)?;
                g.installer.set_intent(intent, ctx);
            }
        } else {
            let a = self
                .state
                .agent()
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if g.seen != Some(a.generation()) || g.installer.intent().is_none() {
                let intent = install::strip(a.config());
                drop(a);
                let ctx = context(&intent, asn)?;
                g.installer.set_intent(intent, ctx);
                g.seen = None;
            }
        }
        let intent = g.installer.intent()?;
        let underlay = Underlay::of(intent)?;
        let tunneled = intent.tunnels.iter().map(|t| t.remote).collect();
        Some((underlay, tunneled))
    }

    /// `GET /api/v1/bgp/installed`.
    pub fn report(&self) -> Value {
        let g = lock(&self.inner);
        let last = g.installer.report();
        let i = last.installed;
        json!({
            "source": self.source.name(),
            "routes_learnt": g.installer.rib().len(),
            "installed": { "tunnels": i.tunnels, "flood": i.flood, "macs": i.macs,
                           "hosts": i.hosts, "prefixes": i.prefixes },
            "vteps": g.vteps,
            "unresolved": last.unresolved,
            "skipped": last.skipped,
            "refused": g.installer.rib().refused,
            "install_latency": g.latency.report(),
        })
    }
}

/// How long learnt changes took from ovrd's receipt of gobgpd's event (decoded) to
/// installed (the agent's commit done: the forwarding workers see them at their next
/// vector), in microseconds, one count per path added or withdrawn. An event whose
/// changes could not be installed yet (no intent, an install that failed) counts when
/// they are.
struct Latency(hdrhistogram::Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        // 1 µs to an hour at three significant digits (a few tens of KiB).
        Self(
            hdrhistogram::Histogram::new_with_bounds(1, 3_600_000_000, 3)
                .expect("constant bounds are valid"),
        )
    }
}

impl Latency {
    fn record(&mut self, received: Instant, paths: usize, now: Instant) {
        let us = now.saturating_duration_since(received).as_micros();
        self.0
            .saturating_record_n(u64::try_from(us).unwrap_or(u64::MAX), paths as u64);
    }

    fn report(&self) -> Value {
        let ms = |q: f64| self.0.value_at_quantile(q) as f64 / 1000.0;
        json!({ "paths": self.0.len(), "p50_ms": ms(0.5), "p99_ms": ms(0.99),
                "max_ms": self.0.max() as f64 / 1000.0 })
    }
}

/// What learning needs of an intent: the networks it imports and the host's VTEP.
fn context(intent: &Config, asn: u16) -> Option<Context> {
    let underlay = Underlay::of(intent)?;
    Some(Context {
        imports: imports(intent, asn),
        own: IpAddr::V4(underlay.addresses.first()?.0),
    })
}

fn report(installer: &Installer, applied: &Applied) {
    let changes = applied.table_changes;
    // Entry by entry, rounds come hundreds a second during a burst: a line each at debug
    // only (bench/RESULTS.md: at info they cost ovrd CPU while it learnt a table).
    if applied.incremental {
        debug!(table_changes = changes, "bgp: learnt changes installed");
        return;
    }
    let l = installer.report();
    let i = l.installed;
    info!(
        tunnels = i.tunnels,
        flood = i.flood,
        macs = i.macs,
        hosts = i.hosts,
        prefixes = i.prefixes,
        unresolved = l.unresolved.len(),
        table_changes = changes,
        "bgp: learnt reachability installed"
    );
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The route targets the intent's networks import, to their names. One that two
/// networks would import (a configured one equal to another network's ASN:VNI; the
/// configuration refuses two configured alike) stays with the first by name.
pub(crate) fn imports(c: &Config, asn: u16) -> BTreeMap<RouteTarget, String> {
    let mut networks: Vec<_> = c.networks.iter().collect();
    networks.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = BTreeMap::new();
    for n in networks {
        for t in super::targets(n, asn, super::Direction::Import) {
            if let Some(first) = out.get(&t) {
                warn!(route_target = %t, network = %n.name, imported_by = %first,
                      "bgp: a route target imported by two networks: the first keeps it");
                continue;
            }
            out.insert(t, n.name.clone());
        }
    }
    out
}

/// What the watch brings: a batch of changes, or word that it started again (what
/// came before may be missed: list the table).
enum Watched {
    /// The changes of one event, and when ovrd received it.
    Batch(Instant, Vec<Learnt>),
    Started,
}

/// Adds an event's paths to those waiting to be installed. Bounded while nothing can be
/// installed (no intent yet): events within a millisecond of the last, or beyond
/// `MAX_WAITING` of them, count from the earlier time (a latency overstated, never lost).
fn add_waiting(waiting: &mut Vec<(Instant, usize)>, at: Instant, paths: usize) {
    const MAX_WAITING: usize = 4096;
    let full = waiting.len() >= MAX_WAITING;
    match waiting.last_mut() {
        Some((t, n)) if full || at.saturating_duration_since(*t) < Duration::from_millis(1) => {
            *n += paths;
        }
        _ => waiting.push((at, paths)),
    }
}

/// A listing of gobgpd's table under way, on a task of its own.
struct Listing {
    asked: Instant,
    task: tokio::task::JoinHandle<Result<Vec<Learnt>, BgpError>>,
    /// What the watch changed since it was asked for.
    newer: Newer,
}

impl Listing {
    fn start(bgp: &GoBgp) -> Self {
        let bgp = bgp.clone();
        Self {
            asked: Instant::now(),
            task: tokio::spawn(async move { bgp.routes().await }),
            newer: Newer::default(),
        }
    }

    /// The listing's routes once it is done; never, while there is none.
    async fn answer(listing: &mut Option<Self>) -> Result<Vec<Learnt>, BgpError> {
        let Some(l) = listing else {
            return std::future::pending().await;
        };
        match (&mut l.task).await {
            Ok(r) => r,
            Err(e) => Err(BgpError::Unavailable {
                url: String::new(),
                message: format!("the listing's task ended: {e}"),
            }),
        }
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Follows gobgpd's table until a request fails; the caller connects again.
pub async fn run(url: &str, asn: u16, learning: &Arc<Learning>, cluster: bool) -> BgpError {
    let bgp = match GoBgp::connect(url).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    lock(&learning.inner).asn = Some(asn);
    // The watch runs on its own task (its first answer comes only with the first event)
    // and starts again if it ends; its batches come to the loop in order.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let watcher = {
        let bgp = bgp.clone();
        tokio::spawn(async move {
            loop {
                if let Ok(mut s) = bgp.watch().await {
                    if tx.send(Watched::Started).is_err() {
                        return;
                    }
                    while let Some(Ok(batch)) = s.next().await {
                        if tx.send(Watched::Batch(Instant::now(), batch)).is_err() {
                            return;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let e = follow(&bgp, asn, learning, cluster, &mut rx).await;
    watcher.abort();
    e
}

async fn follow(
    bgp: &GoBgp,
    asn: u16,
    learning: &Arc<Learning>,
    cluster: bool,
    rx: &mut mpsc::UnboundedReceiver<Watched>,
) -> BgpError {
    // A new connection: what was learnt before may be stale; the listing says.
    lock(&learning.inner).installer = Installer::default();
    lock(&learning.inner).seen = None;
    // The first listing comes when the watch has started (`Watched::Started`): one
    // asked for before might miss a change the watch does not bring either; and if the
    // watch never starts, after the period.
    let mut listed = Listed {
        at: Instant::now(),
        took: Duration::ZERO,
        paths: 0,
    };
    // The listing under way: it runs beside the watch (a large table takes seconds to
    // list, and changes must not wait for it).
    let mut listing: Option<Listing> = None;
    // The watch started again while a listing was under way: another one follows it.
    let mut list_again = false;
    let mut neighbours = Neighbours::default();
    let mut asker = arp::Asker::default();
    // Events learnt but not installed yet: when each came, and its paths.
    let mut waiting: Vec<(Instant, usize)> = Vec::new();
    // When the watch last brought a change.
    let mut last_change: Option<Instant> = None;
    loop {
        let due = || {
            let paths = lock(&learning.inner).installer.rib().len();
            relist_due(listed, paths, last_change, Instant::now())
        };
        if listing.is_none() && (list_again || due()) {
            list_again = false;
            listing = Some(Listing::start(bgp));
        }
        let mut batches = Vec::new();
        let mut answer = None;
        tokio::select! {
            w = rx.recv() => batches.extend(w),
            r = Listing::answer(&mut listing) => answer = Some(r),
            () = tokio::time::sleep(TICK) => {}
        }
        // Whatever else came meanwhile, in the same round.
        while let Ok(w) = rx.try_recv() {
            batches.push(w);
        }
        let mut changes = Vec::new();
        for w in batches {
            match w {
                Watched::Batch(at, b) => {
                    add_waiting(&mut waiting, at, b.len());
                    last_change = Some(at);
                    if let Some(l) = &mut listing {
                        l.newer.saw(&b);
                    }
                    changes.push(b);
                }
                // What the watch missed while it was down: a listing from now says.
                Watched::Started => list_again = true,
            }
        }
        let resync = match answer {
            Some(Ok(routes)) => listing.take().map(|mut l| {
                let took = l.asked.elapsed();
                listed = Listed {
                    at: Instant::now(),
                    took,
                    paths: routes.len(),
                };
                (routes, std::mem::take(&mut l.newer), took)
            }),
            Some(Err(e)) => return e,
            None => None,
        };
        let (underlay, tunneled, wanted) = {
            let mut g = lock(&learning.inner);
            for b in &changes {
                g.installer.learn(b);
            }
            // After the changes: a route the watch changed during the listing is newer.
            if let Some((routes, newer, took)) = &resync {
                let t = Instant::now();
                g.installer.resync(routes, newer);
                debug!(
                    paths = routes.len(),
                    newer = newer.len(),
                    listing_ms = took.as_secs_f64() * 1e3,
                    resync_ms = t.elapsed().as_secs_f64() * 1e3,
                    "bgp: gobgpd's table listed"
                );
            }
            let Some((underlay, tunneled)) = learning.refresh_intent(&mut g, cluster, asn) else {
                continue;
            };
            g.installer.refresh();
            (underlay, tunneled, g.installer.vteps())
        };
        // VTEPs the intent has a tunnel to need no MAC from here.
        let wanted: BTreeSet<IpAddr> = wanted
            .into_iter()
            .filter(|v| !tunneled.contains(v))
            .collect();
        let ask = neighbours.due(&wanted, Some(&underlay), Instant::now());
        if !ask.is_empty() {
            let (u, targets) = (underlay.clone(), ask.clone());
            let mut a = std::mem::take(&mut asker);
            let r = tokio::task::spawn_blocking(move || {
                let r = a.ask(&u, &targets, arp::WAIT);
                (a, r)
            })
            .await;
            let (answers, error) = match r {
                Ok((a, r)) => {
                    asker = a;
                    match r {
                        Ok(answers) => (answers, None),
                        Err(e) => (BTreeMap::new(), Some(e)),
                    }
                }
                Err(e) => (BTreeMap::new(), Some(e.to_string())),
            };
            if let Some(e) = &error {
                warn!(error = %e, "bgp: ARP for VTEPs could not be sent");
            }
            for (ip, mac) in &answers {
                info!(vtep = %ip, mac = %ovr_bgp::evpn::Mac(*mac), "bgp: VTEP resolved on the underlay");
            }
            neighbours.answered(&ask, &answers, error.as_deref(), Instant::now());
        }
        let mut g = lock(&learning.inner);
        g.vteps = neighbours.report();
        g.installer.set_neighbours(neighbours.macs());
        if learning.follow(&mut g, cluster) {
            let now = Instant::now();
            for (at, paths) in waiting.drain(..) {
                g.latency.record(at, paths, now);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(at: Instant, took: Duration, paths: usize) -> Listed {
        Listed { at, took, paths }
    }

    /// A listing comes once its period is over and the watch has been quiet for a
    /// second, or a minute late at the latest.
    #[test]
    fn a_periodic_listing_waits_for_a_quiet_watch_but_not_forever() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let listed = listed(t0, Duration::from_millis(2), 10);
        assert!(!relist_due(listed, 10, None, t0 + s(4)));
        assert!(relist_due(listed, 10, None, t0 + s(5)));
        assert!(relist_due(listed, 10, Some(t0 + s(3)), t0 + s(5)));
        assert!(!relist_due(listed, 10, Some(t0 + s(5)), t0 + s(5)));
        assert!(!relist_due(listed, 10, Some(t0 + s(64)), t0 + s(64)));
        assert!(relist_due(listed, 10, Some(t0 + s(65)), t0 + s(65)));
    }

    /// The period follows the table as it is now: after a listing of an empty table, a
    /// burst of 100,000 routes is not listed 5 s later (that listing would take about
    /// 2 s: 50 times that apart), and a table timed at 20,000 paths in 1 s is expected
    /// to take 5 s at 100,000.
    #[test]
    fn the_listing_period_follows_the_size_of_the_table() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let empty = listed(t0, Duration::from_millis(1), 0);
        assert!(relist_due(empty, 100, None, t0 + s(5)));
        assert!(!relist_due(empty, 100_000, None, t0 + s(99)));
        assert!(relist_due(empty, 100_000, None, t0 + s(100)));
        let timed = listed(t0, s(1), 20_000);
        assert_eq!(timed.expected(100_000), s(5));
        assert_eq!(timed.expected(10), s(1));
        assert!(!relist_due(timed, 100_000, None, t0 + s(249)));
        assert!(relist_due(timed, 100_000, None, t0 + s(250)));
    }

    #[test]
    fn waiting_events_within_a_millisecond_count_from_the_first_and_stay_bounded() {
        let t = Instant::now();
        let mut w = Vec::new();
        add_waiting(&mut w, t, 3);
        add_waiting(&mut w, t + Duration::from_micros(500), 2);
        add_waiting(&mut w, t + Duration::from_millis(2), 1);
        assert_eq!(w, [(t, 5), (t + Duration::from_millis(2), 1)]);
        for i in 0..10_000u64 {
            add_waiting(&mut w, t + Duration::from_millis(3 + 2 * i), 1);
        }
        assert_eq!(w.len(), 4096);
        assert_eq!(w.iter().map(|(_, n)| n).sum::<usize>(), 5 + 1 + 10_000);
    }

    #[test]
    fn latency_counts_each_path_and_reports_milliseconds() {
        let t = Instant::now();
        let mut l = Latency::default();
        l.record(t, 99, t + Duration::from_micros(200));
        l.record(t, 1, t + Duration::from_millis(30));
        let r = l.report();
        assert_eq!(r["paths"], 100);
        assert!((r["p50_ms"].as_f64().unwrap() - 0.2).abs() < 0.001, "{r}");
        assert!((r["p99_ms"].as_f64().unwrap() - 0.2).abs() < 0.001, "{r}");
        assert!((r["max_ms"].as_f64().unwrap() - 30.0).abs() < 0.1, "{r}");
    }
}
