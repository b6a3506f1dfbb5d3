//! The REST API: routes, the shared state, and the OpenAPI document (generated from the
//! handlers' annotations, served at /openapi.json).

pub mod bgp;
mod body;
pub mod chains;
pub mod config;
pub mod diagnose;
pub mod intent;
pub mod ipam;
mod observe;

pub use body::{Body, Limit, parse};

use crate::capture::Captures;
use crate::error::{ApiError, ErrorBody};
use crate::worker::WorkerClient;
use crate::{Agent, Applied};
use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use ovr_config::Names;
use std::sync::{Arc, Mutex, OnceLock};
use utoipa::OpenApi;

/// Request bodies above this are refused (413): a batch of 100K routes fits.
pub const DEFAULT_BODY_LIMIT: usize = 16 << 20;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    agent: Arc<Mutex<Agent>>,
    worker: Option<WorkerClient>,
    captures: Arc<Mutex<Captures>>,
    /// The agent's names as of its last change: reads that only need names (counters,
    /// flows) never wait behind a change holding the agent.
    names: Arc<Mutex<Arc<Names>>>,
    /// Set when ovrd is a member of a cluster: the cluster then owns the configuration.
    cluster: Arc<OnceLock<ClusterLink>>,
    /// Set when ovrd speaks BGP (`--bgp`).
    bgp: Arc<OnceLock<Arc<dyn bgp::BgpView>>>,
    /// The links of interfaces that have a peer of their own (memif), as JSON.
    links: Arc<OnceLock<LinksReport>>,
    /// Whether such a link is connected, by interface name (chain health).
    peer_up: Arc<OnceLock<PeerLinkUp>>,
    /// The workers' health probes of service instances (ovrd shares it with them).
    probes: Arc<ovr_dataplane::probe::Book>,
}

/// The state of interfaces' links (memif: up or down, the peer's name and version), as
/// `GET /api/v1/links` serves it.
pub type LinksReport = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Whether the link of an interface that has a peer of its own (memif) is connected to
/// that peer, by the interface's name: a service port's health (`crate::health`).
pub type PeerLinkUp = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What the API knows of the cluster ovrd is a member of.
#[derive(Clone)]
pub struct ClusterLink {
    /// This host's name in the cluster.
    pub host: String,
    /// The cluster's intent, read and written through `/api/v1/cluster/...`.
    pub intent: Arc<dyn intent::IntentStore>,
    /// Addresses handed out cluster-wide (`/api/v1/cluster/ipam/...`), if offered.
    pub ipam: Option<Arc<dyn ipam::IpamStore>>,
    /// The member's report (JSON), as `GET /api/v1/cluster` serves it.
    pub report: Arc<dyn Fn() -> serde_json::Value + Send + Sync>,
    /// Prometheus lines for /metrics.
    pub metrics: Arc<dyn Fn() -> String + Send + Sync>,
}

impl AppState {
    pub fn new(agent: Agent, worker: Option<WorkerClient>) -> Self {
        Self {
            names: Arc::new(Mutex::new(agent.shared_names())),
            agent: Arc::new(Mutex::new(agent)),
            worker,
            captures: Arc::default(),
            cluster: Arc::default(),
            bgp: Arc::default(),
            links: Arc::default(),
            peer_up: Arc::default(),
            probes: Arc::default(),
        }
    }

    /// The book of health probes the workers write and the health thread reads.
    pub fn probes(&self) -> &Arc<ovr_dataplane::probe::Book> {
        &self.probes
    }

    /// Gives the API a view of ovrd's BGP speaker (`/api/v1/bgp/...`).
    pub fn speak_bgp(&self, view: Arc<dyn bgp::BgpView>) {
        let _ = self.bgp.set(view);
    }

    /// Sets where `GET /api/v1/links` comes from (once).
    pub fn report_links(&self, report: LinksReport) {
        let _ = self.links.set(report);
    }

    /// Sets how the link of an interface with a peer of its own is known to be up (once).
    pub fn follow_peer_links(&self, up: PeerLinkUp) {
        let _ = self.peer_up.set(up);
    }

    /// Whether interface `name`'s peer (memif) is connected: false when nobody said how
    /// to know.
    pub fn peer_link_up(&self, name: &str) -> bool {
        self.peer_up.get().is_some_and(|f| f(name))
    }

    pub fn links(&self) -> serde_json::Value {
        self.links
            .get()
            .map_or_else(|| serde_json::Value::Array(Vec::new()), |f| f())
    }

    /// Hands the configuration to a cluster: from now on it is installed with
    /// `install`, and changes through the API are refused (409), since the next change
    /// in the cluster would undo them.
    pub fn join_cluster(&self, link: ClusterLink) {
        let _ = self.cluster.set(link);
    }

    pub fn cluster(&self) -> Option<&ClusterLink> {
        self.cluster.get()
    }

    /// Installs a whole configuration for a caller outside the API (the cluster member):
    /// like `PUT /api/v1/config`, on the calling thread.
    pub fn install(&self, config: ovr_config::Config) -> Result<Applied, ApiError> {
        self.install_with(|a| a.replace(config))
    }

    /// Installs a whole configuration and the entries learnt beside it (`Agent::
    /// replace_layered`), as `install` does.
    pub fn install_layered(
        &self,
        config: ovr_config::Config,
        learnt: crate::learnt::Learnt,
    ) -> Result<Applied, ApiError> {
        self.install_with(|a| a.replace_layered(config, learnt))
    }

    fn install_with<T>(
        &self,
        replace: impl FnOnce(&mut Agent) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let mut a = self
            .agent
            .lock()
            .map_err(|_| ApiError::Internal("the agent failed earlier".into()))?;
        let r = replace(&mut a);
        *self
            .names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = a.shared_names();
        if let Some(w) = &self.worker {
            w.wake_all();
        }
        r
    }

    /// Installs the configuration and learnt entries `f` makes of the installed ones
    /// (None: nothing to change), holding the agent meanwhile so that no change through
    /// the API comes between.
    pub fn update(
        &self,
        f: impl FnOnce(&Agent) -> Option<(ovr_config::Config, crate::learnt::Learnt)>,
    ) -> Result<Option<Applied>, ApiError> {
        self.install_with(|a| match f(a) {
            Some((config, learnt)) => a.replace_layered(config, learnt).map(Some),
            None => Ok(None),
        })
    }

    /// Runs `f` on the agent (holding it, so that no change through the API comes
    /// between), then publishes the names and wakes the workers as a change does: how
    /// ovrd applies a batch of changes learnt through BGP.
    pub fn with_agent<T>(&self, f: impl FnOnce(&mut Agent) -> T) -> Result<T, ApiError> {
        let mut a = self
            .agent
            .lock()
            .map_err(|_| ApiError::Internal("the agent failed earlier".into()))?;
        let before = a.generation();
        let r = f(&mut a);
        if a.generation() != before {
            *self
                .names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = a.shared_names();
            if let Some(w) = &self.worker {
                w.wake_all();
            }
        }
        Ok(r)
    }

    /// The names and ids installed, without taking the agent.
    fn names(&self) -> Arc<Names> {
        let n = self
            .names
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(&n)
    }

    /// The agent, for a caller outside the API (tests, ovrd at shutdown).
    pub fn agent(&self) -> &Arc<Mutex<Agent>> {
        &self.agent
    }

    /// Runs `f` on the agent off the async threads: a commit waits for the worker to
    /// leave the old copy of the tables.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Agent) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let (agent, names) = (Arc::clone(&self.agent), Arc::clone(&self.names));
        tokio::task::spawn_blocking(move || {
            let mut a = agent
                .lock()
                .map_err(|_| ApiError::Internal("the agent failed earlier".into()))?;
            let r = f(&mut a);
            *names
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = a.shared_names();
            Ok(r)
        })
        .await
        .map_err(|e| ApiError::Internal(format!("the agent task failed: {e}")))?
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Agent) -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        self.with(move |a| f(a)).await
    }

    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Agent) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        if self.cluster.get().is_some() {
            return Err(ApiError::Conflict {
                message: "this ovrd is programmed by its cluster (etcd): write the intent there \
                          (ovrctl cluster ...); a change made here would be undone by the next one"
                    .into(),
                field: None,
            });
        }
        self.with(f).await?
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "ovr agent API",
        description = "The desired configuration of ovrd, its counters and flows, packet traces and captures. Every change is validated whole and applied all-or-nothing; errors are JSON objects naming the field."
    ),
    paths(
        config::interfaces::list,
        config::interfaces::get,
        config::interfaces::create,
        config::interfaces::replace,
        config::interfaces::delete,
        config::networks::list,
        config::networks::get,
        config::networks::create,
        config::networks::replace,
        config::networks::delete,
        config::tunnels::list,
        config::tunnels::get,
        config::tunnels::create,
        config::tunnels::replace,
        config::tunnels::delete,
        config::nexthops::list,
        config::nexthops::get,
        config::nexthops::create,
        config::nexthops::replace,
        config::nexthops::delete,
        config::routes::list,
        config::routes::get,
        config::routes::create,
        config::routes::replace,
        config::routes::delete,
        config::bridge::list,
        config::bridge::get,
        config::bridge::create,
        config::bridge::replace,
        config::bridge::delete,
        config::labels::list,
        config::labels::get,
        config::labels::create,
        config::labels::replace,
        config::labels::delete,
        config::policies,
        config::policy,
        config::set_policy,
        config::reset_policy,
        config::batch,
        config::get_config,
        config::put_config,
        config::ids,
        observe::counters,
        observe::interface_counters,
        observe::node_counters,
        observe::drop_counters,
        observe::metrics,
        observe::cluster,
        intent::networks::list,
        intent::networks::create,
        intent::networks::get,
        intent::networks::replace,
        intent::networks::delete,
        intent::policies::list,
        intent::policies::create,
        intent::policies::get,
        intent::policies::replace,
        intent::policies::delete,
        intent::services::list,
        intent::services::create,
        intent::services::get,
        intent::services::replace,
        intent::services::delete,
        intent::chains::list,
        intent::chains::create,
        intent::chains::get,
        intent::chains::replace,
        intent::chains::delete,
        intent::ports::list,
        intent::ports::create,
        intent::ports::get,
        intent::ports::replace,
        intent::ports::delete,
        ipam::list,
        ipam::allocate,
        ipam::release,
        observe::links,
        chains::chains,
        observe::flows,
        observe::delete_flows,
        observe::flow,
        observe::delete_flow,
        bgp::neighbors,
        bgp::routes,
        bgp::installed,
        bgp::learnt,
        diagnose::trace,
        diagnose::trace_add,
        diagnose::trace_clear,
        diagnose::captures,
        diagnose::capture_start,
        diagnose::capture,
        diagnose::capture_stop,
    ),
    components(schemas(ErrorBody, Applied, ipam::Allocate))
)]
pub struct ApiDoc;

async fn openapi() -> impl IntoResponse {
    match ApiDoc::openapi().to_json() {
        Ok(j) => ([(header::CONTENT_TYPE, "application/json")], j).into_response(),
        Err(e) => ApiError::Internal(e.to_string()).into_response(),
    }
}

async fn not_found() -> ApiError {
    ApiError::NotFound("no such endpoint (see /openapi.json)".into())
}

/// Requires `Authorization: Bearer TOKEN` (the TCP listener).
async fn bearer(State(token): State<Arc<str>>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match given {
        Some(g) if constant_time_eq(g.as_bytes(), token.as_bytes()) => next.run(req).await,
        _ => ApiError::Unauthorized.into_response(),
    }
}

/// The token of an `Authorization: Bearer TOKEN` header; the scheme's name is
/// case-insensitive (RFC 9110, 11.1), and spaces may separate it from the token.
fn bearer_token(v: &str) -> Option<&str> {
    let (scheme, token) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start_matches(' '))
}

/// Compares without stopping at the first difference (the token's prefix must not be
/// learnable from response times).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The API's routes. `token`: every request must carry it (for TCP listeners).
pub fn router(state: AppState, body_limit: usize, token: Option<Arc<str>>) -> Router {
    use axum::routing::{get as g, post};
    use config::*;
    let api = Router::new()
        .route(
            "/api/v1/interfaces",
            g(interfaces::list).post(interfaces::create),
        )
        .route(
            "/api/v1/interfaces/{name}",
            g(interfaces::get)
                .put(interfaces::replace)
                .delete(interfaces::delete),
        )
        .route("/api/v1/networks", g(networks::list).post(networks::create))
        .route(
            "/api/v1/networks/{name}",
            g(networks::get)
                .put(networks::replace)
                .delete(networks::delete),
        )
        .route("/api/v1/tunnels", g(tunnels::list).post(tunnels::create))
        .route(
            "/api/v1/tunnels/{name}",
            g(tunnels::get)
                .put(tunnels::replace)
                .delete(tunnels::delete),
        )
        .route("/api/v1/nexthops", g(nexthops::list).post(nexthops::create))
        .route(
            "/api/v1/nexthops/{name}",
            g(nexthops::get)
                .put(nexthops::replace)
                .delete(nexthops::delete),
        )
        .route("/api/v1/routes", g(routes::list).post(routes::create))
        .route(
            "/api/v1/routes/{network}/{addr}/{len}",
            g(routes::get).put(routes::replace).delete(routes::delete),
        )
        .route("/api/v1/bridge", g(bridge::list).post(bridge::create))
        .route(
            "/api/v1/bridge/{network}/{mac}",
            g(bridge::get).put(bridge::replace).delete(bridge::delete),
        )
        .route("/api/v1/labels", g(labels::list).post(labels::create))
        .route(
            "/api/v1/labels/{label}",
            g(labels::get).put(labels::replace).delete(labels::delete),
        )
        .route("/api/v1/policies", g(policies))
        .route(
            "/api/v1/policies/{network}",
            g(policy).put(set_policy).delete(reset_policy),
        )
        .route("/api/v1/batch", post(batch))
        .route("/api/v1/config", g(get_config).put(put_config))
        .route("/api/v1/ids", g(ids))
        .route("/api/v1/cluster", g(observe::cluster))
        .route(
            "/api/v1/cluster/networks",
            g(intent::networks::list).post(intent::networks::create),
        )
        .route(
            "/api/v1/cluster/networks/{name}",
            g(intent::networks::get)
                .put(intent::networks::replace)
                .delete(intent::networks::delete),
        )
        .route(
            "/api/v1/cluster/policies",
            g(intent::policies::list).post(intent::policies::create),
        )
        .route(
            "/api/v1/cluster/policies/{name}",
            g(intent::policies::get)
                .put(intent::policies::replace)
                .delete(intent::policies::delete),
        )
        .route(
            "/api/v1/cluster/services",
            g(intent::services::list).post(intent::services::create),
        )
        .route(
            "/api/v1/cluster/services/{name}",
            g(intent::services::get)
                .put(intent::services::replace)
                .delete(intent::services::delete),
        )
        .route(
            "/api/v1/cluster/chains",
            g(intent::chains::list).post(intent::chains::create),
        )
        .route(
            "/api/v1/cluster/chains/{name}",
            g(intent::chains::get)
                .put(intent::chains::replace)
                .delete(intent::chains::delete),
        )
        .route(
            "/api/v1/cluster/ports",
            g(intent::ports::list).post(intent::ports::create),
        )
        .route(
            "/api/v1/cluster/ports/{host}/{name}",
            g(intent::ports::get)
                .put(intent::ports::replace)
                .delete(intent::ports::delete),
        )
        .route(
            "/api/v1/cluster/ipam/{network}",
            g(ipam::list).post(ipam::allocate).delete(ipam::release),
        )
        .route("/api/v1/links", g(observe::links))
        .route("/api/v1/chains", g(chains::chains))
        .route("/api/v1/counters", g(observe::counters))
        .route(
            "/api/v1/counters/interfaces",
            g(observe::interface_counters),
        )
        .route("/api/v1/counters/nodes", g(observe::node_counters))
        .route("/api/v1/counters/drops", g(observe::drop_counters))
        .route(
            "/api/v1/flows",
            g(observe::flows).delete(observe::delete_flows),
        )
        .route(
            "/api/v1/flows/{id}",
            g(observe::flow).delete(observe::delete_flow),
        )
        .route(
            "/api/v1/trace",
            g(diagnose::trace)
                .post(diagnose::trace_add)
                .delete(diagnose::trace_clear),
        )
        .route(
            "/api/v1/captures",
            g(diagnose::captures).post(diagnose::capture_start),
        )
        .route(
            "/api/v1/captures/{id}",
            g(diagnose::capture).delete(diagnose::capture_stop),
        )
        .route("/api/v1/bgp/neighbors", g(bgp::neighbors))
        .route("/api/v1/bgp/routes", g(bgp::routes))
        .route("/api/v1/bgp/installed", g(bgp::installed))
        .route("/api/v1/bgp/learnt", g(bgp::learnt))
        .route("/metrics", g(observe::metrics))
        .route("/openapi.json", get(openapi))
        .fallback(not_found)
        .method_not_allowed_fallback(|| async {
            (
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                axum::Json(ErrorBody {
                    error: "method not allowed on this endpoint (see /openapi.json)".into(),
                    field: None,
                }),
            )
        })
        .with_state(state)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::Extension(Limit(body_limit)));
    match token {
        Some(t) => api.layer(middleware::from_fn_with_state(t, bearer)),
        None => api,
    }
}
