//! BGP as this ovrd's speaker sees it (`ovrd --bgp`): its neighbors with their sessions,
//! and the EVPN routes out (advertised for this host) and in (learnt, with why ovr
//! refuses those it does not use). The speaker is behind a small trait (`BgpView`):
//! ovrd gives the API one that asks its gobgpd.

use super::AppState;
use super::intent::Pending;
use crate::error::{ApiError, ErrorBody};
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
