//! What ovrd learns through its gobgpd, installed: the learnt routes (the speaker's best
//! paths, listed again at every change it reports and every second) read into
//! reachability for the networks of the host's intent, the VTEPs' underlay MACs resolved
//! (`arp`), and the host's whole configuration — its intent with that reachability
//! (`ovr_bgp::install::layer`) — installed through the agent, which applies only the
//! difference. A withdrawn route, or one gone with its session (gobgpd drops a lost
//! neighbor's paths), is gone from the next listing and so from the tables.
//!
//! The intent is the cluster's derived configuration (`--etcd`: the member hands each one
//! to `Learning::install_intent`) or, without a cluster, the installed configuration
//! without what this layer added (`install::strip`), so that changes through the API
//! keep what is learnt.

use super::arp::{self, Neighbours, Underlay};
use ovr_agent::Applied;
use ovr_agent::api::AppState;
use ovr_agent::error::ApiError;
use ovr_bgp::evpn::RouteTarget;
use ovr_bgp::gobgp::{BgpError, GoBgp};
use ovr_bgp::install::{self, Layered};
use ovr_bgp::learnt::{Reach, Rib};
use ovr_config::Config;
use ovr_config::values::Mac;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio_stream::StreamExt;
use tracing::{info, warn};

/// The speaker's table is listed again at least this often.
const RELIST_EVERY: Duration = Duration::from_secs(1);
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
    reach: Reach,
    macs: BTreeMap<IpAddr, Mac>,
    /// What the last layering made (and what was installed).
    last: Layered,
    installed: Option<Config>,
    refused: BTreeMap<&'static str, u64>,
    learnt: usize,
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
        g.intent = Some(config);
        let l = layer(&g);
        let r = self.state.install(l.config.clone());
        if r.is_ok() {
            g.installed = Some(l.config.clone());
        }
        g.last = l;
        r
    }

    /// The intent: the cluster's, or (without a cluster) the installed configuration
    /// without this layer.
    fn intent(&self, cluster: bool) -> Option<Config> {
        if cluster {
            return lock(&self.inner).intent.clone();
        }
        let a = self
            .state
            .agent()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some(install::strip(a.config()))
    }

    /// Takes new reachability and MACs, and installs the result if it changed.
    fn follow(&self, cluster: bool, reach: Reach, macs: BTreeMap<IpAddr, Mac>) {
        let mut g = lock(&self.inner);
        g.reach = reach;
        g.macs = macs;
        if cluster {
            if g.intent.is_none() {
                return;
            }
            let l = layer(&g);
            if g.installed.as_ref() != Some(&l.config) {
                match self.state.install(l.config.clone()) {
                    Ok(a) => {
                        report(&l, a.table_changes);
                        g.installed = Some(l.config.clone());
                    }
                    Err(e) => warn!(error = %e, "bgp: what is learnt could not be installed"),
                }
            }
            g.last = l;
            return;
        }
        let mut made = None;
        let r = self.state.update(|installed| {
            let l = install::layer(&install::strip(installed), &g.reach, &g.macs);
            let changed = l.config != *installed;
            let c = changed.then(|| l.config.clone());
            made = Some(l);
            c
        });
        match r {
            Ok(Some(a)) => {
                if let Some(l) = &made {
                    report(l, a.table_changes);
                }
            }
            Ok(None) => {}
            Err(e) => warn!(error = %e, "bgp: what is learnt could not be installed"),
        }
        if let Some(l) = made {
            g.last = l;
        }
    }

    /// `GET /api/v1/bgp/installed`.
    pub fn report(&self) -> Value {
        let g = lock(&self.inner);
        let i = g.last.installed;
        json!({
            "source": self.source.name(),
            "routes_learnt": g.learnt,
            "installed": { "tunnels": i.tunnels, "flood": i.flood, "macs": i.macs,
                           "hosts": i.hosts, "prefixes": i.prefixes },
            "vteps": g.vteps,
            "unresolved": g.last.unresolved,
            "skipped": g.last.skipped,
            "refused": g.refused,
        })
    }
}

fn layer(g: &Inner) -> Layered {
    match &g.intent {
        Some(i) => install::layer(i, &g.reach, &g.macs),
        None => Layered::default(),
    }
}

fn report(l: &Layered, changes: usize) {
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

/// The route targets the intent's networks import (ASN:VNI), to their names.
fn imports(c: &Config, asn: u16) -> BTreeMap<RouteTarget, String> {
    c.networks
        .iter()
        .filter_map(|n| Some((RouteTarget::auto(asn, n.vni?), n.name.clone())))
        .collect()
}

/// Follows gobgpd's table until a request fails; the caller connects again.
pub async fn run(url: &str, asn: u16, learning: &Arc<Learning>, cluster: bool) -> BgpError {
    let bgp = match GoBgp::connect(url).await {
        Ok(b) => b,
        Err(e) => return e,
    };
    // Changes reported by the speaker wake the loop; the watch runs on its own task (its
    // first answer comes only with the first event) and starts again if it ends.
    let changed = Arc::new(Notify::new());
    let watcher = {
        let (bgp, changed) = (bgp.clone(), Arc::clone(&changed));
        tokio::spawn(async move {
            loop {
                if let Ok(mut s) = bgp.watch().await {
                    while let Some(Ok(_)) = s.next().await {
                        changed.notify_one();
                    }
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let e = follow(&bgp, asn, learning, cluster, &changed).await;
    watcher.abort();
    e
}

async fn follow(
    bgp: &GoBgp,
    asn: u16,
    learning: &Arc<Learning>,
    cluster: bool,
    changed: &Notify,
) -> BgpError {
    let mut rib = Rib::default();
    let mut listed: Option<Instant> = None;
    let mut neighbours = Neighbours::default();
    loop {
        let woken = tokio::select! {
            () = changed.notified() => true,
            () = tokio::time::sleep(TICK) => false,
        };
        if woken || listed.is_none_or(|t| t.elapsed() >= RELIST_EVERY) {
            match bgp.routes().await {
                Ok(routes) => {
                    rib = Rib::default();
                    for l in &routes {
                        rib.apply(l);
                    }
                    listed = Some(Instant::now());
                }
                Err(e) => return e,
            }
        }
        let Some(intent) = learning.intent(cluster) else {
            continue;
        };
        let Some(underlay) = Underlay::of(&intent) else {
            continue;
        };
        let own = IpAddr::V4(underlay.addresses[0].0);
        let reach = rib.reach(&imports(&intent, asn), own);
        // VTEPs the intent has a tunnel to need no MAC from here.
        let tunneled: BTreeSet<IpAddr> = intent.tunnels.iter().map(|t| t.remote).collect();
        let wanted: BTreeSet<IpAddr> = install::vteps(&reach)
            .into_iter()
            .filter(|v| !tunneled.contains(v))
            .collect();
        let ask = neighbours.due(&wanted, Some(&underlay), Instant::now());
        if !ask.is_empty() {
            let (u, targets) = (underlay.clone(), ask.clone());
            let r = tokio::task::spawn_blocking(move || arp::ask(&u, &targets, arp::WAIT)).await;
            let (answers, error) = match r {
                Ok(Ok(a)) => (a, None),
                Ok(Err(e)) => (BTreeMap::new(), Some(e)),
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
        {
            let mut g = lock(&learning.inner);
            g.refused = rib.refused.clone();
            g.learnt = rib.len();
            g.vteps = neighbours.report();
        }
        learning.follow(cluster, reach, neighbours.macs());
    }
}
