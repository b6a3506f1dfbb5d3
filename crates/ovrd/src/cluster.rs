//! ovrd as a member of a cluster (`--etcd`): the member runs on a thread of its own with
//! its own runtime, installs what it derives through the API's state (as a
//! `PUT /api/v1/config` would, so names and counters follow), and is reported at
//! `GET /api/v1/cluster` and in /metrics.

use crate::evpn::learn::Learning;
use crate::ports::Attached;
use ovr_agent::api::intent::{IntentKey, IntentKind, IntentStore, Pending};
use ovr_agent::api::ipam::{Allocate, IpamStore};
use ovr_agent::api::{AppState, ClusterLink};
use ovr_agent::error::ApiError;
use ovr_cluster::etcd::{Endpoints, Etcd};
use ovr_cluster::intent::{IntentError, Intents, Kind};
use ovr_cluster::ipam::{Ipam, IpamError, Lease, Want};
use ovr_cluster::member::{Member, Settings, SharedStatus, Sink, Status};
use ovr_config::model::Config;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::OnceCell;
use tracing::warn;

/// The derived configuration goes to the agent; a port is up when a worker receives
/// from its interface and, for a service port, while its health (link and probe) holds.
struct Agent {
    state: AppState,
    attached: Attached,
    /// With `--reach evpn|both`: what BGP learnt is added to each configuration.
    learning: Option<Arc<Learning>>,
}

impl Sink for Agent {
    fn install(&mut self, config: Config) -> Result<usize, String> {
        let applied = match &self.learning {
            Some(l) => l.install_intent(config),
            None => self.state.install(config),
        };
        let applied = applied.map_err(|e| match e.field() {
            Some(f) => format!("{f}: {e}"),
            None => e.to_string(),
        })?;
        Ok(applied.table_changes)
    }

    fn interface_up(&self, name: &str) -> bool {
        // A service instance failing its probe keeps its interface: its endpoint goes all
        // the same, so that the other hosts move its sessions.
        self.attached.contains(name) && !ovr_agent::health::held_down(&self.state, name)
    }
}

/// Starts the member: from here on the cluster owns the configuration.
pub fn join(
    endpoints: Endpoints,
    settings: Settings,
    state: &AppState,
    attached: Attached,
    learning: Option<Arc<Learning>>,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cluster runtime: {e}"))?;
    let up = attached.clone();
    let sink = Agent {
        state: state.clone(),
        attached,
        learning,
    };
    let status: SharedStatus = SharedStatus::default();
    let (report, metrics) = (Arc::clone(&status), Arc::clone(&status));
    let api = Arc::new(Api {
        endpoints: endpoints.clone(),
        intents: Arc::default(),
    });
    state.join_cluster(ClusterLink {
        host: settings.host.clone(),
        intent: api.clone(),
        ipam: Some(api),
        // With the interfaces workers receive from: a port's is there once this host
        // forwards for it (the CNI plugin's ADD waits for that).
        report: Arc::new(move || {
            let mut v = serde_json::to_value(&*lock(&report)).unwrap_or_default();
            v["attached"] = serde_json::json!(up.names());
            v
        }),
        metrics: Arc::new(move || prometheus(&lock(&metrics))),
    });
    std::thread::Builder::new()
        .name("ovr-cluster".into())
        .spawn(move || {
            runtime.block_on(async move {
                // Connecting fails only on bad settings (a certificate file); etcd being
                // away is the member's to ride out.
                let store = loop {
                    match Etcd::connect(&endpoints).await {
                        Ok(s) => break s,
                        Err(e) => {
                            warn!(error = %e, "cluster: cannot set up the etcd client; retrying");
                            lock(&status).last_error = Some(e.to_string());
                            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                        }
                    }
                };
                Member::with_status(store, sink, settings, status)
                    .run()
                    .await;
            });
        })
        .map_err(|e| format!("cluster thread: {e}"))?;
    Ok(())
}

/// The API's way to the cluster's intent: its own etcd client, made at the first
/// request on the API's runtime (a client's connections belong to the runtime that made
/// them, and the member's runs on the member's thread).
struct Api {
    endpoints: Endpoints,
    intents: Arc<OnceCell<Intents>>,
}

impl Api {
    /// The API's etcd client, made at the first request.
    fn client(
        &self,
    ) -> impl std::future::Future<Output = Result<Intents, ApiError>> + Send + use<> {
        let (cell, endpoints) = (Arc::clone(&self.intents), self.endpoints.clone());
        async move {
            cell.get_or_try_init(|| async { Etcd::connect(&endpoints).await.map(Intents::new) })
                .await
                .cloned()
                .map_err(|e| api_error(e.into()))
        }
    }

    fn call<T: Send + 'static, F>(
        &self,
        f: impl FnOnce(Intents) -> F + Send + 'static,
    ) -> Pending<T>
    where
        F: std::future::Future<Output = Result<T, IntentError>> + Send,
    {
        let client = self.client();
        Box::pin(async move { f(client.await?).await.map_err(api_error) })
    }

    /// Like `call`, for the address allocator (on the same etcd client).
    fn ipam<T: Send + 'static, F>(&self, f: impl FnOnce(Ipam) -> F + Send + 'static) -> Pending<T>
    where
        F: std::future::Future<Output = Result<T, IpamError>> + Send,
    {
        let client = self.client();
        Box::pin(async move {
            let etcd = client.await?.etcd().clone();
            f(Ipam::new(etcd)).await.map_err(ipam_error)
        })
    }
}

fn ipam_error(e: IpamError) -> ApiError {
    match &e {
        IpamError::NoNetwork(_) => ApiError::NotFound(e.to_string()),
        IpamError::NoSubnet(..) | IpamError::Invalid(_) => {
            ApiError::invalid("network", e.to_string())
        }
        IpamError::Exhausted(_) => ApiError::Conflict {
            message: e.to_string(),
            field: None,
        },
        IpamError::Taken { .. } => ApiError::Conflict {
            message: e.to_string(),
            field: Some("address".into()),
        },
        IpamError::Unavailable(_) => ApiError::Unavailable(e.to_string()),
    }
}

fn lease_json(address: std::net::IpAddr, l: &Lease) -> Value {
    serde_json::json!({"address": address, "owner": l.owner, "host": l.host, "tag": l.tag})
}

impl IpamStore for Api {
    fn allocate(&self, network: String, a: Allocate) -> Pending<Value> {
        self.ipam(move |i| async move {
            let lease = Lease {
                owner: a.owner,
                host: a.host.unwrap_or_default(),
                tag: a.tag,
            };
            let want = match a.address {
                Some(w) => Want::Address(w),
                None => Want::Family(a.family.unwrap_or(4)),
            };
            let got = i.allocate(&network, lease, want).await?;
            let mut v = lease_json(got.address, &got.lease);
            v["prefix_len"] = got.prefix_len.into();
            v["gateway"] = serde_json::json!(got.gateway);
            Ok(v)
        })
    }

    fn release(
        &self,
        network: String,
        owner: String,
        address: Option<std::net::IpAddr>,
    ) -> Pending<Value> {
        self.ipam(move |i| async move {
            let gone = i.release(&network, &owner, address).await?;
            Ok(serde_json::json!({ "released": gone }))
        })
    }

    fn list(&self, network: String) -> Pending<Value> {
        self.ipam(move |i| async move {
            let all = i.list(&network).await?;
            Ok(Value::Array(
                all.iter().map(|(a, l)| lease_json(*a, l)).collect(),
            ))
        })
    }
}

fn kind(k: IntentKind) -> Kind {
    match k {
        IntentKind::Network => Kind::Network,
        IntentKind::Policy => Kind::Policy,
        IntentKind::Port => Kind::Port,
        IntentKind::Service => Kind::Service,
        IntentKind::Chain => Kind::Chain,
    }
}

fn key(k: &IntentKey) -> ovr_cluster::keys::Key {
    kind(k.kind).key(&k.host, &k.name)
}

/// An intent refusal as the API answers it; an invalid value names its field
/// (`KEY: FIELD: reason` from the check).
fn api_error(e: IntentError) -> ApiError {
    match e {
        IntentError::Invalid(m) => {
            let rest = m.split_once(": ").map_or(m.as_str(), |(_, r)| r);
            let field = rest
                .split_once(": ")
                .map(|(f, _)| f)
                .filter(|f| !f.contains(' '))
                .unwrap_or("");
            ApiError::invalid(field, m.clone())
        }
        IntentError::Exists(_) => ApiError::Conflict {
            message: e.to_string(),
            field: Some("name".into()),
        },
        IntentError::NotFound(_) => ApiError::NotFound(e.to_string()),
        IntentError::Unavailable(_) => ApiError::Unavailable(e.to_string()),
    }
}

impl IntentStore for Api {
    fn list(&self, k: IntentKind, host: Option<String>) -> Pending<Vec<Value>> {
        self.call(move |i| async move { i.list(kind(k), host.as_deref()).await })
    }

    fn get(&self, k: IntentKey) -> Pending<Value> {
        self.call(move |i| async move { i.get(&key(&k)).await })
    }

    fn write(&self, k: IntentKey, value: Value, replace: bool) -> Pending<i64> {
        self.call(move |i| async move { i.write(&key(&k), &value, replace).await })
    }

    fn delete(&self, k: IntentKey) -> Pending<i64> {
        self.call(move |i| async move { i.delete(&key(&k)).await })
    }
}

fn lock(s: &SharedStatus) -> std::sync::MutexGuard<'_, Status> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn prometheus(s: &Status) -> String {
    ovr_agent::metrics::gauges([
        (
            "ovr_cluster_connected",
            "1 while a session with etcd is up",
            i64::from(s.connected),
        ),
        (
            "ovr_cluster_applied_revision",
            "the etcd revision whose state is installed",
            s.applied_revision,
        ),
        (
            "ovr_cluster_rejected_keys",
            "keys refused (bad value or conflict; the log and GET /api/v1/cluster name them)",
            s.rejected.len() as i64,
        ),
        (
            "ovr_cluster_table_changes",
            "table changes made by what the cluster installed",
            s.table_changes as i64,
        ),
        (
            "ovr_cluster_sessions",
            "listings of etcd (each after the first is a resync)",
            s.sessions as i64,
        ),
    ])
}
