//! The cluster's intent through this ovrd
//! (`/api/v1/cluster/{networks,policies,ports,services,chains}`):
//! when ovrd is a member of a cluster, any of its APIs reads and writes the networks,
//! policies and ports of the whole cluster, as `ovrctl cluster` does (and the CNI
//! plugin, which only talks to its host's ovrd). The store behind it is a small trait
//! (`IntentStore`): ovrd gives the API etcd's, the tests one of their own.
//!
//! Objects are those `ovrctl cluster ... list --json` prints: the value's fields plus the
//! names its key holds (`name`, and `host` for ports). POST to the collection creates
//! only (409 if the name exists); PUT to the object creates or replaces; the body of a
//! PUT may repeat the names of its path. A value the agents would refuse is 422, naming
//! the field; etcd away is 503. Nothing is written unless it is valid.

use super::AppState;
use crate::error::{ApiError, ErrorBody};
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::future::Future;
use std::pin::Pin;

/// The kinds of intent written through the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntentKind {
    Network,
    Policy,
    Port,
    Service,
    Chain,
}

/// One object of intent: its kind and names (`host` only for ports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IntentKey {
    pub kind: IntentKind,
    pub host: String,
    pub name: String,
}

/// An answer from the store, later.
pub type Pending<T> = Pin<Box<dyn Future<Output = Result<T, ApiError>> + Send>>;

/// Where the cluster's intent is kept. Each call checks and writes (or reads) one key;
/// refusals are `ApiError`s (422 invalid, 409 exists, 404 not found, 503 unreachable).
pub trait IntentStore: Send + Sync {
    /// Every object of a kind (ports: of one host if given).
    fn list(&self, kind: IntentKind, host: Option<String>) -> Pending<Vec<Value>>;
    fn get(&self, key: IntentKey) -> Pending<Value>;
    /// Writes `value` (without names): created only if absent unless `replace`. The
    /// revision written at.
    fn write(&self, key: IntentKey, value: Value, replace: bool) -> Pending<i64>;
    /// The revision deleted at.
    fn delete(&self, key: IntentKey) -> Pending<i64>;
}

fn store(s: &AppState) -> Result<&dyn IntentStore, ApiError> {
    s.cluster()
        .map(|c| c.intent.as_ref())
        .ok_or_else(|| ApiError::NotFound("ovrd is not a member of a cluster (started without --etcd): its configuration is written through /api/v1/config and the other /api/v1 resources".into()))
}

/// This host's name in the cluster (the default host of a port).
fn this_host(s: &AppState) -> String {
    s.cluster().map(|c| c.host.clone()).unwrap_or_default()
}

/// Takes `field` out of a body: it must be a string, and equal `expect` when given.
fn take_name(
    o: &mut Map<String, Value>,
    field: &str,
    expect: Option<&str>,
) -> Result<Option<String>, ApiError> {
    match o.remove(field) {
        None => Ok(None),
        Some(Value::String(n)) => match expect {
            Some(e) if e != n => Err(ApiError::invalid(
                field,
                format!("'{n}' differs from the path's '{e}'"),
            )),
            _ => Ok(Some(n)),
        },
        Some(_) => Err(ApiError::invalid(field, "a name is a string")),
    }
}

fn object(body: Value) -> Result<Map<String, Value>, ApiError> {
    match body {
        Value::Object(o) => Ok(o),
        _ => Err(ApiError::invalid("", "the body is a JSON object")),
    }
}

/// What a write answers: the key's names, the revision and the value stored.
fn written(key: &IntentKey, revision: i64, value: Value) -> Json<Value> {
    let mut o = json!({ "name": key.name, "revision": revision, "value": value });
    if key.kind == IntentKind::Port {
        o["host"] = key.host.clone().into();
    }
    Json(o)
}

async fn create(
    s: AppState,
    kind: IntentKind,
    body: Value,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let st = store(&s)?;
    let mut o = object(body)?;
    let name = take_name(&mut o, "name", None)?
        .ok_or_else(|| ApiError::invalid("name", "missing field `name`"))?;
    let host = match kind {
        IntentKind::Port => take_name(&mut o, "host", None)?.unwrap_or_else(|| this_host(&s)),
        _ => String::new(),
    };
    let key = IntentKey { kind, host, name };
    let value = Value::Object(o);
    let revision = st.write(key.clone(), value.clone(), false).await?;
    Ok((StatusCode::CREATED, written(&key, revision, value)))
}

async fn replace(s: AppState, key: IntentKey, body: Value) -> Result<Json<Value>, ApiError> {
    let st = store(&s)?;
    let mut o = object(body)?;
    take_name(&mut o, "name", Some(&key.name))?;
    if key.kind == IntentKind::Port {
        take_name(&mut o, "host", Some(&key.host))?;
    }
    let value = Value::Object(o);
    let revision = st.write(key.clone(), value.clone(), true).await?;
    Ok(written(&key, revision, value))
}

async fn delete(s: AppState, key: IntentKey) -> Result<Json<Value>, ApiError> {
    let revision = store(&s)?.delete(key.clone()).await?;
    let mut o = json!({ "name": key.name, "revision": revision });
    if key.kind == IntentKind::Port {
        o["host"] = key.host.into();
    }
    Ok(Json(o))
}

/// Networks, policies, services and chains: keyed by a name.
macro_rules! named {
    ($m:ident, $list:tt, $one:tt, $kind:ident) => {
        pub mod $m {
            use super::*;

            fn key(name: String) -> IntentKey {
                IntentKey { kind: IntentKind::$kind, host: String::new(), name }
            }

            #[utoipa::path(get, path = $list, tag = "cluster",
                responses((status = 200, description = "every object, as ovrctl cluster lists them",
                    content_type = "application/json"),
                    (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
            pub async fn list(State(s): State<AppState>) -> Result<Json<Vec<Value>>, ApiError> {
                store(&s)?.list(IntentKind::$kind, None).await.map(Json)
            }

            #[utoipa::path(post, path = $list, tag = "cluster",
                request_body(content = Object, description = "the value with its `name`"),
                responses((status = 201, description = "written", content_type = "application/json"),
                    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
                    (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
                    (status = 503, body = ErrorBody)))]
            pub async fn create(State(s): State<AppState>, super::super::Body(b): super::super::Body<Value>)
                -> Result<(StatusCode, Json<Value>), ApiError> {
                super::create(s, IntentKind::$kind, b).await
            }

            #[utoipa::path(get, path = $one, tag = "cluster", params(("name" = String, Path)),
                responses((status = 200, description = "the object", content_type = "application/json"),
                    (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
            pub async fn get(State(s): State<AppState>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
                store(&s)?.get(key(name)).await.map(Json)
            }

            #[utoipa::path(put, path = $one, tag = "cluster", params(("name" = String, Path)),
                request_body(content = Object, description = "the value"),
                responses((status = 200, description = "written", content_type = "application/json"),
                    (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
                    (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
            pub async fn replace(State(s): State<AppState>, Path(name): Path<String>,
                super::super::Body(b): super::super::Body<Value>) -> Result<Json<Value>, ApiError> {
                super::replace(s, key(name), b).await
            }

            #[utoipa::path(delete, path = $one, tag = "cluster", params(("name" = String, Path)),
                responses((status = 200, description = "deleted", content_type = "application/json"),
                    (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
            pub async fn delete(State(s): State<AppState>, Path(name): Path<String>) -> Result<Json<Value>, ApiError> {
                super::delete(s, key(name)).await
            }
        }
    };
}

named!(
    networks,
    "/api/v1/cluster/networks",
    "/api/v1/cluster/networks/{name}",
    Network
);
named!(
    policies,
    "/api/v1/cluster/policies",
    "/api/v1/cluster/policies/{name}",
    Policy
);

named!(
    services,
    "/api/v1/cluster/services",
    "/api/v1/cluster/services/{name}",
    Service
);
named!(
    chains,
    "/api/v1/cluster/chains",
    "/api/v1/cluster/chains/{name}",
    Chain
);

/// Ports: keyed by host and name; a port created without `host` is this host's.
pub mod ports {
    use super::*;

    #[derive(Debug, Deserialize, utoipa::IntoParams)]
    #[serde(deny_unknown_fields)]
    pub struct Filter {
        /// Only this host's ports.
        pub host: Option<String>,
    }

    fn key(host: String, name: String) -> IntentKey {
        IntentKey {
            kind: IntentKind::Port,
            host,
            name,
        }
    }

    #[utoipa::path(get, path = "/api/v1/cluster/ports", tag = "cluster", params(Filter),
        responses((status = 200, description = "every port (of one host with ?host=)",
            content_type = "application/json"),
            (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
            (status = 503, body = ErrorBody)))]
    pub async fn list(
        State(s): State<AppState>,
        q: Result<Query<Filter>, axum::extract::rejection::QueryRejection>,
    ) -> Result<Json<Vec<Value>>, ApiError> {
        let Query(f) = q.map_err(|e| ApiError::bad("host", e.body_text()))?;
        store(&s)?.list(IntentKind::Port, f.host).await.map(Json)
    }

    #[utoipa::path(post, path = "/api/v1/cluster/ports", tag = "cluster",
        request_body(content = Object, description = "the value with its `name` (and `host`: this host's if absent)"),
        responses((status = 201, description = "written", content_type = "application/json"),
            (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
            (status = 409, body = ErrorBody), (status = 422, body = ErrorBody),
            (status = 503, body = ErrorBody)))]
    pub async fn create(
        State(s): State<AppState>,
        super::super::Body(b): super::super::Body<Value>,
    ) -> Result<(StatusCode, Json<Value>), ApiError> {
        super::create(s, IntentKind::Port, b).await
    }

    #[utoipa::path(get, path = "/api/v1/cluster/ports/{host}/{name}", tag = "cluster",
        params(("host" = String, Path), ("name" = String, Path)),
        responses((status = 200, description = "the port", content_type = "application/json"),
            (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
    pub async fn get(
        State(s): State<AppState>,
        Path((host, name)): Path<(String, String)>,
    ) -> Result<Json<Value>, ApiError> {
        store(&s)?.get(key(host, name)).await.map(Json)
    }

    #[utoipa::path(put, path = "/api/v1/cluster/ports/{host}/{name}", tag = "cluster",
        params(("host" = String, Path), ("name" = String, Path)),
        request_body(content = Object, description = "the value"),
        responses((status = 200, description = "written", content_type = "application/json"),
            (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
            (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
    pub async fn replace(
        State(s): State<AppState>,
        Path((host, name)): Path<(String, String)>,
        super::super::Body(b): super::super::Body<Value>,
    ) -> Result<Json<Value>, ApiError> {
        super::replace(s, key(host, name), b).await
    }

    #[utoipa::path(delete, path = "/api/v1/cluster/ports/{host}/{name}", tag = "cluster",
        params(("host" = String, Path), ("name" = String, Path)),
        responses((status = 200, description = "deleted", content_type = "application/json"),
            (status = 404, body = ErrorBody), (status = 503, body = ErrorBody)))]
    pub async fn delete(
        State(s): State<AppState>,
        Path((host, name)): Path<(String, String)>,
    ) -> Result<Json<Value>, ApiError> {
        super::delete(s, key(host, name)).await
    }
}
