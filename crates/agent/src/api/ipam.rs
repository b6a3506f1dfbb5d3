//! Addresses handed out cluster-wide through this ovrd (`/api/v1/cluster/ipam/{network}`),
//! what the CNI plugin's `ovr` IPAM type calls: allocate an address of the network's
//! subnet for an owner (the same owner asking again gets the same address), list the
//! leases, release an owner's. The store is a small trait (`IpamStore`): ovrd gives the
//! API etcd's (`ovr_cluster::ipam`), where no address is given twice across hosts.

use super::AppState;
use super::intent::Pending;
use crate::error::{ApiError, ErrorBody};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use core::net::IpAddr;
use serde::Deserialize;
use serde_json::Value;

/// Where leases are kept. Answers are JSON: a lease is `{"address", "owner", "host",
/// "tag"}`, an allocation adds `prefix_len` and `gateway`.
pub trait IpamStore: Send + Sync {
    fn allocate(&self, network: String, request: Allocate) -> Pending<Value>;
    /// The addresses released (none is not an error).
    fn release(&self, network: String, owner: String, address: Option<IpAddr>) -> Pending<Value>;
    fn list(&self, network: String) -> Pending<Value>;
}

/// `POST /api/v1/cluster/ipam/{network}`'s body.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Allocate {
    /// Who holds the address (the CNI plugin: the port's name).
    pub owner: String,
    /// The host it is for (this host if absent).
    #[serde(default)]
    pub host: Option<String>,
    /// Which configuration asks (a CNI network's name), for garbage collection.
    #[serde(default)]
    pub tag: String,
    /// This address, if free (else 409).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub address: Option<IpAddr>,
    /// Without `address`: any address of the network's IPv4 (4, the default) or IPv6 (6)
    /// subnet.
    #[serde(default)]
    pub family: Option<u8>,
}

/// `DELETE /api/v1/cluster/ipam/{network}`'s query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct Release {
    /// Whose addresses.
    pub owner: String,
    /// Only this one.
    #[param(value_type = Option<String>)]
    pub address: Option<IpAddr>,
}

fn store(s: &AppState) -> Result<&dyn IpamStore, ApiError> {
    s.cluster().and_then(|c| c.ipam.as_deref()).ok_or_else(|| {
        ApiError::NotFound(
            "ovrd is not a member of a cluster (started without --etcd): no cluster-wide addresses"
                .into(),
        )
    })
}

#[utoipa::path(get, path = "/api/v1/cluster/ipam/{network}", tag = "cluster",
    params(("network" = String, Path)),
    responses((status = 200, description = "the network's leases", content_type = "application/json"),
        (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(s): State<AppState>,
    Path(network): Path<String>,
) -> Result<Json<Value>, ApiError> {
    store(&s)?.list(network).await.map(Json)
}

#[utoipa::path(post, path = "/api/v1/cluster/ipam/{network}", tag = "cluster",
    params(("network" = String, Path)), request_body = Allocate,
    responses((status = 201, description = "the address (the owner's, if it holds one already)",
        content_type = "application/json"),
        (status = 400, description = "the body is not JSON", body = ErrorBody),
        (status = 404, description = "no such network", body = ErrorBody),
        (status = 409, description = "the address asked for is taken, or none is free", body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn allocate(
    State(s): State<AppState>,
    Path(network): Path<String>,
    super::Body(mut a): super::Body<Allocate>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let st = store(&s)?;
    if a.owner.is_empty() {
        return Err(ApiError::invalid("owner", "an owner is needed"));
    }
    if !matches!(a.family, None | Some(4 | 6)) {
        return Err(ApiError::invalid("family", "4 or 6"));
    }
    if a.address.is_some() && a.family.is_some() {
        return Err(ApiError::invalid(
            "family",
            "an address or a family, not both",
        ));
    }
    if a.host.is_none() {
        a.host = s.cluster().map(|c| c.host.clone());
    }
    let v = st.allocate(network, a).await?;
    Ok((StatusCode::CREATED, Json(v)))
}

#[utoipa::path(delete, path = "/api/v1/cluster/ipam/{network}", tag = "cluster",
    params(("network" = String, Path), Release),
    responses((status = 200, description = "the addresses released: {\"released\": [...]}",
        content_type = "application/json"),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn release(
    State(s): State<AppState>,
    Path(network): Path<String>,
    q: Result<Query<Release>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(r) = q.map_err(|e| ApiError::bad("owner", e.body_text()))?;
    store(&s)?
        .release(network, r.owner, r.address)
        .await
        .map(Json)
}
