//! BGP as this ovrd's speaker sees it (`ovrd --bgp`): its neighbors with their sessions,
//! the EVPN routes out (advertised for this host) and in (learnt, with why ovr refuses
//! those it does not use), and the entries the agent installs from them. The speaker is
//! behind a small trait (`BgpView`): ovrd gives the API one that asks its gobgpd.

use super::AppState;
use super::intent::Pending;
use crate::error::{ApiError, ErrorBody};
use crate::learnt::LearntKey;
use axum::Json;
use axum::extract::State;
use serde_json::Value;

/// What the API asks of the BGP speaker.
pub trait BgpView: Send + Sync {
    /// The neighbors: address, AS, session state, routes received and advertised.
    fn neighbors(&self) -> Pending<Value>;
    /// The EVPN routes, each with `direction` (in, out) and `neighbor`.
    fn routes(&self) -> Pending<Value>;
    /// What of the learnt routes is installed: the reachability source, the VTEPs with
    /// their underlay MACs (or why not resolved yet), entries by kind, what was skipped
    /// and refused by reason.
    fn installed(&self) -> Value;
}

fn view(s: &AppState) -> Result<&dyn BgpView, ApiError> {
    s.bgp
        .get()
        .map(|b| b.as_ref())
        .ok_or_else(|| ApiError::NotFound("ovrd speaks no BGP (started without --bgp)".into()))
}

#[utoipa::path(get, path = "/api/v1/bgp/neighbors", tag = "bgp",
    responses((status = 200, description = "the speaker's neighbors and their sessions",
        content_type = "application/json"),
        (status = 404, description = "ovrd speaks no BGP", body = ErrorBody),
        (status = 503, description = "the speaker does not answer", body = ErrorBody)))]
pub async fn neighbors(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    view(&s)?.neighbors().await.map(Json)
}

#[utoipa::path(get, path = "/api/v1/bgp/routes", tag = "bgp",
    responses((status = 200, description = "EVPN routes out (this host's) and in (learnt)",
        content_type = "application/json"),
        (status = 404, description = "ovrd speaks no BGP", body = ErrorBody),
        (status = 503, description = "the speaker does not answer", body = ErrorBody)))]
pub async fn routes(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    view(&s)?.routes().await.map(Json)
}

#[utoipa::path(get, path = "/api/v1/bgp/installed", tag = "bgp",
    responses((status = 200, description = "what of the learnt routes is installed: VTEPs \
        (resolved or not), entries by kind, skipped and refused routes by reason",
        content_type = "application/json"),
        (status = 404, description = "ovrd speaks no BGP", body = ErrorBody)))]
pub async fn installed(State(s): State<AppState>) -> Result<Json<Value>, ApiError> {
    Ok(Json(view(&s)?.installed()))
}

/// A learnt bridge entry.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct LearntBridge {
    pub network: String,
    pub mac: String,
    pub nexthop: String,
    /// False while a configured entry has its key, or its network or next hop is not
    /// there (yet).
    pub installed: bool,
}

/// A learnt host route.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct LearntRoute {
    pub network: String,
    pub prefix: String,
    pub nexthop: String,
    /// As for a bridge entry.
    pub installed: bool,
}

/// The entries learnt from peers, kept beside the configuration.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct LearntEntries {
    pub bridge: Vec<LearntBridge>,
    pub routes: Vec<LearntRoute>,
}

#[utoipa::path(get, path = "/api/v1/bgp/learnt", tag = "bgp",
    responses((status = 200, description = "the bridge entries and host routes learnt \
        from peers (EVPN type 2), which the configuration does not hold", body = LearntEntries),
        (status = 404, description = "ovrd speaks no BGP", body = ErrorBody)))]
pub async fn learnt(State(s): State<AppState>) -> Result<Json<LearntEntries>, ApiError> {
    view(&s)?;
    s.read(|a| {
        let l = a.learnt();
        let bridge = l.bridge().map(|(n, mac, nh)| LearntBridge {
            network: n.to_string(),
            mac: mac.to_string(),
            nexthop: nh.to_string(),
            installed: a.learnt_installed(n, LearntKey::Bridge(mac)),
        });
        let routes = l.routes().map(|(n, p, nh)| LearntRoute {
            network: n.to_string(),
            prefix: p.to_string(),
            nexthop: nh.to_string(),
            installed: a.learnt_installed(n, LearntKey::Route(p)),
        });
        LearntEntries {
            bridge: bridge.collect(),
            routes: routes.collect(),
        }
    })
    .await
    .map(Json)
}
