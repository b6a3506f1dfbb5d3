//! Looking at packets: the packet trace (the path and decisions of the next N packets)
//! and pcap captures of an interface. Both are served by the forwarding worker; a
//! capture's file is written by its own thread.

use super::config::param;
use super::{AppState, Body};
use crate::capture::{CaptureInfo, CaptureRequest, Captures, Prepared};
use crate::error::{ApiError, ErrorBody};
use crate::worker::{TraceDump, WorkerClient};
use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};
use utoipa::ToSchema;

/// Most packets one request may add to the trace (the trace holds at most 10000
/// pending).
pub const MAX_TRACE_ADD: u32 = 1000;

fn worker(s: &AppState) -> Result<&WorkerClient, ApiError> {
    s.worker
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no forwarding worker in this process".into()))
}

/// Runs `f` on the captures off the async threads (it may create a file or wait for a
/// writer to flush).
async fn with_captures<T: Send + 'static>(
    s: &AppState,
    f: impl FnOnce(&mut Captures) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let c: Arc<Mutex<Captures>> = Arc::clone(&s.captures);
    tokio::task::spawn_blocking(move || {
        let mut c = c
            .lock()
            .map_err(|_| ApiError::Internal("the capture list failed earlier".into()))?;
        Ok(f(&mut c))
    })
    .await
    .map_err(|e| ApiError::Internal(format!("the capture task failed: {e}")))?
}

/// How many packets to trace.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TraceAdd {
    /// The next this many arriving packets (1 to 1000; added to those still pending).
    pub packets: u32,
}

/// Packets still to be traced.
#[derive(Debug, Serialize, ToSchema)]
pub struct TracePending {
    pub pending: u32,
}

#[utoipa::path(post, path = "/api/v1/trace", tag = "trace", request_body = TraceAdd,
    responses((status = 200, body = TracePending), (status = 400, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn trace_add(
    State(s): State<AppState>,
    Body(r): Body<TraceAdd>,
) -> Result<Json<TracePending>, ApiError> {
    if !(1..=MAX_TRACE_ADD).contains(&r.packets) {
        return Err(ApiError::invalid(
            "packets",
            format!("{} is out of range (1 to {MAX_TRACE_ADD})", r.packets),
        ));
    }
    let pending = worker(&s)?.trace_add(r.packets).await?;
    Ok(Json(TracePending { pending }))
}

#[utoipa::path(get, path = "/api/v1/trace", tag = "trace",
    responses((status = 200, body = TraceDump), (status = 503, body = ErrorBody)))]
pub async fn trace(State(s): State<AppState>) -> Result<Json<TraceDump>, ApiError> {
    let mut d = worker(&s)?.trace().await?;
    let names = s.read(|a| a.names().clone()).await?;
    for p in &mut d.packets {
        p.rx_interface = names
            .interface_name(ovr_tables::ids::InterfaceId(p.rx_interface_id))
            .map(str::to_string);
    }
    Ok(Json(d))
}

/// The trace was cleared.
#[derive(Debug, Serialize, ToSchema)]
pub struct TraceCleared {
    pub cleared: bool,
}

#[utoipa::path(delete, path = "/api/v1/trace", tag = "trace",
    responses((status = 200, body = TraceCleared), (status = 503, body = ErrorBody)))]
pub async fn trace_clear(State(s): State<AppState>) -> Result<Json<TraceCleared>, ApiError> {
    worker(&s)?.trace_clear().await?;
    Ok(Json(TraceCleared { cleared: true }))
}

#[utoipa::path(get, path = "/api/v1/captures", tag = "captures",
    responses((status = 200, body = Vec<CaptureInfo>)))]
pub async fn captures(State(s): State<AppState>) -> Result<Json<Vec<CaptureInfo>>, ApiError> {
    Ok(Json(with_captures(&s, Captures::list).await?))
}

#[utoipa::path(post, path = "/api/v1/captures", tag = "captures", request_body = CaptureRequest,
    responses((status = 201, body = CaptureInfo), (status = 400, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn capture_start(
    State(s): State<AppState>,
    Body(r): Body<CaptureRequest>,
) -> Result<(StatusCode, Json<CaptureInfo>), ApiError> {
    let w = worker(&s)?.clone();
    let name = r.interface.clone();
    let iface = s
        .read(move |a| a.names().interfaces.get(&name).map(|i| i.0))
        .await?;
    let p: Prepared = with_captures(&s, move |c| c.prepare(&r, iface)).await??;
    let (tap, pending) = p.split();
    if let Err(e) = w.capture_start(tap).await {
        pending.abandon();
        return Err(e);
    }
    let info = with_captures(&s, move |c| c.started(pending)).await?;
    Ok((StatusCode::CREATED, Json(info)))
}

fn capture_id(id: &str) -> Result<u32, ApiError> {
    param("id", id)
}

#[utoipa::path(get, path = "/api/v1/captures/{id}", tag = "captures", params(("id" = String, Path)),
    responses((status = 200, body = CaptureInfo), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)))]
pub async fn capture(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<CaptureInfo>, ApiError> {
    let id = capture_id(&id)?;
    let all = with_captures(&s, Captures::list).await?;
    all.into_iter()
        .find(|c| c.id == id)
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no capture {id}")))
}

#[utoipa::path(delete, path = "/api/v1/captures/{id}", tag = "captures",
    params(("id" = String, Path)),
    responses((status = 200, description = "stopped, the file flushed: the final counters",
        body = CaptureInfo), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn capture_stop(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<CaptureInfo>, ApiError> {
    let id = capture_id(&id)?;
    if !with_captures(&s, move |c| c.contains(id)).await? {
        return Err(ApiError::NotFound(format!("no capture {id}")));
    }
    // The tap goes first (it may be gone already: count or time reached), then the
    // writer flushes and the capture is forgotten.
    worker(&s)?.capture_stop(id).await?;
    with_captures(&s, move |c| c.finish(id))
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::NotFound(format!("no capture {id}")))
}
