//! Counters (per interface, per node, per drop reason), flows (dump with per-flow
//! counters, delete) and Prometheus metrics: answered by the forwarding worker.

use super::AppState;
use super::config::param;
use crate::error::{ApiError, ErrorBody};
use crate::worker::{FlowDump, FlowFilter, WorkerClient};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use ovr_dataplane::counters::{InterfaceSnapshot, Snapshot};
use serde::Serialize;
use std::collections::HashMap;
use utoipa::ToSchema;

/// Flows returned unless `limit` says otherwise.
const DEFAULT_FLOW_LIMIT: usize = 1000;

fn worker(s: &AppState) -> Result<&WorkerClient, ApiError> {
    s.worker
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("no forwarding worker in this process".into()))
}

/// The worker's counters, interfaces named (configured ones without traffic included).
pub(super) async fn snapshot(s: &AppState) -> Result<Snapshot, ApiError> {
    let mut snap = worker(s)?.counters().await?;
    let names = s.names();
    let names = &names.interfaces;
    for i in &mut snap.interfaces {
        if let Some((n, _)) = names.iter().find(|(_, id)| id.0 == i.id) {
            i.name.clone_from(n);
        }
    }
    for (name, id) in names {
        if !snap.interfaces.iter().any(|i| i.id == id.0) {
            snap.interfaces.push(InterfaceSnapshot {
                id: id.0,
                name: name.clone(),
                rx_packets: 0,
                rx_bytes: 0,
                tx_packets: 0,
                tx_bytes: 0,
            });
        }
    }
    snap.interfaces.sort_by_key(|i| i.id);
    Ok(snap)
}

#[utoipa::path(get, path = "/api/v1/counters", tag = "counters",
    responses((status = 200, description = "interfaces, nodes, drops by reason, flows",
        content_type = "application/json"), (status = 503, body = ErrorBody)))]
pub async fn counters(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(snapshot(&s).await?))
}

#[utoipa::path(get, path = "/api/v1/counters/interfaces", tag = "counters",
    responses((status = 200, description = "per interface", content_type = "application/json"),
        (status = 503, body = ErrorBody)))]
pub async fn interface_counters(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(snapshot(&s).await?.interfaces))
}

#[utoipa::path(get, path = "/api/v1/counters/nodes", tag = "counters",
    responses((status = 200, description = "per graph node", content_type = "application/json"),
        (status = 503, body = ErrorBody)))]
pub async fn node_counters(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(snapshot(&s).await?.nodes))
}

#[utoipa::path(get, path = "/api/v1/counters/drops", tag = "counters",
    responses((status = 200, description = "drops by reason (reasons with none left out)",
        content_type = "application/json"), (status = 503, body = ErrorBody)))]
pub async fn drop_counters(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(snapshot(&s).await?.drops))
}

#[utoipa::path(get, path = "/api/v1/cluster", tag = "cluster",
    responses((status = 200, description = "this host's standing in its cluster: connected, \
        the etcd revision applied, keys rejected with the reason, networks installed",
        content_type = "application/json"),
        (status = 404, description = "ovrd is not a member of a cluster", body = ErrorBody)))]
pub async fn cluster(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    match s.cluster() {
        Some(c) => {
            let mut r = (c.report)();
            if let Some(o) = r.as_object_mut() {
                o.insert("host".into(), c.host.clone().into());
            }
            Ok(Json(r))
        }
        None => Err(ApiError::NotFound(
            "ovrd is not a member of a cluster (started without --etcd)".into(),
        )),
    }
}

#[utoipa::path(get, path = "/api/v1/links", tag = "counters",
    responses((status = 200, description = "the links of interfaces with a peer of their own \
        (memif): name, role, socket, id, state (up, connecting, down), the peer's name, \
        interface and protocol version, why it last went down, disconnects by reason, frames \
        refused for a bad descriptor by reason", content_type = "application/json")))]
pub async fn links(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    Ok(Json(s.links()))
}

#[utoipa::path(get, path = "/metrics", tag = "counters",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"),
        (status = 503, body = ErrorBody)))]
pub async fn metrics(State(s): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let mut text = crate::metrics::render(&snapshot(&s).await?);
    if let Some(c) = s.cluster() {
        text.push_str(&(c.metrics)());
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

/// The flow filter from the query: `network` (name) or `vrf` (id), `addr`, `port`,
/// `limit`.
async fn filter(s: &AppState, q: &HashMap<String, String>) -> Result<FlowFilter, ApiError> {
    let mut f = FlowFilter {
        limit: DEFAULT_FLOW_LIMIT,
        ..FlowFilter::default()
    };
    for (k, v) in q {
        match k.as_str() {
            "vrf" => f.vrf = Some(param("vrf", v)?),
            "network" => {
                let id = s.names().networks.get(v).map(|i| i.0);
                f.vrf =
                    Some(id.ok_or_else(|| {
                        ApiError::bad("network", format!("no network named '{v}'"))
                    })?);
            }
            "addr" => f.addr = Some(param("addr", v)?),
            "port" => f.port = Some(param("port", v)?),
            "limit" => f.limit = param("limit", v)?,
            _ => {
                return Err(ApiError::bad(
                    k,
                    "unknown parameter (network, vrf, addr, port, limit)",
                ));
            }
        }
    }
    Ok(f)
}

/// Names the networks and next hops of dumped flows.
async fn named(s: &AppState, mut d: FlowDump) -> Result<FlowDump, ApiError> {
    let names = s.names();
    for f in &mut d.flows {
        f.network = names
            .network_name(ovr_tables::ids::VrfId(f.vrf))
            .map(str::to_string);
        f.nexthop_name = f
            .nexthop
            .and_then(|n| names.nexthop_name(ovr_tables::ids::NextHopId(n)))
            .map(str::to_string);
    }
    Ok(d)
}

#[utoipa::path(get, path = "/api/v1/flows", tag = "flows",
    params(("network" = Option<String>, Query), ("vrf" = Option<u32>, Query),
        ("addr" = Option<String>, Query, description = "source or destination address"),
        ("port" = Option<u16>, Query, description = "source or destination port"),
        ("limit" = Option<usize>, Query, description = "most flows returned (default 1000)")),
    responses((status = 200, body = FlowDump), (status = 400, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn flows(
    State(s): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<FlowDump>, ApiError> {
    let f = filter(&s, &q).await?;
    let d = worker(&s)?.flows(f).await?;
    Ok(Json(named(&s, d).await?))
}

/// How many flow entries were removed.
#[derive(Debug, Serialize, ToSchema)]
pub struct Removed {
    pub removed: usize,
}

#[utoipa::path(delete, path = "/api/v1/flows", tag = "flows",
    params(("network" = Option<String>, Query), ("vrf" = Option<u32>, Query),
        ("addr" = Option<String>, Query), ("port" = Option<u16>, Query)),
    responses((status = 200, body = Removed), (status = 400, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn delete_flows(
    State(s): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Removed>, ApiError> {
    let f = filter(&s, &q).await?;
    let removed = worker(&s)?.delete_flows(f).await?;
    Ok(Json(Removed { removed }))
}

#[utoipa::path(get, path = "/api/v1/flows/{id}", tag = "flows", params(("id" = String, Path)),
    responses((status = 200, body = FlowDump), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn flow(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<FlowDump>, ApiError> {
    let f = FlowFilter {
        id: Some(param("id", &id)?),
        limit: 1,
        ..FlowFilter::default()
    };
    let d = worker(&s)?.flows(f).await?;
    if d.flows.is_empty() {
        return Err(ApiError::NotFound(format!("no flow {id}")));
    }
    Ok(Json(named(&s, d).await?))
}

#[utoipa::path(delete, path = "/api/v1/flows/{id}", tag = "flows", params(("id" = String, Path)),
    responses((status = 200, body = Removed), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete_flow(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Removed>, ApiError> {
    let f = FlowFilter {
        id: Some(param("id", &id)?),
        limit: 1,
        ..FlowFilter::default()
    };
    let removed = worker(&s)?.delete_flows(f).await?;
    if removed == 0 {
        return Err(ApiError::NotFound(format!("no flow {id}")));
    }
    Ok(Json(Removed { removed }))
}
